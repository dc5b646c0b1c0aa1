// NVML, the driver's management library (libnvidia-ml.so.1), loaded at run
// time for the one NVML device that is a given CUDA device: no build or link
// dependency on it, so binaries start on machines without the NVIDIA driver
// (CI) and simply read nothing there. Used by bench-moe's clock sampler
// (clock_sampler.h) and the CLI's device description (driver version and
// current clocks: tools/warpdecode/gpu_info.cpp).
//
// Every reading is std::nullopt where NVML cannot give it. Readings are safe
// from one thread at a time (the clock sampler's) while the object lives.
#pragma once

#include <optional>
#include <string>

namespace wd::bench {

class NvmlDevice {
 public:
  // Loads `library` (tests pass one that does not exist), initialises NVML
  // and finds the device whose PCI bus id is CUDA device `cuda_device`'s.
  explicit NvmlDevice(int cuda_device, const std::string& library = "libnvidia-ml.so.1");
  ~NvmlDevice();  // nvmlShutdown where nvmlInit succeeded, then unloads the library
  NvmlDevice(const NvmlDevice&) = delete;
  NvmlDevice& operator=(const NvmlDevice&) = delete;

  // The device was found and every reading below is resolved.
  bool available() const { return device_ != nullptr; }
  // Why not: the library, a symbol, NVML's init or the device lookup that failed ("" when available).
  const std::string& unavailable_reason() const { return why_; }

  // The driver's own version (e.g. "580.159.04"); a system-wide reading,
  // given whenever NVML initialised, even if the device was not found.
  std::optional<std::string> driver_version() const;
  std::optional<unsigned> sm_clock_mhz() const;
  std::optional<unsigned> mem_clock_mhz() const;
  std::optional<unsigned> power_mw() const;  // board power, NVML's own averaging window
  // Whether the software power cap is among the current clock-event reasons.
  std::optional<bool> power_capped() const;
  std::optional<double> power_limit_w() const;  // the enforced power limit

 private:
  std::optional<unsigned> clock_mhz(int nvml_clock_type) const;

  void* lib_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  bool initialised_ = false;
  int (*shutdown_)() = nullptr;
  int (*driver_version_)(char*, unsigned) = nullptr;
  int (*clock_info_)(void*, int, unsigned*) = nullptr;
  int (*power_usage_)(void*, unsigned*) = nullptr;
  int (*power_limit_)(void*, unsigned*) = nullptr;
  int (*event_reasons_)(void*, unsigned long long*) = nullptr;
  std::string why_;
};

}  // namespace wd::bench
