// The card's memory ceilings, measured the same way as our kernels read:
// a streaming read (16-byte loads, every byte once, a checksum so nothing is
// optimised away) in several access patterns, the fastest of which is the
// read ceiling every "% of read" answers to (until session 42 only the
// grid-stride walk was timed, and on some cards warp decode's own reads ran
// up to 5 % faster than it: that ceiling was too low); a streaming write
// (16-byte stores of a non-zero pattern, every byte once) and a
// device-to-device copy. The write ceiling is the one the classical path's
// permute stage (one row read, K rows written) answers to.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>

namespace wd::kernels {

// The streaming-read patterns (every one reads each 16-byte word once,
// 2048 threads an SM, ld.global.nc with L1 no-allocate).
enum class ReadPattern {
  kGridStride,             // word i of each grid-wide pass; 8 passes in flight a thread
  kWarpChunks4,            // each warp its contiguous share; 4 steps of 512 bytes in flight
  kWarpChunks8,            // the same, 8 steps in flight
  kWarpChunks4EvictFirst,  // kWarpChunks4 with the L2 evict-first policy of the weight loads
  kCount                   // not a pattern: how many there are (a new one goes above)
};
constexpr int kReadPatterns = int(ReadPattern::kCount);
const char* read_pattern_name(ReadPattern p);

struct BandwidthResult {
  double read_tbps = 0;   // the fastest read pattern: bytes read / its median time
  std::array<double, kReadPatterns> read_pattern_tbps{};  // each pattern's, by ReadPattern
  double write_tbps = 0;  // bytes written / median time
  double copy_tbps = 0;   // (bytes read + bytes written) / median time
  size_t bytes = 0;       // buffer size used
};

// Measures over a buffer of `bytes` (allocated and freed here; this is a
// set-up step, not a forward call), `reps` timed runs after warm-up.
BandwidthResult measure_bandwidth(size_t bytes, int reps, cudaStream_t stream);

// Streaming write of n 16-byte words (a pattern of i and `seed`, never zero).
void stream_write(uint4* data, size_t n, unsigned seed, cudaStream_t stream);

// Streaming read of n 16-byte words in `pattern`; adds the sum over the
// words of (x ^ y ^ z ^ w) to *sink (mod 2^32): the same for every pattern.
void stream_read(const uint4* data, size_t n, unsigned* sink, cudaStream_t stream,
                 ReadPattern pattern = ReadPattern::kGridStride);

}  // namespace wd::kernels
