// ClassicalConfig on the host: which GEMM kernel and tile a batch gets, which
// shapes the stream GEMM takes, and the labels the benchmark prints. Host
// rules only: they run in the build without CUDA too (the launchers'
// refusals, which need the CUDA build, are tests/classical/
// test_classical_launchers.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/classical_fits.h"
#include "kernels/k_split.h"
#include "warpdecode/classical_config.h"
#include "warpdecode/dispatch_rules.h"
#include "warpdecode/layout.h"

namespace wd {
namespace {

MoeShape shape_of(int hidden, int intermediate) {
  MoeShape s = preset_shape("qwen3-30b-a3b");
  s.hidden = hidden;
  s.intermediate = intermediate;
  return s;
}

// On an sm_90a device: the TMA tile at every batch, T the smallest power of
// two >= 2m (>= m from m = 32 for W8A8), except BF16 experts of up to 2^21
// weights a projection, which keep the stream tile for 1/8 < m <= 2, and
// BF16 T = 144 where it pads fewer rows than 128 (m = 128 and 256, not 192),
// with weight-sharing clusters where pairs of its tiles pad at most 5 % more
// (m = 256).
TEST(ClassicalConfig, Sm90aTakesTheTmaTileSizedToTheTokensPerExpert) {
  const MoeShape small = preset_shape("qwen3-30b-a3b"), big = preset_shape("qwen3-235b-a22b");  // m = B / 16
  const WeightFormat bf16 = WeightFormat::kBF16, fp8 = WeightFormat::kFP8Block128, mx = WeightFormat::kMXFP8;
  auto label = [](const MoeShape& s, int B, WeightFormat f) { return ClassicalConfig::for_batch(s, B, f, true).label(); };
  // (batch, expected label) per shape and format family.
  using Table = std::vector<std::pair<int, const char*>>;
  // BF16 TMA tiles fuse SiLU·up into the gate_up GEMM (I % 128 == 0 here).
  const Table small_bf16 = {{1, "t8/tma/silu/pdl"},    {2, "t8/tma/silu/pdl"},     {3, "t8/stream/pdl"},
                            {8, "t8/stream/pdl"},      {32, "t8/stream/pdl"},      {33, "t8/tma/silu/pdl"},
                            {64, "t8/tma/silu/pdl"},   {65, "t16/tma/silu/pdl"},   {128, "t16/tma/silu/pdl"},
                            {256, "t32/tma/silu/pdl"}, {512, "t64/tma/silu/pdl"},  {1024, "t80/tma/silu/pdl"},
                            {1025, "t128/tma/silu/pdl"},
                            {2048, "t144/tma/silu/pdl"}, {3072, "t128/tma/silu/pdl"}, {4096, "t144/tma/silu/wmc/pdl"}};
  const Table big_bf16 = {{1, "t8/tma/silu/pdl"},  {8, "t8/tma/silu/pdl"},       {32, "t8/tma/silu/pdl"},
                          {64, "t8/tma/silu/pdl"}, {1024, "t80/tma/silu/pdl"}, {2048, "t144/tma/silu/pdl"},
                          {4096, "t144/tma/silu/wmc/pdl"}};
  // W8A8 fuses SiLU·up and its quantization at T = 64 and 80 (256-row
  // tiles), T = 80 up to m = 128 where it pads at most 2 % more rows than
  // 64: 1024 and 2048 tokens, not 512 nor 4096. (BF16: T = 80 up to m = 64 where it pads
  // fewer rows than 128: 1024 tokens, not 1025.)
  const Table w8a8 = {{1, "t8/tma/pdl"},          {2, "t8/tma/pdl"},          {64, "t8/tma/pdl"},
                      {128, "t16/tma/pdl"},       {256, "t32/tma/pdl"},       {512, "t64/tma/silu/pdl"},
                      {1024, "t80/tma/silu/pdl"}, {1025, "t80/tma/silu/pdl"}, {2048, "t80/tma/silu/pdl"},
                      {4096, "t64/tma/silu/pdl"}, {8192, "t64/tma/silu/pdl"},
                      {65536, "t64/tma/silu/pdl"}};
  auto expect = [&](const MoeShape& s, WeightFormat f, const Table& t) {
    for (const auto& [B, want] : t) EXPECT_EQ(label(s, B, f), want) << to_string(f) << " H=" << s.hidden << " B=" << B;
  };
  expect(small, bf16, small_bf16);
  expect(big, bf16, big_bf16);
  // FP8 block-128 takes its token-split T = 128 tile from m = 128 (2048
  // tokens) on; below, T = 80 with one tile an expert (1024, 1025).
  Table fp8_table = w8a8;
  for (auto& [B, want] : fp8_table)
    if (B >= 2048) want = "t128/tma/silu/pdl";
  for (const MoeShape& s : {small, big}) {
    expect(s, mx, w8a8);
    expect(s, fp8, fp8_table);
  }
  // I % 128 != 0: the TMA tile without SiLU·up fused.
  EXPECT_EQ(ClassicalConfig::for_batch(shape_of(2048, 704), 1, bf16, true).label(), "t8/tma/pdl");
  // A shape the TMA tile does not take (N = H = 132, not a multiple of 8)
  // keeps the choice of a device without it, except that wgmma is there.
  const MoeShape odd = shape_of(132, 96);
  EXPECT_FALSE(ClassicalConfig::tma_fits(odd, bf16));
  EXPECT_EQ(ClassicalConfig::for_batch(odd, 1, bf16, true).label(), "t8/pdl");
  EXPECT_EQ(ClassicalConfig::for_batch(odd, 1024, bf16, true).label(), "t64/wgmma/pdl");
  EXPECT_EQ(ClassicalConfig::for_batch(odd, 1024, bf16, false).label(), "t128/pdl");
}

// Without sm_90a kernels: the stream GEMM where the shape fits, then the
// shared-memory tiles.
TEST(ClassicalConfig, DecodeBatchesTakeTheStreamGemmWhereTheShapeFits) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"}) {
    const MoeShape s = preset_shape(preset);
    for (WeightFormat f : kWeightFormats) {
      EXPECT_TRUE(ClassicalConfig::stream_fits(s, f)) << preset << " " << to_string(f);
      // Up to 8 tokens per expert (BF16 6, MXFP8 12): the stream GEMM at T = 8.
      const bool bf16 = f == WeightFormat::kBF16;
      const int up_to = s.experts * (f == WeightFormat::kMXFP8 ? 12 : bf16 ? 6 : 8) / s.top_k;
      for (int B : {1, 8, 32, 64, up_to}) {
        const ClassicalConfig c = ClassicalConfig::for_batch(s, B, f, false);
        EXPECT_EQ(c.label(), "t8/stream/pdl") << preset << " B=" << B;
        EXPECT_TRUE(c.supports(s, f)) << c.label();
      }
      // BF16 up to 12 tokens per expert: the T = 16 stream tile.
      const int up_to16 = s.experts * 12 / s.top_k;
      if (bf16) {
        for (int B : {up_to + 1, up_to16})
          EXPECT_EQ(ClassicalConfig::for_batch(s, B, f, false).label(), "t16/stream/pdl") << preset << " B=" << B;
      }
      // Above, larger tiles: never the stream GEMM.
      for (int B : {(bf16 ? up_to16 : up_to) + 1, 1024})
        EXPECT_NE(ClassicalConfig::for_batch(s, B, f, false).gemm, ClassicalGemm::kStream) << preset << " B=" << B;
    }
  }
}

// Tiled-only weights: for BF16, for_tiled_copies is for_batch's choice
// wherever that is the TMA GEMM, and the TMA GEMM (T from the tokens per
// expert, SiLU·up fused) where for_batch takes the stream GEMM; for MXFP8,
// W8A16. Either reads the tiled copies of every preset. What cannot: FP8
// block-128, MXFP8 in W8A8, BF16 weights with a16 set, the stream GEMM,
// SiLU·up apart, a shape whose K is not whole 64-element halves or whose I
// does not fuse. The dispatch's configuration for them is for_tiled_copies.
TEST(ClassicalConfig, TiledCopiesTakeTheTmaGemmWithSiluFused) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "tiny"}) {
    const MoeShape s = preset_shape(preset);
    const WeightFormat f = WeightFormat::kBF16;
    EXPECT_TRUE(classical_reads_tiled_only(s, f, true)) << preset;
    EXPECT_FALSE(classical_reads_tiled_only(s, f, false)) << preset;
    EXPECT_TRUE(classical_reads_tiled_only(s, WeightFormat::kMXFP8, true)) << preset;  // in W8A16
    EXPECT_FALSE(classical_reads_tiled_only(s, WeightFormat::kMXFP8, false)) << preset;
    EXPECT_FALSE(classical_reads_tiled_only(s, WeightFormat::kFP8Block128, true)) << preset;
    for (int B : {1, 64, 1024}) {
      const ClassicalConfig m = ClassicalConfig::for_tiled_copies(s, B, true, WeightFormat::kMXFP8);
      EXPECT_TRUE(m.bf16_activations) << preset << " B=" << B << " " << m.label();
      EXPECT_TRUE(m.reads_tiled(s, WeightFormat::kMXFP8)) << preset << " B=" << B << " " << m.label();
      EXPECT_FALSE(m.reads_tiled(s, WeightFormat::kBF16)) << m.label();
      ClassicalConfig w8a8 = m;
      w8a8.bf16_activations = false;
      EXPECT_FALSE(w8a8.reads_tiled(s, WeightFormat::kMXFP8)) << w8a8.label();
    }
    for (int B : {1, 2, 5, 16, 32, 64, 128, 1024, 4096}) {
      const ClassicalConfig c = ClassicalConfig::for_tiled_copies(s, B, true, f);
      const ClassicalConfig d = ClassicalConfig::for_batch(s, B, f, true);
      EXPECT_EQ(c.gemm, ClassicalGemm::kTma) << preset << " B=" << B;
      EXPECT_TRUE(c.fuse_silu) << preset << " B=" << B;
      EXPECT_TRUE(c.reads_tiled(s, f)) << preset << " B=" << B << " " << c.label();
      if (d.gemm == ClassicalGemm::kTma) EXPECT_EQ(c.label(), d.label()) << preset << " B=" << B;
      else EXPECT_FALSE(d.reads_tiled(s, f)) << preset << " B=" << B << " " << d.label();
      EXPECT_FALSE(c.reads_tiled(s, WeightFormat::kMXFP8));
      EXPECT_EQ(dispatch_classical_config(CrossoverTable{}, s, f, B, DispatchPolicy::kFastest, true,
                                          WeightCopies::kTiledOnly)
                    .label(),
                c.label());
    }
  }
  const MoeShape real = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(ClassicalConfig::for_batch(real, 5, WeightFormat::kBF16, true).gemm, ClassicalGemm::kStream);
  EXPECT_EQ(ClassicalConfig::for_tiled_copies(real, 5, true, WeightFormat::kBF16).label(), "t8/tma/silu/pdl");
  ClassicalConfig c = ClassicalConfig::for_tiled_copies(real, 256, true, WeightFormat::kBF16);
  ASSERT_TRUE(c.reads_tiled(real, WeightFormat::kBF16));
  c.fuse_silu = false;
  EXPECT_FALSE(c.reads_tiled(real, WeightFormat::kBF16));
  c.fuse_silu = true;
  c.bf16_activations = true;
  EXPECT_FALSE(c.reads_tiled(real, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStream, true}.reads_tiled(real, WeightFormat::kBF16)));
  // K in whole 64-element halves; gate_up fused (I % 128); the tilings' own rules.
  EXPECT_FALSE(classical_reads_tiled_only(shape_of(2048, 704), WeightFormat::kBF16, true));  // I % 128
  EXPECT_FALSE(classical_reads_tiled_only(shape_of(2080, 768), WeightFormat::kBF16, true));  // H % 64
  EXPECT_TRUE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 1536, 2048, true, false));
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 1536, 2048 + 32, true, false));  // K % 64
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 1536 + 128, 2048, true, false));  // 2I % 256
  EXPECT_TRUE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 2048 + 16, 768, false, false));   // down: N % 16
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 2048 + 8, 768, false, false));
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kMXFP8, 1536, 2048, true, false));  // W8A8
  EXPECT_TRUE(kernels::tma_gemm_reads_tiled(WeightFormat::kMXFP8, 1536, 2048, true, true));    // W8A16
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kFP8Block128, 1536, 2048, true, false));
  EXPECT_FALSE(kernels::tma_gemm_reads_tiled(WeightFormat::kBF16, 1536, 2048, true, true));
}

TEST(ClassicalConfig, StreamGemmNeedsWholeRoundsOfK) {
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(160, 96), WeightFormat::kBF16));   // H % 64 != 0
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(256, 96), WeightFormat::kBF16));   // I % 64 != 0
  EXPECT_TRUE(ClassicalConfig::stream_fits(shape_of(256, 192), WeightFormat::kBF16));
  EXPECT_FALSE(ClassicalConfig::stream_fits(shape_of(256, 192), WeightFormat::kFP8Block128));  // I % 128 != 0
  EXPECT_TRUE(ClassicalConfig::stream_fits(shape_of(384, 256), WeightFormat::kMXFP8));
  // A shape the stream GEMM cannot take gets the mma.sync tile at T = 8.
  const ClassicalConfig c = ClassicalConfig::for_batch(shape_of(160, 96), 1, WeightFormat::kBF16, false);
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
  // The TMA tile: T = 8 to 128 (and nowhere without an sm_90a device).
  EXPECT_FALSE((ClassicalConfig{256, ClassicalGemm::kTma}).supports(q, WeightFormat::kBF16));
  // SiLU·up fused: the TMA GEMM, I % 128 == 0; BF16 activations at every
  // T, W8A8 at T = 64 only (its 256-row tiles: 128 neurons, one group).
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStream, true, true}).supports(q, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{64, ClassicalGemm::kTma, true, true}).supports(shape_of(2048, 704), WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{64, ClassicalGemm::kTma, true, true}).supports(shape_of(2048, 704), WeightFormat::kFP8Block128));
  EXPECT_EQ((ClassicalConfig{64, ClassicalGemm::kTma, true, true}).supports(q, WeightFormat::kBF16),
            kernels::wgmma_available());
  for (WeightFormat f : {WeightFormat::kFP8Block128, WeightFormat::kMXFP8}) {
    EXPECT_EQ((ClassicalConfig{64, ClassicalGemm::kTma, true, true}).supports(q, f), kernels::wgmma_available());
    for (int t : {8, 16, 32, 128})
      EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true, true}).supports(q, f)) << to_string(f) << " T=" << t;
    EXPECT_FALSE((ClassicalConfig{64, ClassicalGemm::kWgmma, true, true}).supports(q, f)) << to_string(f);
  }
  if (!kernels::wgmma_available()) {
    EXPECT_FALSE((ClassicalConfig{128, ClassicalGemm::kTma}).supports(q, WeightFormat::kMXFP8));
  }
  EXPECT_TRUE((ClassicalConfig{8, ClassicalGemm::kMmaSync}).supports(q, WeightFormat::kFP8Block128));
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kMmaSync}).supports(shape_of(160, 96), WeightFormat::kFP8Block128));
}

// The TMA prefill tile's shape rules (the launcher's refusals:
// test_classical_launchers.cpp).
TEST(ClassicalConfig, TmaTileShapes) {
  using kernels::tma_gemm_fits;
  EXPECT_TRUE(tma_gemm_fits(WeightFormat::kBF16, 1536, 2048));
  EXPECT_TRUE(tma_gemm_fits(WeightFormat::kBF16, 192, 160));    // N, K past a tile: zero-filled, not stored
  EXPECT_FALSE(tma_gemm_fits(WeightFormat::kBF16, 1536, 2044));  // K % 8: rows not 16-byte strided
  EXPECT_FALSE(tma_gemm_fits(WeightFormat::kBF16, 1532, 2048));  // N % 8: the paired column stores
  EXPECT_TRUE(tma_gemm_fits(WeightFormat::kFP8Block128, 2048, 768));
  EXPECT_TRUE(tma_gemm_fits(WeightFormat::kMXFP8, 5120, 6144));
  EXPECT_FALSE(tma_gemm_fits(WeightFormat::kFP8Block128, 2048, 704));  // W8A8: K % 128
  EXPECT_FALSE(tma_gemm_fits(WeightFormat::kMXFP8, 1000, 2048));       // W8A8: N % 128
}

TEST(ClassicalConfig, W8A16IsMxfp8OnTheTmaTile) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128})
    for (int t : {8, 128})
      EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true, true, true}).supports(s, f)) << to_string(f);
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStream, true, false, true}).supports(s, WeightFormat::kMXFP8));
  EXPECT_FALSE((ClassicalConfig{64, ClassicalGemm::kWgmma, true, false, true}).supports(s, WeightFormat::kMXFP8));
  // The defaults stay W8A8: the engines' path, which `accuracy` measures.
  for (int B : {1, 64, 4096})
    EXPECT_FALSE(ClassicalConfig::for_batch(s, B, WeightFormat::kMXFP8, true).bf16_activations) << B;
  // SiLU·up fuses with W8A16 where it fuses for BF16 (I % 128 == 0); with
  // W8A8 at T = 64 only.
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kTma, true, true, false}).supports(s, WeightFormat::kMXFP8));
  EXPECT_EQ((ClassicalConfig{8, ClassicalGemm::kTma, true, true, true}).supports(s, WeightFormat::kMXFP8),
            kernels::wgmma_available());
}

// W8A16 takes tiles of at least 16 rows from one token an expert on (B >=
// 16 on E = 128, K = 8), the smallest T >= 2m above that, T = 8 below.
TEST(ClassicalConfig, W8A16TilesAreSixteenRowsFromOneTokenAnExpert) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    const MoeShape s = preset_shape(preset);
    auto t = [&](int B) { return ClassicalConfig::for_batch(s, B, WeightFormat::kMXFP8, true, true).tile_tokens; };
    EXPECT_EQ(t(1), 8) << preset;
    EXPECT_EQ(t(15), 8) << preset;
    for (int B : {16, 32, 64, 128}) EXPECT_EQ(t(B), 16) << preset << " B=" << B;
    EXPECT_EQ(t(256), 32) << preset;
  }
}

// W8A16's activation K order: a permutation of each group of 16 that puts
// elements 4t .. 4t + 3 (one word of a weight row's E4M3 codes) at the
// positions a wgmma A fragment's thread t takes from a k16 step: 2t, 2t + 1
// (low half of its register) and 2t + 8, 2t + 9 (high half).
TEST(ClassicalConfig, A16KOrderPutsAThreadsFourCodesAtItsFragmentPositions) {
  for (int g = 0; g < 3; ++g) {
    std::vector<int> seen(16, 0);
    for (int i = 0; i < 16; ++i) {
      const int p = a16_k_position(16 * g + i);
      ASSERT_GE(p, 16 * g);
      ASSERT_LT(p, 16 * g + 16);
      ++seen[p - 16 * g];
    }
    EXPECT_EQ(seen, std::vector<int>(16, 1)) << "group " << g;
  }
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(a16_k_position(32 + 4 * t), 32 + 2 * t);
    EXPECT_EQ(a16_k_position(32 + 4 * t + 1), 32 + 2 * t + 1);
    EXPECT_EQ(a16_k_position(32 + 4 * t + 2), 32 + 2 * t + 8);
    EXPECT_EQ(a16_k_position(32 + 4 * t + 3), 32 + 2 * t + 9);
  }
}

// T = 144 is the TMA tile's with BF16 activations alone (BF16 weights, or
// W8A16): for 2048 and 4096 tokens on E = 128, K = 8 (the table above),
// where two 144-row tiles hold an expert's tokens and 128-row ones take
// three for half the experts.
TEST(ClassicalConfig, Tile144IsTheTmaTileWithBf16Activations) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const WeightFormat bf16 = WeightFormat::kBF16;
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kMmaSync}).supports(s, bf16));
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kWgmma}).supports(s, bf16));
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kStream}).supports(s, bf16));
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kTma, true}).supports(s, WeightFormat::kFP8Block128));
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kTma, true}).supports(s, WeightFormat::kMXFP8));
  EXPECT_EQ((ClassicalConfig{144, ClassicalGemm::kTma, true, true, true}).supports(s, WeightFormat::kMXFP8),
            kernels::wgmma_available());
  EXPECT_EQ((ClassicalConfig{144, ClassicalGemm::kTma, true, false, true}).supports(s, WeightFormat::kMXFP8),
            kernels::wgmma_available());
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kTma, true, false, true}).supports(s, WeightFormat::kFP8Block128));
  // W8A8 keeps its tiles at prefill (FP8 block-128: the token-split 128);
  // W8A16 takes 144 as BF16 does (80 at 1024 tokens, 128 at 3072, where 144
  // would pad more).
  for (int B : {2048, 4096}) {
    EXPECT_EQ(ClassicalConfig::for_batch(s, B, WeightFormat::kFP8Block128, true).tile_tokens, 128) << B;
    EXPECT_EQ(ClassicalConfig::for_batch(s, B, WeightFormat::kMXFP8, true).tile_tokens, B == 2048 ? 80 : 64) << B;
    EXPECT_EQ(ClassicalConfig::for_batch(s, B, WeightFormat::kMXFP8, true, true).tile_tokens, 144) << B;
  }
  EXPECT_EQ(ClassicalConfig::for_batch(s, 1024, WeightFormat::kMXFP8, true, true).tile_tokens, 80);
  EXPECT_EQ(ClassicalConfig::for_batch(s, 3072, WeightFormat::kMXFP8, true, true).tile_tokens, 128);
  EXPECT_FALSE(ClassicalConfig::for_batch(s, 4096, WeightFormat::kMXFP8, true, true).share_weights);
  // Without the sm_90a kernels, no T = 144.
  for (int B : {2048, 4096}) EXPECT_NE(ClassicalConfig::for_batch(s, B, bf16, false).tile_tokens, 144) << B;
}

// T = 80 is the TMA tile's alone (BF16, W8A8 and W8A16): 1024 tokens on E =
// 128, K = 8, where one 80-row tile holds an expert's 64 ± 8 tokens and
// W8A8's 64-row tiles take two for half the experts, BF16's and W8A16's
// 128-row ones pad them to 128.
TEST(ClassicalConfig, Tile80IsTheTmaTileOnly) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const WeightFormat bf16 = WeightFormat::kBF16, fp8 = WeightFormat::kFP8Block128, mx = WeightFormat::kMXFP8;
  for (WeightFormat f : {bf16, fp8, mx}) {
    EXPECT_FALSE((ClassicalConfig{80, ClassicalGemm::kMmaSync}).supports(s, f)) << to_string(f);
    EXPECT_FALSE((ClassicalConfig{80, ClassicalGemm::kWgmma}).supports(s, f)) << to_string(f);
    EXPECT_FALSE((ClassicalConfig{80, ClassicalGemm::kStream}).supports(s, f)) << to_string(f);
    EXPECT_EQ((ClassicalConfig{80, ClassicalGemm::kTma, true}).supports(s, f), kernels::wgmma_available());
    EXPECT_EQ((ClassicalConfig{80, ClassicalGemm::kTma, true, true}).supports(s, f), kernels::wgmma_available());
  }
  EXPECT_EQ((ClassicalConfig{80, ClassicalGemm::kTma, true, true, true}).supports(s, mx),
            kernels::wgmma_available());  // W8A16
  EXPECT_EQ(ClassicalConfig::for_batch(s, 1024, mx, true, true).tile_tokens, 80);
  for (WeightFormat f : {bf16, fp8, mx}) {
    EXPECT_EQ(ClassicalConfig::for_batch(s, 1024, f, true).tile_tokens, 80) << to_string(f);
    // Without the sm_90a kernels, no T = 80.
    for (int B : {1024, 1100}) EXPECT_NE(ClassicalConfig::for_batch(s, B, f, false).tile_tokens, 80) << B;
  }
}

// Weight-sharing clusters: the BF16 TMA tile at T = 144 and the FP8
// block-128 W8A8 one at T = 64 and 80 (256-row tiles), nothing else (W8A16
// at T = 144 measured slower with them: session 24 run 2).
TEST(ClassicalConfig, SharedWeightTilesAreBf16At144AndFp8At64And80) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const bool sm90a = kernels::wgmma_available();
  ClassicalConfig c{144, ClassicalGemm::kTma, true, true, false, true};
  EXPECT_EQ(c.label(), "t144/tma/silu/wmc/pdl");
  EXPECT_EQ(c.supports(s, WeightFormat::kBF16), sm90a);
  EXPECT_FALSE(c.supports(s, WeightFormat::kFP8Block128));
  EXPECT_FALSE(c.supports(s, WeightFormat::kMXFP8));
  for (bool silu : {false, true}) {
    const ClassicalConfig a16{144, ClassicalGemm::kTma, true, silu, true, true};
    EXPECT_FALSE(a16.supports(s, WeightFormat::kMXFP8)) << a16.label();
  }
  for (int t : {64, 80})
    for (bool silu : {false, true}) {
      const ClassicalConfig f8{t, ClassicalGemm::kTma, true, silu, false, true};
      EXPECT_EQ(f8.supports(s, WeightFormat::kFP8Block128), sm90a) << f8.label();
      EXPECT_FALSE(f8.supports(s, WeightFormat::kBF16)) << f8.label();
      EXPECT_FALSE(f8.supports(s, WeightFormat::kMXFP8)) << f8.label();
      EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true, silu, true, true}).supports(s, WeightFormat::kMXFP8))
          << "W8A16 " << f8.label();
    }
  for (int t : {8, 16, 32, 128})
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128})
      EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true, false, false, true}).supports(s, f)) << t;
  EXPECT_FALSE((ClassicalConfig{128, ClassicalGemm::kWgmma, true, false, false, true}).supports(s, WeightFormat::kBF16));
  EXPECT_FALSE((ClassicalConfig{64, ClassicalGemm::kWgmma, true, false, false, true}).supports(s, WeightFormat::kFP8Block128));
}

// SiLU·up and h's quantization fused into the W8A8 gate_up GEMM: where a
// tile's 256 weight rows are 128 neurons, one activation group — T = 64 and
// 80, and FP8 block-128's token-split tile at T = 128 — not MXFP8 W8A8 at T =
// 128 (128-row tiles: half a group) nor at T = 32. (The GEMM refuses the
// others itself: test_classical_launchers.cpp.)
TEST(ClassicalConfig, W8A8FusesSiluWhereATileIsOneActivationGroup) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const bool sm90a = kernels::wgmma_available();
  const WeightFormat fp8 = WeightFormat::kFP8Block128, mx = WeightFormat::kMXFP8;
  for (int t : {64, 80}) {
    EXPECT_EQ((ClassicalConfig{t, ClassicalGemm::kTma, true, true}).supports(s, fp8), sm90a) << t;
    EXPECT_EQ((ClassicalConfig{t, ClassicalGemm::kTma, true, true}).supports(s, mx), sm90a) << t;
  }
  EXPECT_EQ((ClassicalConfig{128, ClassicalGemm::kTma, true, true}).supports(s, fp8), sm90a);
  EXPECT_FALSE((ClassicalConfig{128, ClassicalGemm::kTma, true, true}).supports(s, mx));
  for (WeightFormat f : {fp8, mx}) EXPECT_FALSE((ClassicalConfig{32, ClassicalGemm::kTma, true, true}).supports(s, f));
}

TEST(ClassicalConfig, CandidatesAreEveryKernelTileWithAndWithoutPdl) {
  std::vector<std::string> labels;
  for (const auto& c : ClassicalConfig::candidates()) labels.push_back(c.label());
  const std::vector<std::string> want = {
      "t8", "t16", "t32", "t64", "t128", "t64/wgmma", "t128/wgmma", "t8/stream", "t16/stream", "t8/stream-wgmma",
      "t8/tma", "t16/tma", "t32/tma", "t64/tma", "t80/tma", "t128/tma", "t144/tma", "t8/tma/silu", "t16/tma/silu",
      "t32/tma/silu", "t64/tma/silu", "t80/tma/silu", "t128/tma/silu", "t144/tma/silu", "t8/tma/a16", "t16/tma/a16", "t32/tma/a16", "t64/tma/a16", "t80/tma/a16", "t128/tma/a16", "t144/tma/a16",
      "t8/tma/a16/silu", "t16/tma/a16/silu", "t32/tma/a16/silu", "t64/tma/a16/silu", "t80/tma/a16/silu", "t128/tma/a16/silu", "t144/tma/a16/silu",
      "t64/tma/wmc", "t64/tma/silu/wmc", "t80/tma/wmc", "t80/tma/silu/wmc", "t144/tma/wmc", "t144/tma/silu/wmc",
      "t8/pdl", "t16/pdl", "t32/pdl", "t64/pdl", "t128/pdl", "t64/wgmma/pdl",
      "t128/wgmma/pdl", "t8/stream/pdl", "t16/stream/pdl", "t8/stream-wgmma/pdl", "t8/tma/pdl", "t16/tma/pdl",
      "t32/tma/pdl", "t64/tma/pdl", "t80/tma/pdl", "t128/tma/pdl", "t144/tma/pdl", "t8/tma/silu/pdl", "t16/tma/silu/pdl",
      "t32/tma/silu/pdl", "t64/tma/silu/pdl", "t80/tma/silu/pdl", "t128/tma/silu/pdl", "t144/tma/silu/pdl", "t8/tma/a16/pdl", "t16/tma/a16/pdl", "t32/tma/a16/pdl",
      "t64/tma/a16/pdl", "t80/tma/a16/pdl", "t128/tma/a16/pdl", "t144/tma/a16/pdl", "t8/tma/a16/silu/pdl", "t16/tma/a16/silu/pdl", "t32/tma/a16/silu/pdl",
      "t64/tma/a16/silu/pdl", "t80/tma/a16/silu/pdl", "t128/tma/a16/silu/pdl", "t144/tma/a16/silu/pdl", "t64/tma/wmc/pdl", "t64/tma/silu/wmc/pdl",
      "t80/tma/wmc/pdl", "t80/tma/silu/wmc/pdl", "t144/tma/wmc/pdl", "t144/tma/silu/wmc/pdl"};
  EXPECT_EQ(labels, want);
  // Every default for_batch picks is a candidate.
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (WeightFormat f : kWeightFormats)
    for (int B : {1, 64, 128, 1024, 2048, 4096})
      for (bool sm90a : {false, true})
        EXPECT_NE(std::find(want.begin(), want.end(), ClassicalConfig::for_batch(s, B, f, sm90a).label()), want.end())
            << B;
}

// ClassicalMoe refuses, before its first launch, a configuration supports()
// rejects: so every configuration the library picks by itself (for_batch,
// for_tiled_copies, the dispatch's under either policy) must pass it, on a
// device with and without the sm_90a kernels, on every shape the classical
// path takes and every batch.
TEST(ClassicalConfig, EveryDefaultIsSupported) {
  std::vector<MoeShape> shapes;
  for (const char* p : {"tiny", "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"})
    shapes.push_back(preset_shape(p));
  auto shape = [](int h, int i, int e, int k) {
    MoeShape s = preset_shape("tiny");
    s.hidden = h, s.intermediate = i, s.experts = e, s.top_k = k;
    return s;
  };
  shapes.push_back(shape(160, 96, 20, 6));    // H, I not multiples of 64
  shapes.push_back(shape(256, 192, 16, 4));   // I not a multiple of 128
  shapes.push_back(shape(2880, 2880, 32, 4));
  shapes.push_back(shape(256, 64, 32, 16));
  CrossoverTable table;  // built-in-like: W8A16 from 96
  std::vector<int> batches;
  for (int b = 1; b <= 4096; b = b < 160 ? b + 1 : b * 5 / 4) batches.push_back(b);
  batches.push_back(4096);
  size_t checked = 0;
  for (const MoeShape& s : shapes)
    for (WeightFormat f : kWeightFormats) {
      if (!classical_takes_shape(s, f)) continue;
      for (bool sm90a : {false, true})
        for (int B : batches) {
          const std::string where = "H=" + std::to_string(s.hidden) + " I=" + std::to_string(s.intermediate) +
                                    " E=" + std::to_string(s.experts) + " K=" + std::to_string(s.top_k) + " " +
                                    to_string(f) + " B=" + std::to_string(B) +
                                    (sm90a ? " sm90a" : " no sm90a");
          const ClassicalConfig c = ClassicalConfig::for_batch(s, B, f, sm90a);
          EXPECT_TRUE(c.supports(s, f, sm90a)) << where << " for_batch " << c.label();
          for (DispatchPolicy p : {DispatchPolicy::kFastest, DispatchPolicy::kBf16Activations}) {
            if (p == DispatchPolicy::kBf16Activations && f == WeightFormat::kMXFP8 && !w8a16_runs(s, f, B, sm90a))
              continue;  // the dispatch runs warp decode there
            const ClassicalConfig d = dispatch_classical_config(table, s, f, B, p, sm90a);
            EXPECT_TRUE(d.supports(s, f, sm90a)) << where << " dispatch " << to_string(p) << " " << d.label();
          }
          // Tiled-only weights reach the classical path as they are where it
          // reads them.
          if (classical_reads_tiled_only(s, f, sm90a)) {
            const ClassicalConfig t = ClassicalConfig::for_tiled_copies(s, B, sm90a, f);
            EXPECT_TRUE(t.supports(s, f, sm90a)) << where << " for_tiled_copies " << t.label();
          }
          ++checked;
        }
    }
  EXPECT_GT(checked, 2000u);
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
  EXPECT_STREQ(to_string(ClassicalGemm::kTma), "tma");
  EXPECT_EQ((ClassicalConfig{128, ClassicalGemm::kTma, true}).label(), "t128/tma/pdl");
  EXPECT_EQ((ClassicalConfig{8, ClassicalGemm::kTma, true, true, true}).label(), "t8/tma/a16/silu/pdl");
  EXPECT_EQ((ClassicalConfig{64, ClassicalGemm::kTma, false, false, true}).label(), "t64/tma/a16");
}

// The BF16 TMA GEMM gathers its token rows from x up to T = 128 (stage 4
// does nothing); T = 144 (either kind of cluster), W8A8, W8A16 and every
// other kernel keep the permute stage.
TEST(ClassicalConfig, Bf16TmaGemmGathersTheTokenRowsUpToT128) {
  for (int t : {8, 16, 32, 64, 128}) {
    EXPECT_TRUE((ClassicalConfig{t, ClassicalGemm::kTma, true}).gathers_rows(WeightFormat::kBF16)) << t;
    EXPECT_TRUE((ClassicalConfig{t, ClassicalGemm::kTma, false, true}).gathers_rows(WeightFormat::kBF16)) << t;
    EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true}).gathers_rows(WeightFormat::kFP8Block128)) << t;
    EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true}).gathers_rows(WeightFormat::kMXFP8)) << t;
    EXPECT_FALSE((ClassicalConfig{t, ClassicalGemm::kTma, true, true, true}).gathers_rows(WeightFormat::kMXFP8)) << t;
  }
  EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kTma, true, true}).gathers_rows(WeightFormat::kBF16));
  for (bool silu : {false, true})
    EXPECT_FALSE((ClassicalConfig{144, ClassicalGemm::kTma, true, silu, false, true}).gathers_rows(WeightFormat::kBF16))
        << silu;
  for (ClassicalGemm g : {ClassicalGemm::kMmaSync, ClassicalGemm::kWgmma, ClassicalGemm::kStream})
    EXPECT_FALSE((ClassicalConfig{64, g, true}).gathers_rows(WeightFormat::kBF16)) << to_string(g);
  EXPECT_FALSE((ClassicalConfig{8, ClassicalGemm::kStreamWgmma, true}).gathers_rows(WeightFormat::kFP8Block128));
}

// The stream kernels' K split (kernels/k_split.h) against the rules the two
// launchers wrote out before they shared it, over decode-sized grids.
TEST(ClassicalConfig, StreamKSplitKeepsEachLaunchersRule) {
  auto stream_rule = [](int rounds, int max_warps, long tiles, long resident) {  // classical_stream_gemm.cu
    int per_warp = (rounds + 3) / 4;
    int slices = (rounds + per_warp - 1) / per_warp;
    if (tiles * slices < resident) {
      long best = -1;
      for (int sl = slices; sl <= std::min(max_warps, rounds); ++sl) {
        const long waves = (tiles * sl + resident - 1) / resident;
        const long cost = waves * ((rounds + sl - 1) / sl);
        if (best < 0 || cost < best) best = cost, slices = sl;
      }
    }
    return slices;
  };
  auto wgmma_rule = [](int groups, int max_wgs, long tiles, long resident) {  // classical_stream_wgmma.cu
    const int rounds = (groups + 1) / 2;
    int per = (rounds + 1) / 2;
    int wgs = (rounds + per - 1) / per;
    if (tiles * wgs * 4 < resident) {
      long best = -1;
      for (int s = wgs; s <= std::min(max_wgs, groups); ++s) {
        const long waves = (tiles * s * 4 + resident - 1) / resident;
        const long cost = waves * (((groups + s - 1) / s + 1) / 2);
        if (best < 0 || cost < best) best = cost, wgs = s;
      }
    }
    return wgs;
  };
  int split = 0;
  for (int units = 1; units <= 96; ++units)
    for (long tiles : {1L, 2L, 8L, 24L, 48L, 96L, 384L, 3000L})
      for (long resident : {132L * 8, 132L * 12, 132L * 16, 132L * 48}) {
        for (int max_warps : {4, 8}) {
          const int got = kernels::choose_k_slices(units, 1, 4, max_warps, tiles, 1, resident);
          ASSERT_EQ(got, stream_rule(units, max_warps, tiles, resident)) << units << " " << tiles << " " << resident;
          split += got > std::min(4, units);
        }
        ASSERT_EQ(kernels::choose_k_slices(units, 2, 2, 4, tiles, 4, resident), wgmma_rule(units, 4, tiles, resident))
            << units << " " << tiles << " " << resident;
      }
  EXPECT_GT(split, 0);  // the under-filled grids do split further
  // Worked cases. 32 rounds: the base is 4 slices of 8; 384 tiles × 4 = 1536 warps of 1584 resident, and no
  // finer split beats one wave × 8 rounds.
  EXPECT_EQ(kernels::choose_k_slices(32, 1, 4, 8, 384, 1, 1584), 4);
  // 6 rounds: the base is 3 slices of 2 (not 4 of 2, 1, ...).
  EXPECT_EQ(kernels::choose_k_slices(6, 1, 4, 8, 3000, 1, 1584), 3);
  // 8 tiles of 32 rounds on an idle device: 8 slices of 4 rounds, one wave.
  EXPECT_EQ(kernels::choose_k_slices(32, 1, 4, 8, 8, 1, 1584), 8);
}

// W8A16's narrower wgmma issue (tma_a16_issue_rows): only T = 144, only down
// to 128 rows, and never fewer rows than are in use.
TEST(ClassicalConfig, W8A16IssuesFewerRowsOnlyWhereTheyFit) {
  EXPECT_EQ(kernels::tma_a16_issue_rows(144, 1), 128);
  EXPECT_EQ(kernels::tma_a16_issue_rows(144, 128), 128);
  EXPECT_EQ(kernels::tma_a16_issue_rows(144, 129), 144);
  EXPECT_EQ(kernels::tma_a16_issue_rows(144, 144), 144);
  for (int t : {8, 16, 32, 64, 80, 128})
    for (int used : {0, 1, t / 2, t}) EXPECT_EQ(kernels::tma_a16_issue_rows(t, used), t) << t << " " << used;
  for (int used = 0; used <= 144; ++used) EXPECT_GE(kernels::tma_a16_issue_rows(144, used), used);
}

}  // namespace
}  // namespace wd
