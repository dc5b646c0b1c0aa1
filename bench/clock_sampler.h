// The SM clock, board power and clock-event reasons while a benchmark keeps
// the GPU busy, read through NVML. Why: warp decode's kernels run under the
// software power cap at a lower SM clock than the classical path's GEMMs
// (docs/PERF_LOG.md, session 30: 1.77 against 1.98 GHz on an H200), and a
// chain-bound kernel's time follows that clock, so a figure without its
// clock cannot be compared across machines or calls.
//
// NVML is the driver's library, loaded at run time (nvml_loader.h): where it
// cannot be loaded (no driver, a container without it) available() is false
// and every reading has no samples.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "nvml_loader.h"

namespace wd::bench {

struct ClockReading {
  int samples = 0;             // 0: not sampled (NVML unavailable, or nothing ran)
  double sm_mhz_median = 0;    // SM clock, median over the samples
  double sm_mhz_min = 0;
  double power_w_median = 0;   // board power (NVML's own averaging window)
  double power_capped = 0;     // share of samples with the software power cap among the clock-event reasons
};

// Adds the reading to a bench-moe record: sm_clock_mhz, sm_clock_mhz_min,
// power_w, power_capped_share (nothing without samples).
void add_clock_fields(nlohmann::json& record, const ClockReading& r);

class ClockSampler {
 public:
  // The NVML device of CUDA device `cuda_device` (matched by PCI bus id);
  // `library` is the shared object to load (tests pass one that does not exist).
  explicit ClockSampler(int cuda_device, const std::string& library = "libnvidia-ml.so.1");
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  bool available() const { return nvml_.available(); }
  // Why not: the library, a symbol, NVML's init or the device lookup that failed ("" when available).
  const std::string& unavailable_reason() const { return nvml_.unavailable_reason(); }
  // The enforced power limit in watts (0 if unknown).
  double power_limit_w() const { return power_limit_w_; }

  // Samples about every `interval_us` on a thread of its own until stop().
  void start(int interval_us = 1000);
  ClockReading stop();

 private:
  struct Sample {
    unsigned sm_mhz = 0, power_mw = 0;
    bool capped = false;
  };
  NvmlDevice nvml_;
  double power_limit_w_ = 0;
  std::vector<Sample> samples_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace wd::bench
