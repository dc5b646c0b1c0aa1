// See clock_sampler.h. NVML's C interface, the part used here (NVML API
// reference): every call returns 0 on success; nvmlDevice_t is an opaque
// pointer; clock type 1 is the SM clock (MHz); power is in milliwatts; bit
// 0x4 of the clock-event reasons is the software power cap.
#include "clock_sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "core/median.h"

namespace wd::bench {
namespace {

constexpr int kNvmlClockSm = 1;
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

void add_clock_fields(nlohmann::json& record, const ClockReading& r) {
  if (r.samples == 0) return;
  record["sm_clock_mhz"] = r.sm_mhz_median;
  record["sm_clock_mhz_min"] = r.sm_mhz_min;
  record["power_w"] = r.power_w_median;
  record["power_capped_share"] = r.power_capped;
}

ClockSampler::ClockSampler(int cuda_device, const std::string& library) {
  lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    why_ = "cannot load " + library;
    return;
  }
  const auto init = symbol<int (*)()>(lib_, "nvmlInit_v2");
  const auto by_bus = symbol<int (*)(const char*, void**)>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
  const auto limit = symbol<int (*)(void*, unsigned*)>(lib_, "nvmlDeviceGetEnforcedPowerLimit");
  shutdown_ = symbol<Fn>(lib_, "nvmlShutdown");
  clock_info_ = symbol<int (*)(void*, int, unsigned*)>(lib_, "nvmlDeviceGetClockInfo");
  power_usage_ = symbol<int (*)(void*, unsigned*)>(lib_, "nvmlDeviceGetPowerUsage");
  event_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (!event_reasons_)  // the name before driver 535
    event_reasons_ = symbol<int (*)(void*, unsigned long long*)>(lib_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!init || !by_bus || !shutdown_ || !clock_info_ || !power_usage_ || !event_reasons_) {
    why_ = library + " lacks an NVML function this needs";
    return;
  }
  if (init() != 0) {
    why_ = "nvmlInit failed";
    shutdown_ = nullptr;
    return;
  }
  char bus[32] = {};
  void* dev = nullptr;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess || by_bus(bus, &dev) != 0 || !dev) {
    cudaGetLastError();  // a failed runtime call must not reach the next error check
    why_ = "no NVML device for CUDA device " + std::to_string(cuda_device);
    return;
  }
  unsigned mw = 0;
  if (limit && limit(dev, &mw) == 0) power_limit_w_ = mw / 1000.0;
  device_ = dev;
}

ClockSampler::~ClockSampler() {
  if (running_) stop();
  if (shutdown_) shutdown_();
  if (lib_) dlclose(lib_);
}

void ClockSampler::start(int interval_us) {
  if (!available() || running_) return;
  samples_.clear();
  running_ = true;
  thread_ = std::thread([this, interval_us] {
    while (running_) {
      Sample s;
      unsigned long long reasons = 0;
      if (clock_info_(device_, kNvmlClockSm, &s.sm_mhz) == 0 && power_usage_(device_, &s.power_mw) == 0 &&
          event_reasons_(device_, &reasons) == 0) {
        s.capped = (reasons & kSwPowerCap) != 0;
        samples_.push_back(s);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(interval_us));
    }
  });
}

ClockReading ClockSampler::stop() {
  ClockReading r;
  if (!running_) return r;
  running_ = false;
  thread_.join();
  if (samples_.empty()) return r;
  std::vector<double> mhz, watts;
  int capped = 0;
  for (const Sample& s : samples_) {
    mhz.push_back(s.sm_mhz);
    watts.push_back(s.power_mw / 1000.0);
    capped += s.capped;
  }
  r.samples = int(samples_.size());
  r.sm_mhz_min = *std::min_element(mhz.begin(), mhz.end());
  r.sm_mhz_median = median(mhz);
  r.power_w_median = median(watts);
  r.power_capped = double(capped) / r.samples;
  return r;
}

}  // namespace wd::bench
