// bench-moe's per-stage byte model (bench/classical_path.h): the stages as
// each configuration runs them, so that --stages' TB/s and % of the read
// bandwidth are of the bytes that stage really moves.
#include <gtest/gtest.h>

#include "bench/classical_path.h"
#include "warpdecode/layout.h"

namespace {

using wd::ClassicalConfig;
using wd::ClassicalGemm;
using wd::ClassicalStage;
using wd::WeightFormat;

ClassicalConfig tma(int t, bool fuse_silu, bool bf16_activations) {
  ClassicalConfig c;
  c.tile_tokens = t;
  c.gemm = ClassicalGemm::kTma;
  c.pdl = true;
  c.fuse_silu = fuse_silu;
  c.bf16_activations = bf16_activations;
  return c;
}

double bytes(ClassicalStage st, WeightFormat f, const ClassicalConfig& c, int batch, double distinct = 128) {
  return wd::bench::classical_stage_bytes(st, wd::preset_shape("qwen3-30b-a3b"), f, c, distinct, batch);
}

constexpr double H = 2048, I = 768, K = 8;
constexpr double kW8A8 = 1.0 + 4.0 / 128.0;  // an FP8 activation and its share of a group-of-128 scale

TEST(ClassicalStageBytes, W8A16MovesBf16ActivationsWhereW8A8MovesFp8) {
  const int B = 1024;
  const double BK = B * K;
  const ClassicalConfig w8a8 = tma(80, true, false), w8a16 = tma(80, true, true);
  EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kPermute, WeightFormat::kMXFP8, w8a8, B), B * H * 2 + BK * H * kW8A8);
  EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kPermute, WeightFormat::kMXFP8, w8a16, B), B * H * 2 + BK * H * 2);
  // down reads its h rows as BF16 under W8A16; its weights are the same.
  const double dw8a8 = bytes(ClassicalStage::kDown, WeightFormat::kMXFP8, w8a8, B);
  const double dw8a16 = bytes(ClassicalStage::kDown, WeightFormat::kMXFP8, w8a16, B);
  EXPECT_DOUBLE_EQ(dw8a16 - dw8a8, BK * I * (2 - kW8A8));
  // FP8 block-128 has no W8A16: the flag does not apply to it.
  EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kPermute, WeightFormat::kFP8Block128, tma(128, true, false), B),
                   B * H * 2 + BK * H * kW8A8);
}

TEST(ClassicalStageBytes, FusedSiluMovesNothingInItsOwnStage) {
  const int B = 4096;
  const double BK = B * K;
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128}) {
    const double a = f == WeightFormat::kBF16 ? 2.0 : kW8A8;
    const ClassicalConfig fused = tma(128, true, false), unfused = tma(128, false, false);
    EXPECT_EQ(bytes(ClassicalStage::kSiluMul, f, fused, B), 0.0) << wd::to_string(f);
    EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kSiluMul, f, unfused, B), BK * (2 * I * 2 + I * a)) << wd::to_string(f);
    // The fused gate_up writes h (I values a row, activation-typed) instead
    // of gate and up (2I BF16 values).
    EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kGateUp, f, unfused, B) - bytes(ClassicalStage::kGateUp, f, fused, B),
                     BK * (2 * I * 2 - I * a))
        << wd::to_string(f);
  }
}

TEST(ClassicalStageBytes, GatheredRowsLeaveThePermuteStageNothing) {
  const int B = 64;
  const ClassicalConfig gathered = tma(16, true, false);
  ASSERT_TRUE(gathered.gathers_rows(WeightFormat::kBF16));
  EXPECT_EQ(bytes(ClassicalStage::kPermute, WeightFormat::kBF16, gathered, B), 0.0);
  ClassicalConfig wide = tma(144, true, false);  // T = 144 copies the rows (permute) again
  ASSERT_FALSE(wide.gathers_rows(WeightFormat::kBF16));
  EXPECT_DOUBLE_EQ(bytes(ClassicalStage::kPermute, WeightFormat::kBF16, wide, B), B * H * 2 + B * K * H * 2);
}

TEST(ClassicalStageBytes, WeightsScaleWithTheDistinctExperts) {
  const ClassicalConfig c = tma(80, true, true);
  const double one = bytes(ClassicalStage::kGateUp, WeightFormat::kMXFP8, c, 1024, 1);
  const double two = bytes(ClassicalStage::kGateUp, WeightFormat::kMXFP8, c, 1024, 2);
  // One expert's gate_up: 2I·H codes and one E8M0 scale a block of 32.
  EXPECT_DOUBLE_EQ(two - one, 2 * I * H * (1.0 + 1.0 / 32));
}

}  // namespace
