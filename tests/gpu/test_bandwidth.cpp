// The bandwidth kernels bench-moe measures its ceilings with: every read
// pattern reads each word exactly once (its checksum equals the host's), the
// streaming write stores every word of the buffer (its tail past the
// unrolled walk included) with its pattern, and measure_bandwidth reports
// all three rates, the read ceiling the fastest of the read patterns.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/bandwidth.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace wd::kernels {
namespace {

TEST(Bandwidth, StreamWriteStoresEveryWordOfItsPattern) {
  WD_REQUIRE_GPU();
  // Not a multiple of the unrolled walk's step, so the tail loop runs.
  const size_t n = (size_t(1) << 20) + 12345;
  const unsigned seed = 0x12345678u;
  DeviceBuffer<uint4> buf(n);
  WD_CUDA_CHECK(cudaMemset(buf.data(), 0xFF, buf.bytes()));  // poison: no pattern word is all ones
  stream_write(buf.data(), n, seed, nullptr);
  WD_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint4> host(n);
  WD_CUDA_CHECK(cudaMemcpy(host.data(), buf.data(), buf.bytes(), cudaMemcpyDeviceToHost));
  size_t wrong = 0, first_wrong = n;
  for (size_t j = 0; j < n; ++j) {
    const uint4 v = host[j];
    const bool ok = v.x == (unsigned(j) ^ seed) && v.y == seed && v.z == unsigned(j * 2654435761u) &&
                    v.w == 0x3F800000u;
    if (!ok && wrong++ == 0) first_wrong = j;
  }
  EXPECT_EQ(wrong, 0u) << "first wrong word " << first_wrong << " of " << n;
}

TEST(Bandwidth, EveryReadPatternReadsEachWordOnce) {
  WD_REQUIRE_GPU();
  // Sizes off every pattern's step (grid passes, 512-byte warp steps, the
  // warps' shares), one smaller than a warp's share, one below a warp step.
  for (const size_t n : {(size_t(1) << 22) + 12345, size_t(100003), size_t(17)}) {
    std::vector<uint4> host(n);
    uint32_t x = 0x2545F491u;
    unsigned want = 0;
    for (auto& v : host) {
      auto next = [&] { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x; };
      v = make_uint4(next(), next(), next(), next());
      want += v.x ^ v.y ^ v.z ^ v.w;
    }
    DeviceBuffer<uint4> buf(n);
    WD_CUDA_CHECK(cudaMemcpy(buf.data(), host.data(), buf.bytes(), cudaMemcpyHostToDevice));
    DeviceBuffer<unsigned> sink(1);
    for (int p = 0; p < kReadPatterns; ++p) {
      WD_CUDA_CHECK(cudaMemset(sink.data(), 0, sizeof(unsigned)));
      stream_read(buf.data(), n, sink.data(), nullptr, ReadPattern(p));
      unsigned got = 0;
      WD_CUDA_CHECK(cudaMemcpy(&got, sink.data(), sizeof(unsigned), cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, want) << read_pattern_name(ReadPattern(p)) << ", " << n << " words";
    }
  }
}

TEST(Bandwidth, MeasuresReadWriteAndCopyRates) {
  WD_REQUIRE_GPU();
  const BandwidthResult r = measure_bandwidth(size_t(256) << 20, 5, nullptr);
  EXPECT_EQ(r.bytes, size_t(256) << 20);
  for (const double tbps : {r.read_tbps, r.write_tbps, r.copy_tbps}) {
    EXPECT_TRUE(std::isfinite(tbps));
    EXPECT_GT(tbps, 0.05);  // any CUDA GPU streams 256 MiB faster than 50 GB/s
    EXPECT_LT(tbps, 100.0);
  }
  double best = 0;
  for (const double tbps : r.read_pattern_tbps) {
    EXPECT_TRUE(std::isfinite(tbps));
    EXPECT_GT(tbps, 0.05);
    best = std::max(best, tbps);
  }
  EXPECT_EQ(r.read_tbps, best);
}

}  // namespace
}  // namespace wd::kernels
