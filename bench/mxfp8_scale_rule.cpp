// Measures the weight-quantization error of the two MXFP8 scale rules
// (OCP floor(log2 amax) - 8, and the smallest non-saturating power of two)
// on weights shaped and distributed like real MoE weights. The result decides
// the default rule; docs/DESIGN.md records the table this prints.
//
//   build/bench/mxfp8_scale_rule
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/synthetic_rng.h"
#include "warpdecode/formats.h"
#include "warpdecode/weights.h"

namespace {

struct Err {
  double rel_l2, max_rel_block, clipped_fraction;
};

Err measure(const std::vector<float>& w, size_t cols, wd::MxScaleRule rule) {
  const size_t rows = w.size() / cols;
  std::vector<uint8_t> q(w.size()), s(w.size() / 32);
  wd::quantize_mxfp8(w.data(), rows, cols, q.data(), s.data(), rule);
  double num = 0, den = 0, worst = 0;
  size_t clipped = 0;
  for (size_t b = 0; b < s.size(); ++b) {
    double bn = 0, bd = 0;
    for (size_t i = b * 32; i < b * 32 + 32; ++i) {
      const double deq = wd::mx_dequantize(q[i], s[b]);
      const double d = deq - w[i];
      bn += d * d;
      bd += double(w[i]) * w[i];
      clipped += std::abs(deq) == 448.0 * wd::e8m0_to_float(s[b]) && std::abs(w[i]) > std::abs(deq);
    }
    num += bn;
    den += bd;
    if (bd > 0) worst = std::max(worst, std::sqrt(bn / bd));
  }
  return {std::sqrt(num / den), worst, double(clipped) / double(w.size())};
}

}  // namespace

int main() {
  const size_t rows = 3072, cols = 2048;  // one qwen3-235b-a22b-like gate_up slab
  struct Case {
    const char* name;
    float outlier_fraction, outlier_scale;
  } cases[] = {{"N(0,0.02)", 0.0f, 1.0f},
               {"N(0,0.02) + 0.1% x10 outliers", 0.001f, 10.0f},
               {"N(0,0.02) + 1% x4 outliers", 0.01f, 4.0f}};
  std::printf("%-32s %-12s %12s %14s %10s\n", "weights", "rule", "rel_l2", "worst_block", "clipped");
  for (const auto& c : cases) {
    std::vector<float> w(rows * cols);
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = wd::bf16_to_float(wd::float_to_bf16(
          wd::rng::weight(42, 2, i, 0.02f, c.outlier_fraction, c.outlier_scale)));
    for (auto rule : {wd::MxScaleRule::kOcpFloor, wd::MxScaleRule::kNoSaturate}) {
      const Err e = measure(w, cols, rule);
      std::printf("%-32s %-12s %12.4e %14.4e %9.4f%%\n", c.name,
                  rule == wd::MxScaleRule::kOcpFloor ? "ocp-floor" : "no-saturate", e.rel_l2,
                  e.max_rel_block, 100 * e.clipped_fraction);
    }
  }
  return 0;
}
