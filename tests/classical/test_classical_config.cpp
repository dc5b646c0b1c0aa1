// ClassicalConfig on the host: which GEMM kernel and tile a batch gets, which
// shapes the stream GEMM takes, and the labels the benchmark prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "warpdecode/classical.h"
#include "warpdecode/layout.h"

namespace wd {
namespace {

MoeShape shape_of(int hidden, int intermediate) {
  MoeShape s = preset_shape("qwen3-30b-a3b");
  s.hidden = hidden;
  s.intermediate = intermediate;
  return s;
}

TEST(ClassicalConfig, DecodeBatchesTakeTheStreamGemmWhereTheShapeFits) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"}) {
    const MoeShape s = preset_shape(preset);
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128, WeightFormat::kMXFP8}) {
      EXPECT_TRUE(ClassicalConfig::stream_fits(s, f)) << preset << " " << to_string(f);
      // Up to 8 tokens per expert (BF16 6, MXFP8 12): the stream GEMM at T = 8.
      const bool bf16 = f == WeightFormat::kBF16;
      const int up_to = s.experts * (f == WeightFormat::kMXFP8 ? 12 : bf16 ? 6 : 8) / s.top_k;
      for (int B : {1, 8, 32, 64, up_to}) {
        const ClassicalConfig c = ClassicalConfig::for_batch(s, B, f);
        EXPECT_EQ(c.label(), "t8/stream/pdl") << preset << " B=" << B;
        EXPECT_TRUE(c.supports(s, f)) << c.label();
      }
      // BF16 up to 12 tokens per expert: the T = 16 stream tile.
      const int up_to16 = s.experts * 12 / s.top_k;
      if (bf16) {
        for (int B : {up_to + 1, up_to16})
          EXPECT_EQ(ClassicalConfig::for_batch(s, B, f).label(), "t16/stream/pdl") << preset << " B=" << B;
      }
      // Above, larger tiles: never the stream GEMM.
      for (int B : {(bf16 ? up_to16 : up_to) + 1, 1024})
        EXPECT_NE(ClassicalConfig::for_batch(s, B, f).gemm, ClassicalGemm::kStream) << preset << " B=" << B;
    }
  }
}

TEST(ClassicalConfig, StreamGemmNeedsWholeRoundsOfK) {
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(160, 96), WeightFormat::kBF16));   // H % 64 != 0
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(256, 96), WeightFormat::kBF16));   // I % 64 != 0
  EXPECT_TRUE(ClassicalConfig::stream_fits(shape_of(256, 192), WeightFormat::kBF16));
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(256, 192), WeightFormat::kFP8Block128));  // I % 128 != 0
  EXPECT_TRUE(ClassicalConfig::stream_fits(shape_of(384, 256), WeightFormat::kMXFP8));
  // A shape the stream GEMM cannot take gets the mma.sync tile at T = 8.
  const ClassicalConfig c = ClassicalConfig::for_batch(shape_of(160, 96), 1, WeightFormat::kBF16);
  EXPECT_EQ(c.tile_tokens, 8);
  EXPECT_EQ(c.gemm, ClassicalGemm::kMmaSync);
  EXPECT_EQ(c.label(), "t8/pdl");
  // What each kernel takes.
  const MoeShape q = shape_of(2048, 768);
  EXPECT_TRUE((ClassicalConfig{16, ClassicalGemm::kStream}).supports(q, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{32, ClassicalGemm::kStream}).supports(q, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStreamWgmma}).supports(q, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStreamWgmma}).supports(q, WeightFormat::kMXFP8));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kWgmma}).supports(q, WeightFormat::kBF16));
  EXPECT_TRUE((ClassicalConfig{8, ClassicalGemm::kMmaSync}).supports(q, WeightFormat::kFP8Block128));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kMmaSync}).supports(shape_of(160, 96), WeightFormat::kFP8Block128));
}

TEST(ClassicalConfig, CandidatesAreEveryKernelTileWithAndWithoutPdl) {
  std::vector<std::string> labels;
  for (const auto& c : ClassicalConfig::candidates()) labels.push_back(c.label());
  const std::vector<std::string> want = {
      "t8", "t16", "t32", "t64", "t128", "t64/wgmma", "t128/wgmma", "t8/stream", "t16/stream", "t8/stream-wgmma",
      "t8/pdl", "t16/pdl", "t32/pdl", "t64/pdl", "t128/pdl", "t64/wgmma/pdl", "t128/wgmma/pdl", "t8/stream/pdl",
      "t16/stream/pdl", "t8/stream-wgmma/pdl"};
  EXPECT_EQ(labels, want);
  // Every default for_batch picks is a candidate.
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128, WeightFormat::kMXFP8})
    for (int B : {1, 64, 128, 1024, 4096})
      EXPECT_NE(std::find(want.begin(), want.end(), ClassicalConfig::for_batch(s, B, f).label()), want.end()) << B;
}

TEST(ClassicalConfig, Labels) {
  EXPECT_STREQ(to_string(ClassicalGemm::kMmaSync), "mma");
  EXPECT_STREQ(to_string(ClassicalGemm::kWgmma), "wgmma");
  EXPECT_STREQ(to_string(ClassicalGemm::kStream), "stream");
  EXPECT_EQ((ClassicalConfig{16}).label(), "t16");
  EXPECT_EQ((ClassicalConfig{128, ClassicalGemm::kWgmma, true}).label(), "t128/wgmma/pdl");
  EXPECT_EQ((ClassicalConfig{8, ClassicalGemm::kStream, false}).label(), "t8/stream");
  EXPECT_STREQ(to_string(ClassicalGemm::kStreamWgmma), "stream-wgmma");
  EXPECT_EQ((ClassicalConfig{8, ClassicalGemm::kStreamWgmma, true}).label(), "t8/stream-wgmma/pdl");
}

}  // namespace
}  // namespace wd
