// bench-moe's per-stage byte model (bench/classical_path.h): the stages as
// each configuration runs them, so that --stages' TB/s and % of the read
// bandwidth are of the bytes that stage really moves.
#include <gtest/gtest.h>

#include "bench/classical_path.h"
#include "bench/moe_bench.h"
#include "bench/nvml_loader.h"
#include "warpdecode/error.h"
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

// bench-moe's weight copies (bench/moe_bench.h): enough that the calls
// between two uses of one copy read at least 8x the L2 at B = 1, where a call
// reads only its K experts; and graphs of a multiple of the copies, so that
// the last call of a replay and the first of the next use different copies.
namespace {
using wd::WeightFormat;

TEST(BenchCopies, TheCallsBetweenTwoUsesOfACopyReadEightL2AtBatchOne) {
  const size_t l2 = size_t(60) << 20;  // an H200's
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"})
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8, WeightFormat::kFP8Block128}) {
      const wd::MoeShape s = wd::preset_shape(preset);
      const size_t n = wd::bench::copies_for(s, f, l2);
      const double call = double(s.top_k) * double(wd::expert_bytes(s, f));
      EXPECT_EQ(double(wd::bench::batch_one_call_bytes(s, f)), call) << preset << " " << wd::to_string(f);
      EXPECT_GE(double(n - 1) * call, 8.0 * double(l2)) << preset << " " << wd::to_string(f);
      EXPECT_LT(double(n - 2) * call, 8.0 * double(l2)) << preset << " " << wd::to_string(f);  // no more than that
    }
  // qwen3-30b-a3b MXFP8: a B = 1 call reads 8 x 4.87 MB, below the L2; one
  // copy of its 623 MB layer (8x the L2 whole) was what the harness held.
  EXPECT_EQ(wd::bench::copies_for(wd::preset_shape("qwen3-30b-a3b"), WeightFormat::kMXFP8, l2), 14u);
}

TEST(BenchCopies, AGraphHoldsAMultipleOfTheCopies) {
  EXPECT_EQ(wd::bench::calls_per_graph(16, 1), 16);
  EXPECT_EQ(wd::bench::calls_per_graph(16, 14), 28);
  EXPECT_EQ(wd::bench::calls_per_graph(16, 16), 16);
  EXPECT_EQ(wd::bench::calls_per_graph(3, 134), 134);
  EXPECT_EQ(wd::bench::calls_per_graph(16, 5), 20);
  EXPECT_THROW(wd::bench::calls_per_graph(0, 4), wd::InvalidArgument);
}

// Without the driver's library (CI's machines have none; here a name that
// cannot exist) nothing is read and the reason names the library.
TEST(NvmlDevice, WithoutTheLibraryReadsNothingAndSaysWhy) {
  const wd::bench::NvmlDevice nvml(0, "libwarpdecode-no-such-nvml.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.unavailable_reason().find("cannot load libwarpdecode-no-such-nvml.so.1"), std::string::npos)
      << nvml.unavailable_reason();
  EXPECT_FALSE(nvml.driver_version().has_value());
  EXPECT_FALSE(nvml.sm_clock_mhz().has_value());
  EXPECT_FALSE(nvml.mem_clock_mhz().has_value());
  EXPECT_FALSE(nvml.power_mw().has_value());
  EXPECT_FALSE(nvml.power_capped().has_value());
  EXPECT_FALSE(nvml.power_limit_w().has_value());
}

TEST(BenchTiming, MedianOfAnEvenSeriesIsTheMeanOfItsMiddles) {
  // bench-moe's default 30 replays: us_median between the 15th and 16th
  // fastest (it was the slower of them), min and max the extremes.
  std::vector<double> us;
  for (int i = 30; i >= 1; --i) us.push_back(10.0 + i);
  const wd::bench::Timing t = wd::bench::summarize(us);
  EXPECT_EQ(t.us_median, 25.5);
  EXPECT_EQ(t.us_min, 11.0);
  EXPECT_EQ(t.us_max, 40.0);
  const wd::bench::Timing odd = wd::bench::summarize({3.0, 9.0, 1.0});
  EXPECT_EQ(odd.us_median, 3.0);
  EXPECT_EQ(odd.us_min, 1.0);
  EXPECT_EQ(odd.us_max, 9.0);
  EXPECT_THROW(wd::bench::summarize({}), wd::Error);
}

}  // namespace
