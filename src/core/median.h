// The median of a set of samples: for an even count, the upper of the two
// middle ones; 0 for none. One definition for the library's bandwidth
// measurement (kernels/bandwidth.cu) and the benches (clock sampler,
// stand-alone benches). (bench-moe's Timing summary sorts its replays once
// for median, min and max: bench/moe_bench.cpp.)
#pragma once

#include <algorithm>
#include <vector>

namespace wd {

template <typename T>
double median(std::vector<T> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return double(v[v.size() / 2]);
}

}  // namespace wd
