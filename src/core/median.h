// The median of a set of samples: the middle one, or for an even count the
// mean of the two middle ones (so that neither half of a series biases it:
// the upper middle of a time series is the slower of the two, which made a
// bandwidth ceiling read low); 0 for none. One definition for the library's
// bandwidth measurement (kernels/bandwidth.cu), bench-moe's timings
// (bench/moe_bench.cpp), the accuracy statistics (accuracy/stats.cpp) and
// the stand-alone benches (clock sampler, PDL hand-off).
#pragma once

#include <algorithm>
#include <vector>

namespace wd {

template <typename T>
double median(std::vector<T> v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  const auto upper = v.begin() + n / 2;
  std::nth_element(v.begin(), upper, v.end());
  if (n % 2) return double(*upper);
  // After nth_element every element before `upper` is <= it: the lower
  // middle is their largest.
  return 0.5 * (double(*std::max_element(v.begin(), upper)) + double(*upper));
}

}  // namespace wd
