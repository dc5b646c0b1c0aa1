#include "accuracy/stats.h"

#include <algorithm>
#include <cmath>

namespace wd::accuracy {

Summary summarize(std::vector<double> samples, Worst worst) {
  Summary s;
  s.count = samples.size();
  for (double v : samples) s.non_finite += !std::isfinite(v);
  if (samples.empty() || std::any_of(samples.begin(), samples.end(), [](double v) { return std::isnan(v); })) {
    s.median = s.worst = NAN;
    return s;
  }
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.worst = worst == Worst::kLargest ? samples.back() : samples.front();
  return s;
}

double error_ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (b == 0) return a == 0 ? 1.0 : INFINITY;
  return a / b;
}

}  // namespace wd::accuracy
