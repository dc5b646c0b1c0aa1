#include <cuda_runtime.h>
#include <dlfcn.h>

#include "core/cuda_check.h"
#include "tools/warpdecode/commands.h"

namespace wd::cli {
namespace {

// The driver's version and the current SM and memory clocks through NVML,
// loaded at run time so that the binary starts on machines without the
// NVIDIA driver (CI); what NVML cannot give is left as it is. The few NVML
// entry points are declared here by their documented C signatures.
void read_nvml(int dev, GpuInfo& g) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return;
  using Init = int (*)();
  using ByBus = int (*)(const char*, void**);
  using Clock = int (*)(void*, int, unsigned*);
  using Version = int (*)(char*, unsigned);
  auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<ByBus>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto clock = reinterpret_cast<Clock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
  auto version = reinterpret_cast<Version>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<Init>(dlsym(lib, "nvmlShutdown"));
  char bus[32] = {};
  if (init && shutdown && init() == 0) {
    char v[96] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
    if (version && version(v, sizeof v) == 0) g.driver = v;
    void* h = nullptr;
    unsigned sm = 0, mem = 0;
    if (by_bus && clock && cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess && by_bus(bus, &h) == 0 &&
        clock(h, 1 /*NVML_CLOCK_SM*/, &sm) == 0 && clock(h, 2 /*NVML_CLOCK_MEM*/, &mem) == 0) {
      g.sm_clock_mhz = int(sm);
      g.mem_clock_mhz = int(mem);
    }
    shutdown();
  }
  dlclose(lib);
}

}  // namespace

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
  read_nvml(dev, g);
  return g;
}

}  // namespace wd::cli
