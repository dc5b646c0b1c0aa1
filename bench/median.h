// The median of a set of samples (for an even count, the upper of the two
// middle ones; 0 for none): the clock sampler's SM clock and power, and the
// stand-alone benches' timings. (bench-moe's Timing summary sorts its
// replays once for median, min and max: moe_bench.cpp.)
#pragma once

#include <algorithm>
#include <vector>

namespace wd::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace wd::bench
