// See nvml_loader.h. NVML's C interface, the part used here (NVML API
// reference): every call returns 0 (NVML_SUCCESS) on success; nvmlDevice_t
// is an opaque pointer; clock type 1 is the SM clock and 2 the memory clock
// (MHz); power is in milliwatts; bit 0x4 of the clock-event reasons is the
// software power cap; the driver version buffer needs at most 80 bytes.
#include "nvml_loader.h"

#include <dlfcn.h>

#include <cstring>

#include <cuda_runtime.h>

namespace wd::bench {
namespace {

constexpr int kNvmlClockSm = 1;
constexpr int kNvmlClockMem = 2;
constexpr unsigned long long kSwPowerCap = 0x4ull;

template <class F>
F symbol(void* lib, const char* name) {
  // dlsym returns an object pointer; POSIX guarantees it converts to the function's type.
  static_assert(sizeof(F) == sizeof(void*), "function pointers must be object-pointer sized");
  void* p = dlsym(lib, name);
  F f;
  std::memcpy(&f, &p, sizeof f);
  return f;
}

}  // namespace

NvmlDevice::NvmlDevice(int cuda_device, const std::string& library) {
  lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    why_ = "cannot load " + library;
    return;
  }
  const auto init = symbol<int (*)()>(lib_, "nvmlInit_v2");
  const auto by_bus = symbol<int (*)(const char*, void**)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  shutdown_ = symbol<int (*)()>(lib_, "nvmlShutdown");
  driver_version_ = symbol<int (*)(char*, unsigned)>(lib_, "nvmlSystemGetDriverVersion");
  clock_info_ = symbol<int (*)(void*, int, unsigned*)>(lib_, "nvmlDeviceGetClockInfo");
  power_usage_ = symbol<int (*)(void*, unsigned*)>(lib_, "nvmlDeviceGetPowerUsage");
  power_limit_ = symbol<int (*)(void*, unsigned*)>(lib_, "nvmlDeviceGetEnforcedPowerLimit");
  event_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!event_reasons_)  // the name before driver 535
    event_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!init || !shutdown_ || init() != 0) {
    why_ = !init || !shutdown_ ? library + " lacks nvmlInit_v2 or nvmlShutdown" : "nvmlInit failed";
    return;
  }
  initialised_ = true;
  if (!by_bus || !driver_version_ || !clock_info_ || !power_usage_ || !power_limit_ || !event_reasons_) {
    why_ = library + " lacks an NVML function this needs";
    return;
  }
  char bus[32] = {};
  void* dev = nullptr;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess || by_bus(bus, &dev) != 0 || !dev) {
    cudaGetLastError();  // a failed runtime call must not reach the next error check
    why_ = "no NVML device for CUDA device " + std::to_string(cuda_device);
    return;
  }
  device_ = dev;
}

NvmlDevice::~NvmlDevice() {
  if (initialised_) shutdown_();
  if (lib_) dlclose(lib_);
}

std::optional<std::string> NvmlDevice::driver_version() const {
  char v[96] = {};
  if (!initialised_ || !driver_version_ || driver_version_(v, sizeof v) != 0) return std::nullopt;
  return std::string(v);
}

std::optional<unsigned> NvmlDevice::clock_mhz(int nvml_clock_type) const {
  unsigned mhz = 0;
  if (!available() || clock_info_(device_, nvml_clock_type, &mhz) != 0) return std::nullopt;
  return mhz;
}

std::optional<unsigned> NvmlDevice::sm_clock_mhz() const { return clock_mhz(kNvmlClockSm); }
std::optional<unsigned> NvmlDevice::mem_clock_mhz() const { return clock_mhz(kNvmlClockMem); }

std::optional<unsigned> NvmlDevice::power_mw() const {
  unsigned mw = 0;
  if (!available() || power_usage_(device_, &mw) != 0) return std::nullopt;
  return mw;
}

std::optional<bool> NvmlDevice::power_capped() const {
  unsigned long long reasons = 0;
  if (!available() || event_reasons_(device_, &reasons) != 0) return std::nullopt;
  return (reasons & kSwPowerCap) != 0;
}

std::optional<double> NvmlDevice::power_limit_w() const {
  unsigned mw = 0;
  if (!available() || power_limit_(device_, &mw) != 0) return std::nullopt;
  return mw / 1000.0;
}

}  // namespace wd::bench
