#include "accuracy/stats.h"

#include <algorithm>
#include <cmath>

#include "core/median.h"

namespace wd::accuracy {

Summary summarize(std::vector<double> samples, Worst worst) {
  Summary s;
  s.count = samples.size();
  for (double v : samples) s.non_finite += !std::isfinite(v);
  if (samples.empty() || std::any_of(samples.begin(), samples.end(), [](double v) { return std::isnan(v); })) {
    s.median = s.worst = NAN;
    return s;
  }
  s.median = median(samples);
  s.worst = worst == Worst::kLargest ? *std::max_element(samples.begin(), samples.end())
                                     : *std::min_element(samples.begin(), samples.end());
  return s;
}

double error_ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (b == 0) return a == 0 ? 1.0 : INFINITY;
  return a / b;
}

}  // namespace wd::accuracy
