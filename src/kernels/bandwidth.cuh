// The card's memory ceilings, measured the same way as our kernels read:
// a streaming read (16-byte loads, every byte once, a checksum so nothing is
// optimised away), a streaming write (16-byte stores of a non-zero pattern,
// every byte once) and a device-to-device copy. The write ceiling is the one
// the classical path's permute stage (one row read, K rows written) answers to.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace wd::kernels {

struct BandwidthResult {
  double read_tbps = 0;   // bytes read / median time
  double write_tbps = 0;  // bytes written / median time
  double copy_tbps = 0;   // (bytes read + bytes written) / median time
  size_t bytes = 0;       // buffer size used
};

// Measures over a buffer of `bytes` (allocated and freed here; this is a
// set-up step, not a forward call), `reps` timed runs after warm-up.
BandwidthResult measure_bandwidth(size_t bytes, int reps, cudaStream_t stream);

// Streaming write of n 16-byte words (a pattern of i and `seed`, never zero).
void stream_write(uint4* data, size_t n, unsigned seed, cudaStream_t stream);

// Streaming read of n 16-byte words; writes one checksum word to *sink.
void stream_read(const uint4* data, size_t n, unsigned* sink, cudaStream_t stream);

}  // namespace wd::kernels
