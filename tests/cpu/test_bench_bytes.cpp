// bench-moe's byte model and weight copies (bench/moe_bench.h): the unique
// bytes every "% of read" divides, counted here from the formats' own
// definitions rather than through expert_bytes, and the copies that keep a
// B = 1 call's weights out of L2 until it reads them again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "bench/moe_bench.h"
#include "warpdecode/layout.h"

namespace {

using wd::WeightFormat;

// One expert's gate, up and down matrices (3·H·I values) and their scales,
// from the formats' definitions: BF16 2 bytes a value; MXFP8 1 byte a value
// and one E8M0 byte a block of 32 along each row; FP8 block-128 1 byte a
// value and one FP32 scale a 128 × 128 block of each matrix.
double expert_bytes_by_definition(const wd::MoeShape& s, WeightFormat f) {
  const double H = s.hidden, I = s.intermediate, values = 3 * H * I;
  switch (f) {
    case WeightFormat::kBF16: return 2 * values;
    case WeightFormat::kMXFP8: return values + values / 32;
    case WeightFormat::kFP8Block128: {
      const double hb = std::ceil(H / 128), ib = std::ceil(I / 128);
      return values + 4 * (2 * ib * hb + hb * ib);  // gate and up (I × H each), down (H × I)
    }
  }
  return 0;
}

TEST(BenchBytes, UniqueBytesAreTheDistinctExpertsAndTheActivations) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"}) {
    const wd::MoeShape s = wd::preset_shape(preset);
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8, WeightFormat::kFP8Block128}) {
      SCOPED_TRACE(std::string(preset) + " " + wd::to_string(f));
      for (const auto& [distinct, batch] : {std::pair{8.0, 1}, std::pair{57.5, 8}, std::pair{128.0, 64}}) {
        const double want = distinct * expert_bytes_by_definition(s, f) + 2.0 * batch * s.hidden;
        EXPECT_DOUBLE_EQ(wd::bench::unique_bytes(s, f, distinct, batch), want);
      }
    }
  }
  // The figure the README's qwen3-30b-a3b MXFP8 B = 1 row divides: 38.93 MB.
  EXPECT_DOUBLE_EQ(wd::bench::unique_bytes(wd::preset_shape("qwen3-30b-a3b"), WeightFormat::kMXFP8, 8, 1),
                   8 * (3.0 * 2048 * 768 * 33 / 32) + 2 * 2048);
}

TEST(BenchBytes, CopiesKeepEightL2sBetweenTwoUsesOfOne) {
  const size_t l2 = size_t(50) << 20;  // the H100's and H200's L2
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "tiny"}) {
    const wd::MoeShape s = wd::preset_shape(preset);
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8, WeightFormat::kFP8Block128}) {
      SCOPED_TRACE(std::string(preset) + " " + wd::to_string(f));
      const size_t copies = wd::bench::copies_for(s, f, l2);
      const double call = std::min(s.top_k, s.experts) * expert_bytes_by_definition(s, f);  // a B = 1 call
      // Between two uses of one copy, the other copies' calls read 8 L2s at
      // least, and one copy fewer would not always.
      EXPECT_GE(double(copies - 1) * call, 8.0 * l2);
      EXPECT_LT(double(copies - 2) * call, 8.0 * l2);
      // A graph holds whole rounds of the copies.
      for (int calls : {1, 7, 64}) EXPECT_EQ(wd::bench::calls_per_graph(calls, int(copies)) % int(copies), 0);
    }
  }
}

}  // namespace
