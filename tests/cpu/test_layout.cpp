// Shapes, presets, validation messages and synthetic weights.
#include <gtest/gtest.h>

#include <cmath>

#include "warpdecode/error.h"
#include "warpdecode/layout.h"
#include "warpdecode/weights.h"

namespace wd {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Presets, RealShapes) {
  const MoeShape a = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(a.hidden, 2048);
  EXPECT_EQ(a.intermediate, 768);
  EXPECT_EQ(a.experts, 128);
  EXPECT_EQ(a.top_k, 8);
  const MoeShape b = preset_shape("qwen3-235b-a22b");
  EXPECT_EQ(b.hidden, 4096);
  EXPECT_EQ(b.intermediate, 1536);
  const MoeShape c = preset_shape("qwen3-coder-480b-a35b");
  EXPECT_EQ(c.hidden, 6144);
  EXPECT_EQ(c.intermediate, 2560);
  EXPECT_EQ(c.experts, 160);
  for (const auto& n : preset_names()) EXPECT_NO_THROW(preset_shape(n).validate()) << n;
}

TEST(Presets, UnknownNameListsKnownOnes) {
  const std::string msg = error_of([] { preset_shape("qwen9"); });
  EXPECT_NE(msg.find("unknown preset 'qwen9'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("qwen3-30b-a3b"), std::string::npos) << msg;
}

TEST(Shape, ValidationNamesTheBadDimension) {
  MoeShape s = preset_shape("tiny");
  s.hidden = 100;
  EXPECT_NE(error_of([&] { s.validate(); }).find("H = 100 must be a positive multiple of 32"), std::string::npos);
  s = preset_shape("tiny");
  s.intermediate = 48;
  EXPECT_NE(error_of([&] { s.validate(); }).find("I = 48"), std::string::npos);
  s = preset_shape("tiny");
  s.top_k = 0;
  EXPECT_NE(error_of([&] { s.validate(); }).find("top-k K = 0"), std::string::npos);
  s.top_k = s.experts + 1;
  EXPECT_NE(error_of([&] { s.validate(); }).find("top-k"), std::string::npos);
  s = preset_shape("tiny");
  s.experts = 0;
  EXPECT_FALSE(error_of([&] { s.validate(); }).empty());
}

TEST(Shape, ExpertBytes) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(expert_bytes(s, WeightFormat::kBF16), size_t(2) * 3 * 768 * 2048);
  EXPECT_EQ(expert_bytes(s, WeightFormat::kMXFP8), size_t(3) * 768 * 2048 * 33 / 32);
}

TEST(Format, Parse) {
  EXPECT_EQ(parse_weight_format("bf16"), WeightFormat::kBF16);
  EXPECT_EQ(parse_weight_format("mxfp8"), WeightFormat::kMXFP8);
  EXPECT_THROW(parse_weight_format("fp4"), InvalidArgument);
}

TEST(Synthetic, DeterministicAndDistributedAsAsked) {
  const MoeShape s = preset_shape("tiny");
  SyntheticSpec spec;
  spec.seed = 5;
  const auto a = MoeWeights::synthetic(s, spec), b = MoeWeights::synthetic(s, spec);
  EXPECT_EQ(a.gate_up_bf16, b.gate_up_bf16);
  EXPECT_EQ(a.down_bf16, b.down_bf16);
  spec.seed = 6;
  const auto c = MoeWeights::synthetic(s, spec);
  EXPECT_NE(a.gate_up_bf16, c.gate_up_bf16);
  double sum = 0, sq = 0;
  for (uint16_t v : a.gate_up_bf16) {
    const double f = bf16_to_float(v);
    sum += f;
    sq += f * f;
  }
  const double n = double(a.gate_up_bf16.size());
  EXPECT_NEAR(sum / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.0005);
}

TEST(Synthetic, ViewsPointAtTheirTensors) {
  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{});
  const auto q = w.to_mxfp8();
  EXPECT_NO_THROW(q.view().validate());
  EXPECT_EQ(q.view().format, WeightFormat::kMXFP8);
  EXPECT_EQ(q.gate_up_scales.size(), q.gate_up_q.size() / 32);
  MoeWeightsView v = q.view();
  v.down_scales = nullptr;
  EXPECT_THROW(v.validate(), InvalidArgument);
}

// The vectors are public: a MoeWeights changed after it was made is
// refused by validate() (DeviceMoeWeights::upload runs it), where its view,
// pointers only, still passes.
TEST(Synthetic, ValidateRefusesTensorsChangedAfterTheFact) {
  const auto bf16 = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{});
  for (const MoeWeights& w : {bf16, bf16.to_mxfp8(), bf16.to_fp8_block128()}) EXPECT_NO_THROW(w.validate());
  MoeWeights shrunk = bf16;
  shrunk.down_bf16.resize(10);
  EXPECT_NO_THROW(shrunk.view().validate());
  EXPECT_NE(error_of([&] { shrunk.validate(); }).find("MoeWeights: bf16 down holds 10 elements"), std::string::npos);
  MoeWeights scales = bf16.to_mxfp8();
  scales.gate_up_scales.pop_back();
  EXPECT_NE(error_of([&] { scales.validate(); }).find("mxfp8 gate_up scales holds"), std::string::npos);
}

TEST(Synthetic, AdoptTakesEveryFormatsTensors) {
  const auto bf16 = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{});
  for (const MoeWeights& w : {bf16, bf16.to_mxfp8(), bf16.to_fp8_block128()}) {
    MoeWeights holder = w;
    const MoeWeights c = MoeWeights::adopt(std::move(holder), w.shape(), w.format());
    EXPECT_EQ(c.format(), w.format());
    EXPECT_EQ(c.shape().hidden, w.shape().hidden);
    EXPECT_FALSE(c.router.empty());
    EXPECT_EQ(c.router, w.router);
    EXPECT_EQ(c.gate_up_bf16, w.gate_up_bf16);
    EXPECT_EQ(c.down_bf16, w.down_bf16);
    EXPECT_EQ(c.gate_up_q, w.gate_up_q);
    EXPECT_EQ(c.down_q, w.down_q);
    EXPECT_EQ(c.gate_up_scales, w.gate_up_scales);
    EXPECT_EQ(c.down_scales, w.down_scales);
    EXPECT_EQ(c.gate_up_block_scales, w.gate_up_block_scales);
    EXPECT_EQ(c.down_block_scales, w.down_block_scales);
    EXPECT_NO_THROW(c.view().validate());
  }
  MoeWeights missing = bf16.to_fp8_block128();
  missing.down_block_scales.clear();
  const MoeShape s = bf16.shape();
  EXPECT_NE(error_of([&] { MoeWeights::adopt(std::move(missing), s, WeightFormat::kFP8Block128); })
                .find("MoeWeights: fp8-block128 down block scales holds 0 elements"),
            std::string::npos);
  MoeWeights short_router = bf16;
  short_router.router.pop_back();
  EXPECT_NE(error_of([&] { MoeWeights::adopt(std::move(short_router), s, WeightFormat::kBF16); }).find("router holds"),
            std::string::npos);
  MoeWeights wrong = bf16;  // BF16 tensors declared MXFP8
  EXPECT_NE(error_of([&] { MoeWeights::adopt(std::move(wrong), s, WeightFormat::kMXFP8); }).find("mxfp8 gate_up holds 0"),
            std::string::npos);
}

}  // namespace
}  // namespace wd
