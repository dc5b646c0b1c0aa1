// Error statistics over random seeds, for `warpdecode accuracy`.
//
// Each seed gives one error per path (wd::reference::compare: relative L2
// and max relative error against the FP64 reference); a measurement reports
// the median over seeds and the worst seed. "Worst" is the largest error, and
// for a ratio err(classical FP8) / err(warp decode) the smallest (the seed
// least favourable to the claim that warp decode is closer).
//
// A non-finite sample (NaN from a path that wrote NaN or Inf) is never
// dropped: it makes the median and the worst NaN (JSON null), and is counted.
#pragma once

#include <cstddef>
#include <vector>

namespace wd::accuracy {

struct Summary {
  double median = 0;
  double worst = 0;      // max, or min with Worst::kSmallest
  size_t count = 0;      // samples
  size_t non_finite = 0; // NaN or Inf samples among them
};

enum class Worst { kLargest, kSmallest };

// Median (mean of the two middle values for an even count) and worst of
// samples. Empty input: count 0, median and worst NaN.
Summary summarize(std::vector<double> samples, Worst worst = Worst::kLargest);

// a / b for errors: NaN if either is NaN, +Inf if only b is 0 (a > 0), 1 if
// both are 0 (two exact paths are equally close).
double error_ratio(double a, double b);

}  // namespace wd::accuracy
