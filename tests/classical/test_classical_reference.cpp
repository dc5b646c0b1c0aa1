// CPU checks of what the classical path's GPU tests rely on: the FP8 block-128
// weight format (conversion, layout, reference dequantization), the
// activation quantization, and the CPU reference of the classical path with
// the error it must show against the exact FP64 layer.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "warpdecode/classical_reference.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

#include "test_support.h"

namespace wd {
namespace {

using wd::test::make_shape;

// E4M3 rounding bound of one value v quantized with scale s: half an ulp,
// 2^-4 relative in the normal range (|v/s| >= 2^-6), 2^-10·s absolute below.
double e4m3_bound(double v, double s) { return std::max(std::abs(v) * 0.0625, s * std::ldexp(1.0, -10)); }

// BF16 synthetic weights of a seed; outliers: the fraction of weights scaled up.
MoeWeights synthetic_bf16(const MoeShape& s, uint64_t seed, float outliers = 0.0f) {
  SyntheticSpec spec;
  spec.seed = seed;
  spec.outlier_fraction = outliers;
  return MoeWeights::synthetic(s, spec);
}

TEST(Fp8Block128, FormatNameBytesAndParse) {
  EXPECT_EQ(parse_weight_format("fp8-block128"), WeightFormat::kFP8Block128);
  EXPECT_STREQ(to_string(WeightFormat::kFP8Block128), "fp8-block128");
  const MoeShape s = preset_shape("qwen3-30b-a3b");  // I = 6·128, H = 16·128
  EXPECT_EQ(expert_bytes(s, WeightFormat::kFP8Block128), size_t(3) * 768 * 2048 + 4 * 3 * 6 * 16);
}

TEST(Fp8Block128, QuantizeMatrixWithPartialBlocks) {
  const size_t rows = 200, cols = 300;  // 2 x 3 blocks, the last ones partial
  std::mt19937 g(7);
  std::normal_distribution<float> n(0.0f, 0.02f);
  std::vector<uint16_t> w(rows * cols);
  for (auto& v : w) v = float_to_bf16(n(g));
  w[5 * cols + 7] = float_to_bf16(3.0f);  // one outlier in block (0, 0)
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> scales(2 * 3);
  quantize_fp8_block128(w.data(), rows, cols, q.data(), scales.data());
  for (size_t br = 0; br < 2; ++br)
    for (size_t bc = 0; bc < 3; ++bc) {
      float amax = 0;
      for (size_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
        for (size_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c)
          amax = std::max(amax, std::abs(bf16_to_float(w[r * cols + c])));
      EXPECT_EQ(scales[br * 3 + bc], amax / 448.0f) << br << "," << bc;
    }
  EXPECT_EQ(q[5 * cols + 7], 0x7E);  // the block's largest value is 448·scale
  size_t bad = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const double s = scales[(r / 128) * 3 + c / 128], v = bf16_to_float(w[r * cols + c]);
      const double d = double(e4m3_to_float(q[r * cols + c])) * s;
      bad += std::abs(d - v) > e4m3_bound(v, s) * (1 + 1e-9);
    }
  EXPECT_EQ(bad, 0u);
}

TEST(Fp8Block128, GateAndUpAreBlockedSeparately) {
  // I = 96 is not a multiple of 128: with gate and up stacked, one 128-row
  // block would span both; the layout gives each projection its own blocks.
  const MoeShape s = make_shape(160, 96, 3, 2);
  const MoeWeights bf = synthetic_bf16(s, 11);
  const MoeWeights q = bf.to_fp8_block128();
  EXPECT_EQ(q.format(), WeightFormat::kFP8Block128);
  EXPECT_EQ(q.gate_up_block_scales.size(), size_t(3 * 2 * 1 * 2));
  EXPECT_EQ(q.down_block_scales.size(), size_t(3 * 2 * 1));
  EXPECT_EQ(fp8_block128_scale_index(s, true, 1, 95, 130), size_t((1 * 2 + 0) * 2 + 1));
  EXPECT_EQ(fp8_block128_scale_index(s, true, 1, 96, 0), size_t((1 * 2 + 1) * 2 + 0));
  EXPECT_EQ(fp8_block128_scale_index(s, false, 2, 129, 5), size_t((2 * 2 + 1) * 1 + 0));
  // Every element dequantizes within E4M3 rounding of the BF16 value, using
  // the scale the index names (so the index and the conversion agree).
  size_t bad = 0;
  const size_t H = 160, I = 96;
  for (size_t e = 0; e < 3; ++e) {
    for (size_t r = 0; r < 2 * I; ++r)
      for (size_t c = 0; c < H; ++c) {
        const size_t i = (e * 2 * I + r) * H + c;
        const double sc = q.gate_up_block_scales[fp8_block128_scale_index(s, true, e, r, c)];
        const double v = bf16_to_float(bf.gate_up_bf16[i]), d = e4m3_to_float(q.gate_up_q[i]) * sc;
        bad += std::abs(d - v) > e4m3_bound(v, sc) * (1 + 1e-9);
      }
    for (size_t r = 0; r < H; ++r)
      for (size_t c = 0; c < I; ++c) {
        const size_t i = (e * H + r) * I + c;
        const double sc = q.down_block_scales[fp8_block128_scale_index(s, false, e, r, c)];
        const double v = bf16_to_float(bf.down_bf16[i]), d = e4m3_to_float(q.down_q[i]) * sc;
        bad += std::abs(d - v) > e4m3_bound(v, sc) * (1 + 1e-9);
      }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_THROW(q.to_fp8_block128(), InvalidArgument);
  EXPECT_NO_THROW(q.view().validate());
  MoeWeightsView v = q.view();
  v.down_block_scales = nullptr;
  EXPECT_THROW(v.validate(), InvalidArgument);
}

TEST(Fp8Block128, ReferenceReadsTheDequantizedWeights) {
  // The FP64 reference on FP8 block-128 weights equals the reference on BF16
  // weights holding exactly the dequantized values... up to the BF16 rounding
  // of those values; against the original BF16 weights it differs by the
  // weight quantization, well inside 2^-4.
  const MoeShape s = make_shape(256, 128, 8, 2);
  const MoeWeights bf = synthetic_bf16(s, 3);
  const MoeWeights q = bf.to_fp8_block128();
  const int B = 5;
  const auto x = synthetic_input(B, s.hidden, 5, InputKind::kGaussian);
  std::vector<int32_t> ids;
  std::vector<double> w;
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < 2; ++k) {
      ids.push_back((b * 3 + k * 5) % 8);
      w.push_back(0.5);
    }
  const auto yb = reference::moe_experts(bf.view(), x.data(), ids.data(), w.data(), B, reference::Precision::kFP64);
  const auto yq = reference::moe_experts(q.view(), x.data(), ids.data(), w.data(), B, reference::Precision::kFP64);
  const auto st = reference::compare(yb.data(), yq.data(), yb.size());
  EXPECT_GT(st.rel_l2, 1e-3);  // the weights really are FP8
  EXPECT_LT(st.rel_l2, 0.0625);
}

TEST(ActivationQuant, ScaleCodesAndRoundTrip) {
  std::mt19937 g(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> v(128);
  for (auto& x : v) x = n(g);
  v[17] = -9.5f;
  uint8_t q[128];
  const float s = reference::quantize_activation_group(v.data(), 128, q);
  EXPECT_EQ(s, 9.5f / 448.0f);
  EXPECT_EQ(q[17], 0xFE);  // -448
  for (int i = 0; i < 128; ++i) {
    const double d = double(e4m3_to_float(q[i])) * s;
    EXPECT_LE(std::abs(d - v[i]), e4m3_bound(v[i], s) * (1 + 1e-9)) << i;
  }
  std::vector<float> zeros(128, 0.0f);
  const float sz = reference::quantize_activation_group(zeros.data(), 128, q);
  EXPECT_GT(sz, 0.0f);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(q[i], 0);
}

using Routed = wd::test::HostRouting;
using wd::test::random_routing;

// The stated accuracy of the classical path against the exact FP64 layer on
// the same (dequantized) weights:
//   BF16:  rel L2 <= 1e-2 (BF16 roundings of g, u, h, the partials).
//   W8A8:  rel L2 <= 2^-4: two independent E4M3 roundings of the activations
//          (x, then h), each at most 2^-4 relative per element in the normal
//          range, RMS below 2^-4/sqrt(3) each, so about 0.05 combined at worst;
//          and >= 5e-3, or the activations were not quantized at all.
TEST(ClassicalReference, ErrorAgainstExactLayerIsWhatTheFormatsAllow) {
  const MoeShape s = make_shape(256, 256, 16, 4);
  const MoeWeights bf = synthetic_bf16(s, 21, 0.001f);
  const MoeWeights fp8 = bf.to_fp8_block128();
  const MoeWeights mx = bf.to_mxfp8();
  const int B = 24;
  for (InputKind kind : {InputKind::kGaussian, InputKind::kOutliers}) {
    const auto x = synthetic_input(B, s.hidden, 9, kind);
    const Routed r = random_routing(B, s.experts, s.top_k, 4);
    for (const MoeWeights* w : {&bf, &fp8, &mx}) {
      const auto exact = reference::moe_experts(w->view(), x.data(), r.ids.data(), r.w.data(), B,
                                                reference::Precision::kFP64);
      const auto cl = reference::classical_experts(w->view(), x.data(), r.ids.data(), r.w.data(), B);
      const auto st = reference::compare(exact.data(), cl.data(), exact.size());
      const std::string what = std::string(to_string(w->format())) + (kind == InputKind::kOutliers ? " outliers" : "");
      if (w->format() == WeightFormat::kBF16) {
        EXPECT_LT(st.rel_l2, 1e-2) << what;
        EXPECT_GT(st.rel_l2, 1e-5) << what << ": the BF16 roundings are modelled";
      } else {
        EXPECT_LT(st.rel_l2, 0.0625) << what;
        EXPECT_GT(st.rel_l2, 5e-3) << what << ": activations must be quantized";
      }
    }
  }
}

// SiLU·up fused into the gate_up GEMM skips the BF16 rounding of g and u:
// a different result, nearer the exact layer (one BF16 rounding of h and
// of the partials left), on BF16 weights.
TEST(ClassicalReference, FusedSiluSkipsTheRoundingOfGateAndUp) {
  const MoeShape s = make_shape(256, 256, 16, 4);
  const MoeWeights bf = synthetic_bf16(s, 5);
  const int B = 16;
  const auto x = synthetic_input(B, s.hidden, 3, InputKind::kGaussian);
  const Routed r = random_routing(B, s.experts, s.top_k, 8);
  const auto exact =
      reference::moe_experts(bf.view(), x.data(), r.ids.data(), r.w.data(), B, reference::Precision::kFP64);
  const auto apart = reference::classical_experts(bf.view(), x.data(), r.ids.data(), r.w.data(), B, 0, false);
  const auto fused = reference::classical_experts(bf.view(), x.data(), r.ids.data(), r.w.data(), B, 0, true);
  const double e_apart = reference::compare(exact.data(), apart.data(), exact.size()).rel_l2;
  const double e_fused = reference::compare(exact.data(), fused.data(), exact.size()).rel_l2;
  EXPECT_GT(reference::compare(apart.data(), fused.data(), apart.size()).rel_l2, 1e-5);
  EXPECT_LT(e_fused, e_apart);
  EXPECT_GT(e_fused, 1e-5) << "h and the partials are still rounded to BF16";
}

// W8A16 (bf16_activations): the BF16 path's roundings on the MXFP8 weights.
// MXFP8 values (E4M3 × 2^k) are BF16 numbers, so the emulation on MXFP8
// weights equals, bit for bit, the BF16 path's on a BF16 copy of the
// dequantized weights, fused or not; and bf16_activations leaves BF16
// weights' emulation unchanged.
TEST(ClassicalReference, W8A16IsTheBf16PathOnTheDequantizedWeights) {
  const MoeShape s = make_shape(256, 128, 16, 4);
  const MoeWeights bf = synthetic_bf16(s, 13, 0.001f);
  const MoeWeights mx = bf.to_mxfp8();
  MoeWeights deq = bf;  // BF16, values replaced by the MXFP8 ones
  auto dequantize_into = [](std::vector<uint16_t>& out, const std::vector<uint8_t>& q,
                            const std::vector<uint8_t>& scales) {
    for (size_t i = 0; i < out.size(); ++i) {
      const float v = mx_dequantize(q[i], scales[i / kMxBlock]);
      out[i] = float_to_bf16(v);
      ASSERT_EQ(bf16_to_float(out[i]), v) << i;
    }
  };
  dequantize_into(deq.gate_up_bf16, mx.gate_up_q, mx.gate_up_scales);
  dequantize_into(deq.down_bf16, mx.down_q, mx.down_scales);
  ASSERT_FALSE(HasFatalFailure());
  const int B = 12;
  const auto x = synthetic_input(B, s.hidden, 6, InputKind::kOutliers);
  const Routed r = random_routing(B, s.experts, s.top_k, 2);
  for (bool fused : {false, true}) {
    const auto a16 = reference::classical_experts(mx.view(), x.data(), r.ids.data(), r.w.data(), B, 0, fused, true);
    const auto ref = reference::classical_experts(deq.view(), x.data(), r.ids.data(), r.w.data(), B, 0, fused);
    EXPECT_EQ(a16, ref) << (fused ? "fused" : "apart");
    const auto w8a8 = reference::classical_experts(mx.view(), x.data(), r.ids.data(), r.w.data(), B, 0, fused);
    EXPECT_GT(reference::compare(a16.data(), w8a8.data(), a16.size()).rel_l2, 5e-3) << "W8A8 quantizes, W8A16 not";
    const auto bf_a16 = reference::classical_experts(bf.view(), x.data(), r.ids.data(), r.w.data(), B, 0, fused, true);
    EXPECT_EQ(bf_a16, reference::classical_experts(bf.view(), x.data(), r.ids.data(), r.w.data(), B, 0, fused));
  }
}

TEST(ClassicalReference, RejectsWhatItCannotTake) {
  const MoeShape s = make_shape(160, 96, 4, 2);  // H, I not multiples of 128
  SyntheticSpec spec;
  const MoeWeights q = MoeWeights::synthetic(s, spec).to_fp8_block128();
  const auto x = synthetic_input(1, s.hidden, 1, InputKind::kGaussian);
  const int32_t ids[2] = {0, 1};
  const double w[2] = {0.5, 0.5};
  EXPECT_THROW(reference::classical_experts(q.view(), x.data(), ids, w, 1), InvalidArgument);
  const int32_t bad_ids[2] = {0, 4};
  const MoeWeights bf = MoeWeights::synthetic(s, spec);
  EXPECT_THROW(reference::classical_experts(bf.view(), x.data(), bad_ids, w, 1), InvalidArgument);
}

}  // namespace
}  // namespace wd
