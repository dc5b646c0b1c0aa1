// The FP64 reference MoE layer against an independent, literal computation,
// plus its router rules (ties, renormalisation) and its input checks.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "warpdecode/error.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

namespace wd {
namespace {

MoeShape small_shape() {
  MoeShape s;
  s.hidden = 64;
  s.intermediate = 32;
  s.experts = 6;
  s.top_k = 3;
  return s;
}

// The layer written out literally from its formula, straight from BF16 bits.
std::vector<double> literal_layer(const MoeWeights& w, const std::vector<uint16_t>& x, int B,
                                  const std::vector<int32_t>& ids, const std::vector<double>& rw) {
  const MoeShape& s = w.shape();
  const int H = s.hidden, I = s.intermediate, K = s.top_k;
  std::vector<double> y(size_t(B) * H, 0.0);
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < K; ++k) {
      const int e = ids[b * K + k];
      std::vector<double> a(I);
      for (int i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int h = 0; h < H; ++h) {
          const double xv = bf16_to_float(x[size_t(b) * H + h]);
          g += double(bf16_to_float(w.gate_up_bf16[(size_t(e) * 2 * I + i) * H + h])) * xv;
          u += double(bf16_to_float(w.gate_up_bf16[(size_t(e) * 2 * I + I + i) * H + h])) * xv;
        }
        a[i] = g / (1 + std::exp(-g)) * u;
      }
      for (int d = 0; d < H; ++d) {
        double acc = 0;
        for (int i = 0; i < I; ++i)
          acc += double(bf16_to_float(w.down_bf16[(size_t(e) * H + d) * I + i])) * a[i];
        y[size_t(b) * H + d] += rw[b * K + k] * acc;
      }
    }
  return y;
}

TEST(Reference, MatchesTheLiteralFormula) {
  const MoeShape s = small_shape();
  SyntheticSpec spec;
  spec.stddev = 0.1f;
  const auto w = MoeWeights::synthetic(s, spec);
  const int B = 5;
  const auto x = synthetic_input(B, s.hidden, 3, InputKind::kGaussian);
  reference::Routing r;
  const auto y = reference::moe_layer(w.view(), x.data(), B, reference::Precision::kFP64, &r);
  const auto lit = literal_layer(w, x, B, r.ids, r.weights);
  const auto st = reference::compare(lit.data(), y.data(), y.size());
  EXPECT_LT(st.rel_l2, 1e-13);
  EXPECT_GT(std::abs(y[0]) + std::abs(y[1]), 0.0);  // not trivially zero
}

TEST(Reference, RouterPicksTopKAndRenormalises) {
  const MoeShape s = small_shape();
  const auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  const auto x = synthetic_input(4, s.hidden, 9, InputKind::kGaussian);
  const auto r = reference::router(w.view(), x.data(), 4);
  for (int b = 0; b < 4; ++b) {
    double sum = 0;
    for (int k = 0; k < s.top_k; ++k) {
      sum += r.weights[b * s.top_k + k];
      if (k) {
        EXPECT_GE(r.logits[b * s.experts + r.ids[b * s.top_k + k - 1]],
                  r.logits[b * s.experts + r.ids[b * s.top_k + k]]);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    // Every expert not chosen has a logit no larger than the K-th chosen one.
    const double kth = r.logits[b * s.experts + r.ids[b * s.top_k + s.top_k - 1]];
    for (int e = 0; e < s.experts; ++e) {
      bool chosen = false;
      for (int k = 0; k < s.top_k; ++k) chosen |= r.ids[b * s.top_k + k] == e;
      if (!chosen) {
        EXPECT_LE(r.logits[b * s.experts + e], kth);
      }
    }
  }
}

TEST(Reference, WithoutRenormalisationWeightsAreSoftmaxProbabilities) {
  MoeShape s = small_shape();
  s.norm_topk_prob = false;
  const auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  const auto x = synthetic_input(2, s.hidden, 4, InputKind::kGaussian);
  const auto r = reference::router(w.view(), x.data(), 2);
  for (int b = 0; b < 2; ++b) {
    double z = 0;
    for (int e = 0; e < s.experts; ++e) z += std::exp(r.logits[b * s.experts + e]);
    for (int k = 0; k < s.top_k; ++k)
      EXPECT_NEAR(r.weights[b * s.top_k + k], std::exp(r.logits[b * s.experts + r.ids[b * s.top_k + k]]) / z, 1e-12);
  }
}

TEST(Reference, TiesGoToTheLowerExpertIndex) {
  const MoeShape s = small_shape();
  auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  // Experts 1..5 get one identical, dominant router row: five equal logits
  // compete for the top 3.
  for (int h = 0; h < s.hidden; ++h)
    for (int e : {1, 2, 3, 4, 5}) w.router[size_t(e) * s.hidden + h] = float_to_bf16(1.0f);
  std::vector<uint16_t> x(s.hidden, float_to_bf16(0.5f));
  const auto r = reference::router(w.view(), x.data(), 1);
  EXPECT_EQ(r.ids[0], 1);
  EXPECT_EQ(r.ids[1], 2);
  EXPECT_EQ(r.ids[2], 3);
}

TEST(Reference, Fp32PathIsCloseAndThreadCountIndependent) {
  const MoeShape s = preset_shape("tiny");
  const auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  const auto x = synthetic_input(3, s.hidden, 1, InputKind::kOutliers);
  reference::Routing r;
  const auto y64 = reference::moe_layer(w.view(), x.data(), 3, reference::Precision::kFP64, &r, 1);
  const auto y64b = reference::moe_layer(w.view(), x.data(), 3, reference::Precision::kFP64, nullptr, 4);
  EXPECT_EQ(y64, y64b);  // bitwise
  const auto y32 = reference::moe_experts(w.view(), x.data(), r.ids.data(), r.weights.data(), 3,
                                          reference::Precision::kFP32);
  const auto st = reference::compare(y64.data(), y32.data(), y64.size());
  EXPECT_LT(st.rel_l2, 1e-5);
  EXPECT_GT(st.rel_l2, 0.0);  // FP32 really is a different computation
}

// kFP32SplitH: the FP32 path with h as warp decode's tensor-core kernels
// multiply it (BF16 hi + lo). Its error is bounded by the split's 2^-17
// and larger than plain FP32's (which keeps h whole).
TEST(Reference, SplitHModelsTheTensorCoresBf16Pair) {
  const MoeShape s = preset_shape("tiny");
  const auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  const int B = 4;
  const auto x = synthetic_input(B, s.hidden, 7, InputKind::kGaussian);
  reference::Routing r;
  const auto y64 = reference::moe_layer(w.view(), x.data(), B, reference::Precision::kFP64, &r, 1);
  auto run = [&](reference::Precision p, int threads) {
    return reference::moe_experts(w.view(), x.data(), r.ids.data(), r.weights.data(), B, p, threads);
  };
  const auto y32 = run(reference::Precision::kFP32, 0);
  const auto ysp = run(reference::Precision::kFP32SplitH, 0);
  EXPECT_EQ(ysp, run(reference::Precision::kFP32SplitH, 1));  // bitwise, any thread count
  const double e32 = reference::compare(y64.data(), y32.data(), y64.size()).rel_l2;
  const double esp = reference::compare(y64.data(), ysp.data(), y64.size()).rel_l2;
  EXPECT_NE(ysp, y32);
  EXPECT_LT(esp, std::ldexp(1.0, -17));
  EXPECT_GT(esp, e32);  // h rounded to 16 significant bits against FP32's 24

}

TEST(Reference, Mxfp8IsReadAsItsExactDequantizedValues) {
  const MoeShape s = preset_shape("tiny");
  const auto bf = MoeWeights::synthetic(s, SyntheticSpec{});
  const auto q = bf.to_mxfp8();
  // E4M3 · 2^k has at most 4 significant bits: exactly representable in BF16.
  MoeWeights deq = bf;
  for (size_t i = 0; i < q.gate_up_q.size(); ++i)
    deq.gate_up_bf16[i] = float_to_bf16(mx_dequantize(q.gate_up_q[i], q.gate_up_scales[i / 32]));
  for (size_t i = 0; i < q.down_q.size(); ++i)
    deq.down_bf16[i] = float_to_bf16(mx_dequantize(q.down_q[i], q.down_scales[i / 32]));
  const auto x = synthetic_input(2, s.hidden, 2, InputKind::kGaussian);
  const auto a = reference::moe_layer(q.view(), x.data(), 2, reference::Precision::kFP64);
  const auto b = reference::moe_layer(deq.view(), x.data(), 2, reference::Precision::kFP64);
  EXPECT_EQ(a, b);
  const auto c = reference::moe_layer(bf.view(), x.data(), 2, reference::Precision::kFP64);
  const auto st = reference::compare(c.data(), a.data(), a.size());
  EXPECT_GT(st.rel_l2, 1e-3);  // quantization changes the result...
  EXPECT_LT(st.rel_l2, 0.1);   // ...by about E4M3's precision
}

TEST(Reference, RefusesBadInputs) {
  const MoeShape s = preset_shape("tiny");
  const auto w = MoeWeights::synthetic(s, SyntheticSpec{});
  auto x = synthetic_input(2, s.hidden, 2, InputKind::kGaussian);
  EXPECT_THROW(reference::moe_layer(w.view(), x.data(), 0, reference::Precision::kFP64), InvalidArgument);
  x[7] = float_to_bf16(std::nanf(""));
  try {
    reference::moe_layer(w.view(), x.data(), 2, reference::Precision::kFP64);
    FAIL() << "NaN input accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos);
  }
  x[7] = float_to_bf16(1.0f);
  std::vector<int32_t> ids(2 * s.top_k, 0);
  std::iota(ids.begin(), ids.end(), 0);
  ids[3] = s.experts;  // out of range
  std::vector<double> rw(ids.size(), 0.25);
  EXPECT_THROW(reference::moe_experts(w.view(), x.data(), ids.data(), rw.data(), 2, reference::Precision::kFP64),
               InvalidArgument);
}

TEST(Compare, Statistics) {
  const std::vector<double> ref{3, 4}, out{3, 4.5};
  const auto st = reference::compare(ref.data(), out.data(), 2);
  EXPECT_DOUBLE_EQ(st.rel_l2, 0.5 / 5);
  EXPECT_DOUBLE_EQ(st.max_rel, 0.5 / 4);
  const std::vector<double> bad{3, NAN};
  const auto st2 = reference::compare(ref.data(), bad.data(), 2);
  EXPECT_EQ(st2.non_finite, 1u);
  EXPECT_TRUE(std::isnan(st2.rel_l2));
}

}  // namespace
}  // namespace wd
