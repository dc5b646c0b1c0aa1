// bench-moe's clock sampler (bench/clock_sampler.h): without NVML it reads
// nothing and says why; on a GPU whose driver has NVML it reads the SM
// clock, power and power-cap share while the GPU is busy.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "clock_sampler.h"
#include "core/cuda_check.h"
#include "kernels/bandwidth.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace wd::bench {
namespace {

// Runs everywhere: the library is never found, so nothing touches a GPU.
TEST(ClockSampler, WithoutNvmlReadsNothingAndSaysWhy) {
  ClockSampler s(0, "libwarpdecode-no-such-nvml.so.1");
  EXPECT_FALSE(s.available());
  EXPECT_NE(s.unavailable_reason().find("libwarpdecode-no-such-nvml.so.1"), std::string::npos) << s.unavailable_reason();
  s.start();
  const ClockReading r = s.stop();
  EXPECT_EQ(r.samples, 0);
  nlohmann::json rec = {{"us_median", 1.0}};
  add_clock_fields(rec, r);
  EXPECT_FALSE(rec.contains("sm_clock_mhz")) << rec.dump();
}

TEST(ClockSampler, ReadsTheSmClockWhileTheGpuStreams) {
  WD_REQUIRE_GPU();
  int device = 0;
  WD_CUDA_CHECK(cudaGetDevice(&device));
  ClockSampler s(device);
  if (!s.available()) GTEST_SKIP() << "NVML not usable here: " << s.unavailable_reason();
  cudaStream_t stream;
  WD_CUDA_CHECK(cudaStreamCreate(&stream));
  s.start(500);
  kernels::measure_bandwidth(size_t(1) << 30, 20, stream);  // tens of ms of streaming reads and copies
  WD_CUDA_CHECK(cudaStreamSynchronize(stream));
  const ClockReading r = s.stop();
  WD_CUDA_CHECK(cudaStreamDestroy(stream));
  ASSERT_GT(r.samples, 0);
  EXPECT_GT(r.sm_mhz_min, 100.0);
  EXPECT_LE(r.sm_mhz_min, r.sm_mhz_median);
  EXPECT_LT(r.sm_mhz_median, 5000.0);
  EXPECT_GT(r.power_w_median, 0.0);
  EXPECT_GE(r.power_capped, 0.0);
  EXPECT_LE(r.power_capped, 1.0);
  EXPECT_GT(s.power_limit_w(), 0.0);
  nlohmann::json rec;
  add_clock_fields(rec, r);
  EXPECT_EQ(rec.at("sm_clock_mhz").get<double>(), r.sm_mhz_median);
}

}  // namespace
}  // namespace wd::bench
