// See clock_sampler.h.
#include "clock_sampler.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/median.h"

namespace wd::bench {

void add_clock_fields(nlohmann::json& record, const ClockReading& r) {
  if (r.samples == 0) return;
  record["sm_clock_mhz"] = r.sm_mhz_median;
  record["sm_clock_mhz_min"] = r.sm_mhz_min;
  record["power_w"] = r.power_w_median;
  record["power_capped_share"] = r.power_capped;
}

ClockSampler::ClockSampler(int cuda_device, const std::string& library)
    : nvml_(cuda_device, library), power_limit_w_(nvml_.power_limit_w().value_or(0.0)) {}

ClockSampler::~ClockSampler() {
  if (running_) stop();
}

void ClockSampler::start(int interval_us) {
  if (!available() || running_) return;
  samples_.clear();
  running_ = true;
  thread_ = std::thread([this, interval_us] {
    while (running_) {
      const auto mhz = nvml_.sm_clock_mhz();
      const auto mw = nvml_.power_mw();
      const auto capped = nvml_.power_capped();
      if (mhz && mw && capped) samples_.push_back(Sample{*mhz, *mw, *capped});
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
