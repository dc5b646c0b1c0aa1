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

// The loader both the sampler and `warpdecode info` / bench-moe's header read
// the driver through: on the device the driver has NVML, so every reading
// must come back and be plausible.
TEST(NvmlDevice, ReadsTheDriverClocksAndPowerOfTheCudaDevice) {
  WD_REQUIRE_GPU();
  int device = 0;
  WD_CUDA_CHECK(cudaGetDevice(&device));
  const NvmlDevice nvml(device);
  if (!nvml.available()) GTEST_SKIP() << "NVML not usable here: " << nvml.unavailable_reason();
  EXPECT_EQ(nvml.unavailable_reason(), "");
  const auto driver = nvml.driver_version();
  ASSERT_TRUE(driver.has_value());
  EXPECT_NE(driver->find('.'), std::string::npos) << *driver;  // e.g. 580.159.04
  ASSERT_TRUE(nvml.sm_clock_mhz().has_value());
  EXPECT_GT(*nvml.sm_clock_mhz(), 100u);
  EXPECT_LT(*nvml.sm_clock_mhz(), 5000u);
  ASSERT_TRUE(nvml.mem_clock_mhz().has_value());
  EXPECT_GT(*nvml.mem_clock_mhz(), 100u);
  ASSERT_TRUE(nvml.power_mw().has_value());
  EXPECT_GT(*nvml.power_mw(), 0u);
  EXPECT_TRUE(nvml.power_capped().has_value());
  ASSERT_TRUE(nvml.power_limit_w().has_value());
  EXPECT_GT(*nvml.power_limit_w(), 50.0);
}

}  // namespace
}  // namespace wd::bench
