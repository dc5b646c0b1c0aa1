// MXFP8 quantization: scale rules, the per-block error bound, zero blocks,
// and the measured choice of the default rule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "warpdecode/formats.h"
#include "warpdecode/error.h"
#include "warpdecode/weights.h"

namespace wd {
namespace {

std::vector<float> normal_block(std::mt19937& g, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(kMxBlock);
  for (auto& x : v) x = d(g);
  return v;
}

TEST(MxScale, OcpRuleIsFloorLog2Minus8) {
  for (int e = -100; e <= 100; e += 7) {
    const float amax = std::ldexp(1.9f, e);
    EXPECT_EQ(int(mx_scale_code(amax, MxScaleRule::kOcpFloor)), e - 8 + 127) << e;
  }
}

TEST(MxScale, NoSaturateRuleIsOneHigherOnlyAbove1p75) {
  EXPECT_EQ(mx_scale_code(448.0f, MxScaleRule::kNoSaturate), mx_scale_code(448.0f, MxScaleRule::kOcpFloor));
  EXPECT_EQ(mx_scale_code(std::nextafter(448.0f, 1e9f), MxScaleRule::kNoSaturate),
            mx_scale_code(448.0f, MxScaleRule::kOcpFloor) + 1);
  EXPECT_EQ(mx_scale_code(1.0f, MxScaleRule::kNoSaturate), 127 - 8);
}

TEST(MxScale, ZeroBlockGetsAValidScale) {
  float zeros[kMxBlock] = {};
  uint8_t q[kMxBlock];
  for (auto rule : {MxScaleRule::kOcpFloor, MxScaleRule::kNoSaturate}) {
    const uint8_t code = mx_quantize_block(zeros, kMxBlock, q, rule);
    EXPECT_NE(code, kE8M0NaN);
    EXPECT_TRUE(std::isfinite(e8m0_to_float(code)));
    for (int i = 0; i < kMxBlock; ++i) EXPECT_EQ(q[i], 0);
  }
}

TEST(MxScale, ExtremeMagnitudesClampTheScale) {
  float tiny[kMxBlock], huge[kMxBlock];
  for (int i = 0; i < kMxBlock; ++i) {
    tiny[i] = std::ldexp(1.0f, -140) * (i + 1);  // FP32 subnormals
    huge[i] = std::ldexp(1.0f, 120) * (i + 1);
  }
  uint8_t q[kMxBlock];
  EXPECT_EQ(mx_quantize_block(tiny, kMxBlock, q, MxScaleRule::kNoSaturate), 0);
  const uint8_t c = mx_quantize_block(huge, kMxBlock, q, MxScaleRule::kNoSaturate);
  for (int i = 0; i < kMxBlock; ++i)
    EXPECT_NEAR(mx_dequantize(q[i], c) / huge[i], 1.0, 1.0 / 16) << i;
}

// Every element of every block is within half an E4M3 step of its value:
// relative 2^-4 in the normal range, absolute 2^-10 · 2^X in the subnormal range.
// The no-saturate rule never clips; the OCP rule may clip values above 448·2^X.
TEST(MxQuantize, PerBlockErrorBound) {
  std::mt19937 g(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const float mag = std::ldexp(1.0f, int(g() % 60) - 40);
    auto v = normal_block(g, mag);
    if (trial % 5 == 0) v[g() % kMxBlock] *= 30.0f;  // an outlier
    for (auto rule : {MxScaleRule::kNoSaturate, MxScaleRule::kOcpFloor}) {
      uint8_t q[kMxBlock];
      const uint8_t code = mx_quantize_block(v.data(), kMxBlock, q, rule);
      const double X = std::ldexp(1.0, int(code) - 127);
      for (int i = 0; i < kMxBlock; ++i) {
        const double deq = mx_dequantize(q[i], code);
        const double x = v[i];
        if (rule == MxScaleRule::kOcpFloor && std::abs(x) > 448 * X) {
          EXPECT_EQ(std::abs(deq), 448 * X);  // clipped to the largest value
          EXPECT_LE(std::abs(x) - std::abs(deq), 0.125 * std::abs(x) + 1e-30);
          continue;
        }
        ASSERT_LE(std::abs(x), 448 * X) << "no-saturate rule must never clip";
        const double bound = std::max(std::abs(x) * std::ldexp(1.0, -4), std::ldexp(1.0, -10) * X);
        EXPECT_LE(std::abs(deq - x), bound * (1 + 1e-12)) << "trial " << trial << " elem " << i;
      }
    }
  }
}

TEST(MxQuantize, RowsMatchBlockQuantizer) {
  std::vector<uint16_t> bf(4 * 64);
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = float_to_bf16(synthetic_normal(3, 1, i) * 0.02f);
  std::vector<uint8_t> q(bf.size()), s(bf.size() / 32);
  quantize_mxfp8(bf.data(), 4, 64, q.data(), s.data(), MxScaleRule::kNoSaturate);
  for (size_t b = 0; b < s.size(); ++b) {
    float v[32];
    uint8_t qq[32];
    for (int i = 0; i < 32; ++i) v[i] = bf16_to_float(bf[b * 32 + i]);
    EXPECT_EQ(mx_quantize_block(v, 32, qq, MxScaleRule::kNoSaturate), s[b]);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(qq[i], q[b * 32 + i]);
  }
}

TEST(MxQuantize, RejectsNonFiniteWeights) {
  std::vector<float> x(64, 1.0f);
  x[40] = std::nanf("");
  std::vector<uint8_t> q(64), s(2);
  EXPECT_THROW(quantize_mxfp8(x.data(), 1, 64, q.data(), s.data(), MxScaleRule::kNoSaturate), Error);
  EXPECT_THROW(quantize_mxfp8(x.data(), 2, 30, q.data(), s.data(), MxScaleRule::kNoSaturate), Error);
}

// The measured reason for the default (docs/DESIGN.md "MXFP8 scale rule"): on
// weights distributed like real ones, with 0.1% outliers, the no-saturate
// rule has the smaller relative L2 weight-quantization error.
double rule_error(MxScaleRule rule) {
  SyntheticSpec spec;
  spec.seed = 11;
  spec.outlier_fraction = 0.001f;
  spec.outlier_scale = 10.0f;
  const size_t rows = 512, cols = 2048;
  std::vector<float> w(rows * cols);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = bf16_to_float(float_to_bf16(synthetic_normal(spec.seed, 2, i) * spec.stddev *
                                       ((i % 997) == 0 ? spec.outlier_scale : 1.0f)));
  std::vector<uint8_t> q(w.size()), s(w.size() / 32);
  quantize_mxfp8(w.data(), rows, cols, q.data(), s.data(), rule);
  double num = 0, den = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = mx_dequantize(q[i], s[i / 32]) - w[i];
    num += d * d;
    den += double(w[i]) * w[i];
  }
  return std::sqrt(num / den);
}

TEST(MxQuantize, DefaultRuleHasTheSmallerErrorOnRealisticWeights) {
  const double no_sat = rule_error(MxScaleRule::kNoSaturate);
  const double ocp = rule_error(MxScaleRule::kOcpFloor);
  RecordProperty("rel_l2_no_saturate", std::to_string(no_sat));
  RecordProperty("rel_l2_ocp_floor", std::to_string(ocp));
  EXPECT_LT(no_sat, ocp);
  EXPECT_LT(no_sat, 0.05);  // E4M3 keeps 3 mantissa bits: ~2-3% RMS
}

}  // namespace
}  // namespace wd
