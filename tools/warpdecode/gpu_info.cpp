#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "nvml_loader.h"
#include "tools/warpdecode/commands.h"

namespace wd::cli {

std::optional<GpuInfo> query_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  int dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  WD_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  GpuInfo g;
  g.name = prop.name;
  g.sms = prop.multiProcessorCount;
  g.memory_bytes = prop.totalGlobalMem;
  g.l2_bytes = size_t(prop.l2CacheSize);
  g.cc_major = prop.major;
  g.cc_minor = prop.minor;
  int rt = 0, drv = 0, clk = 0;
  WD_CUDA_CHECK(cudaRuntimeGetVersion(&rt));
  WD_CUDA_CHECK(cudaDriverGetVersion(&drv));
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev));
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  g.cuda_runtime = ver(rt);
  g.cuda_driver = ver(drv);
  g.max_sm_clock_mhz = clk / 1000;
  // The driver's version and the current clocks: what NVML cannot give stays unknown.
  const bench::NvmlDevice nvml(dev);
  if (const auto v = nvml.driver_version()) g.driver = *v;
  const auto sm = nvml.sm_clock_mhz(), mem = nvml.mem_clock_mhz();
  if (sm && mem) {
    g.sm_clock_mhz = int(*sm);
    g.mem_clock_mhz = int(*mem);
  }
  return g;
}

}  // namespace wd::cli
