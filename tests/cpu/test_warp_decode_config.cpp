// The kernel-family rules of warp decode (host logic; no GPU needed):
// which family a layer object runs, and that a family's per-batch
// configurations never leave it (what batch invariance across B rests on).
#include <gtest/gtest.h>

#include "test_support.h"
#include "warpdecode/error.h"
#include "warpdecode/layout.h"

#if defined(WD_HAVE_CUDA)
#include "kernels/moe_tc.cuh"
#include "warpdecode/warp_decode.h"

namespace wd {
namespace {

using wd::test::make_shape;

const WeightFormat kFormats[] = {WeightFormat::kBF16, WeightFormat::kMXFP8};

TEST(WarpDecodeConfig, TensorCoresFitEveryQwen3Shape) {
  for (const char* p : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b", "tiny"})
    EXPECT_TRUE(WarpDecodeConfig::tensor_cores_fit(preset_shape(p))) << p;
  EXPECT_FALSE(WarpDecodeConfig::tensor_cores_fit(make_shape(160, 96, 20, 6)));   // H % 256
  EXPECT_FALSE(WarpDecodeConfig::tensor_cores_fit(make_shape(256, 96, 20, 6)));   // I % 64
  // I/64 = 13 units: one K range of 13 (slow, one warp per block, but valid).
  EXPECT_TRUE(WarpDecodeConfig::tensor_cores_fit(make_shape(256, 64 * 13, 20, 6)));
}

// moe_down_tc's K ranges (warps a block, kernels/moe_tc.cuh): the most, at
// most 12, whose grid (H/16 blocks) fits one wave of 132 × 12 warps; else
// the most at most 12. A rule of the shape alone: the bits do not depend on
// the card.
TEST(WarpDecodeConfig, DownKernelGridFitsOneWaveOfWarps) {
  using wd::kernels::down_tc_slices;
  EXPECT_EQ(down_tc_slices(2048, 768), 12);    // qwen3-30b-a3b: 128 blocks of 12 units of 1
  EXPECT_EQ(down_tc_slices(4096, 1536), 6);    // qwen3-235b-a22b: 256 × 6 of 4, not 12 of 2
  EXPECT_EQ(down_tc_slices(6144, 2560), 4);    // qwen3-coder-480b-a35b: 384 × 4 of 10, not 10 of 4
  EXPECT_EQ(down_tc_slices(512, 896), 7);      // few blocks: the most ranges (7 of 2)
  EXPECT_EQ(down_tc_slices(40960, 768), 12);   // 2560 blocks: no count fits one wave, the most
  EXPECT_EQ(down_tc_slices(256, 64 * 13), 1);  // 13 units: one range of 13
  EXPECT_EQ(down_tc_slices(256, 7040), 11);    // 110 units: 11 of 10 (the GPU tests' ten-unit shape)
  EXPECT_EQ(down_tc_slices(256, 96), 0);       // I % 64 != 0
  EXPECT_EQ(down_tc_slices(0, 768), 0);
}

TEST(WarpDecodeConfig, DefaultFamilyIsTheTensorCoresWhereTheShapeFits) {
  for (const char* preset : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"}) {
    const MoeShape s = preset_shape(preset);
    for (WeightFormat f : kFormats)
      for (int mb : {1, 8, 15, 16, 64, 4096})
        EXPECT_EQ(WarpDecodeConfig::default_family(s, f, mb), KernelFamily::kTensorCores) << preset << " " << mb;
  }
  for (WeightFormat f : kFormats)
    EXPECT_EQ(WarpDecodeConfig::default_family(make_shape(160, 96, 20, 6), f, 64), KernelFamily::kScalar);
}

TEST(WarpDecodeConfig, ForBatchNeverLeavesItsFamily) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (WeightFormat f : kFormats)
    for (int B = 1; B <= 256; ++B) {
      const auto tc = WarpDecodeConfig::for_batch(s, B, f, KernelFamily::kTensorCores);
      const auto sc = WarpDecodeConfig::for_batch(s, B, f, KernelFamily::kScalar);
      EXPECT_TRUE(tc.tensor_cores) << B;
      EXPECT_FALSE(sc.tensor_cores) << B;
      EXPECT_EQ(tc.label().rfind("tc", 0), 0u) << tc.label();
      EXPECT_EQ(sc.label().rfind("gu", 0), 0u) << sc.label();
      // kAuto resolves as an object whose max_batch is this batch would.
      const auto au = WarpDecodeConfig::for_batch(s, B, f);
      EXPECT_EQ(au.tensor_cores, WarpDecodeConfig::default_family(s, f, B) == KernelFamily::kTensorCores) << B;
    }
}

// Deep gate_up rounds: MXFP8 only (BF16 rounds are two chunks already). On
// the canonical rows at every B on H >= 4096 and at B = 2-16 on H = 2048; on
// the tiled gate_up copy only at B = 1 on H >= 4096 (docs/PERF_LOG.md v14).
TEST(WarpDecodeConfig, TensorCoreDeepLoadsForMxfp8ByShapeBatchAndGateUpCopy) {
  const MoeShape small = preset_shape("qwen3-30b-a3b"), large = preset_shape("qwen3-235b-a22b");
  const auto tc = [](const MoeShape& s, int B, WeightFormat f, bool tiled_gate_up) {
    return WarpDecodeConfig::for_batch(s, B, f, KernelFamily::kTensorCores, tiled_gate_up);
  };
  for (int B : {1, 2, 8, 16, 17, 32, 64, 256})
    for (bool tgu : {false, true}) {
      for (const MoeShape& s : {small, large}) EXPECT_FALSE(tc(s, B, WeightFormat::kBF16, tgu).tc_deep_loads);
      EXPECT_EQ(tc(small, B, WeightFormat::kMXFP8, tgu).tc_deep_loads, !tgu && B >= 2 && B <= 16) << B << tgu;
      EXPECT_EQ(tc(large, B, WeightFormat::kMXFP8, tgu).tc_deep_loads, !tgu || B == 1) << B << tgu;
    }
  // H = 768 fits the tensor cores but not the deep kernel (H % 512 != 0).
  const MoeShape odd = make_shape(768, 192, 20, 6);
  ASSERT_TRUE(WarpDecodeConfig::tensor_cores_fit(odd));
  EXPECT_FALSE(WarpDecodeConfig::tc_deep_loads_apply(odd, WeightFormat::kMXFP8));
  EXPECT_TRUE(WarpDecodeConfig::tc_deep_loads_apply(small, WeightFormat::kMXFP8));
  EXPECT_FALSE(WarpDecodeConfig::tc_deep_loads_apply(small, WeightFormat::kBF16));
  EXPECT_FALSE(tc(odd, 2, WeightFormat::kMXFP8, false).tc_deep_loads);
  EXPECT_EQ(tc(small, 2, WeightFormat::kMXFP8, false).label(), "tc/deep/ef/pdl/tiled");
  EXPECT_EQ(tc(small, 2, WeightFormat::kMXFP8, true).label(), "tc/ef/pdl/tiled/tgu");
  EXPECT_EQ(tc(large, 1, WeightFormat::kMXFP8, true).label(), "tc/deep/ef/pdl/tiled/tgu");
  // down's paired walk shows in the label.
  WarpDecodeConfig paired = tc(small, 32, WeightFormat::kMXFP8, true);
  paired.tc_down_pairs = true;
  EXPECT_EQ(paired.label(), "tc/ef/pdl/tiled/tgu/pairs");
}

// down's paired walk (PERF_LOG sessions 58, 62): by default MXFP8 on the tiled
// down copy, one unit of I a warp (qwen3-30b-a3b), B = 16-64; nowhere else
// (the kernel also takes four and ten units, which were not measured
// faster).
TEST(WarpDecodeConfig, DownPairsWhereMeasured) {
  const MoeShape s30 = preset_shape("qwen3-30b-a3b"), s235 = preset_shape("qwen3-235b-a22b");
  auto pairs = [](const MoeShape& s, int B, WeightFormat f, KernelFamily fam = KernelFamily::kTensorCores) {
    return WarpDecodeConfig::for_batch(s, B, f, fam).tc_down_pairs;
  };
  for (int B : {1, 8, 15, 65, 96, 256}) EXPECT_FALSE(pairs(s30, B, WeightFormat::kMXFP8)) << B;
  for (int B : {16, 17, 32, 48, 49, 64}) {
    EXPECT_TRUE(pairs(s30, B, WeightFormat::kMXFP8)) << B;
    EXPECT_EQ(WarpDecodeConfig::for_batch(s30, B, WeightFormat::kMXFP8, KernelFamily::kTensorCores).label(),
              B == 16 ? "tc/deep/ef/pdl/tiled/pairs" : "tc/ef/pdl/tiled/pairs");  // deep gate_up rounds to 16
    EXPECT_FALSE(pairs(s30, B, WeightFormat::kBF16)) << B;
    EXPECT_FALSE(pairs(s30, B, WeightFormat::kMXFP8, KernelFamily::kScalar)) << B;
    EXPECT_FALSE(pairs(s235, B, WeightFormat::kMXFP8)) << B;  // four units a warp
  }
  EXPECT_TRUE(wd::kernels::down_tc_pairs_fit(2048, 768));
  EXPECT_TRUE(wd::kernels::down_tc_pairs_fit(4096, 1536));  // four units: the kernel takes it
  EXPECT_TRUE(wd::kernels::down_tc_pairs_fit(6144, 2560));  // ten units
  EXPECT_FALSE(wd::kernels::down_tc_pairs_fit(512, 896));   // two units: the runtime count's walk
  EXPECT_FALSE(wd::kernels::down_tc_pairs_fit(256, 96));    // no tensor-core shape
}

// gate_up's two-tile passes (PERF_LOG sessions 49, 68, 72, 74, 75): from 4.5
// routing entries an expert (2·B·K >= 9E) but for BF16 on the H100, from 3
// (6E), and MXFP8 on the H200, from 6 (12E) where H >= 4096 and from 8 (16E)
// on H = 2048; only on the tiled gate_up copy with shallow rounds (the kernel
// has no two-tile form elsewhere), never in the scalar family.
TEST(WarpDecodeConfig, GateUpTwoTilesFromTheStartMeasuredPerFormatCardAndShape) {
  using F = WeightFormat;
  const MoeShape s30 = preset_shape("qwen3-30b-a3b"), s235 = preset_shape("qwen3-235b-a22b"),
                 s480 = preset_shape("qwen3-coder-480b-a35b");  // 128, 128 and 160 experts, top-8
  for (const MoeShape* s : {&s30, &s235, &s480}) {
    EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(*s, F::kBF16, TableCard::kH200), 9);
    EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(*s, F::kBF16, TableCard::kH100), 6);
    EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(*s, F::kMXFP8, TableCard::kH100), 9);
  }
  EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(s30, F::kMXFP8, TableCard::kH200), 16);
  EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(s235, F::kMXFP8, TableCard::kH200), 12);
  EXPECT_EQ(WarpDecodeConfig::gate_up_two_tiles_from_x2(s480, F::kMXFP8, TableCard::kH200), 12);
  const auto two = [](const MoeShape& s, int B, F f, TableCard card, bool tiled_gate_up = true,
                      KernelFamily fam = KernelFamily::kTensorCores) {
    return WarpDecodeConfig::for_batch(s, B, f, fam, tiled_gate_up, card).tc_gate_up_two_tiles;
  };
  // (shape, format, card, the first B with two-tile passes)
  struct Case {
    const MoeShape* s;
    F f;
    TableCard card;
    int from;
  };
  const Case cases[] = {{&s30, F::kBF16, TableCard::kH200, 72},   {&s30, F::kBF16, TableCard::kH100, 48},
                        {&s30, F::kMXFP8, TableCard::kH200, 128}, {&s30, F::kMXFP8, TableCard::kH100, 72},
                        {&s235, F::kMXFP8, TableCard::kH200, 96}, {&s235, F::kMXFP8, TableCard::kH100, 72},
                        {&s235, F::kBF16, TableCard::kH100, 48},  {&s480, F::kBF16, TableCard::kH100, 60},
                        {&s480, F::kBF16, TableCard::kH200, 90},  {&s480, F::kMXFP8, TableCard::kH200, 120},
                        {&s480, F::kMXFP8, TableCard::kH100, 90}};
  for (const Case& c : cases) {
    const std::string what = std::string(to_string(c.f)) + " E=" + std::to_string(c.s->experts) + " " + to_string(c.card);
    for (int B : {1, 8, 32, c.from - 1}) EXPECT_FALSE(two(*c.s, B, c.f, c.card)) << what << " B=" << B;
    for (int B : {c.from, c.from + 1, 128, 256}) {
      EXPECT_TRUE(two(*c.s, B, c.f, c.card)) << what << " B=" << B;
      EXPECT_FALSE(two(*c.s, B, c.f, c.card, false)) << what << " B=" << B;  // canonical gate_up rows
      EXPECT_FALSE(two(*c.s, B, c.f, c.card, true, KernelFamily::kScalar)) << what << " B=" << B;
    }
  }
  // The default card is the H200's.
  EXPECT_FALSE(WarpDecodeConfig::for_batch(s30, 120, F::kMXFP8, KernelFamily::kTensorCores, true).tc_gate_up_two_tiles);
  EXPECT_EQ(WarpDecodeConfig::for_batch(s235, 96, F::kMXFP8, KernelFamily::kTensorCores, true).label(),
            "tc/ef/pdl/tiled/tgu/2t");
  EXPECT_EQ(WarpDecodeConfig::for_batch(s30, 64, F::kBF16, KernelFamily::kTensorCores, true, TableCard::kH100).label(),
            "tc/ef/pdl/tiled/tgu/2t");
  EXPECT_EQ(WarpDecodeConfig::for_batch(s30, 64, F::kBF16, KernelFamily::kTensorCores, true).label(),
            "tc/ef/pdl/tiled/tgu");
}

// The tiled down weights (docs/PERF_LOG.md v12): the tensor cores' MXFP8
// default at every B (where the weights keep them); the tiled gate_up copy
// where the weights hold it (v13); BF16 both where the weights hold them
// (tiled-only, v14). The scalar kernels never.
TEST(WarpDecodeConfig, TiledDownForTensorCoreMxfp8Only) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (int B : {1, 8, 32, 64, 256}) {
    EXPECT_TRUE(WarpDecodeConfig::for_batch(s, B, WeightFormat::kMXFP8, KernelFamily::kTensorCores).tc_tiled_down);
    EXPECT_FALSE(WarpDecodeConfig::for_batch(s, B, WeightFormat::kBF16, KernelFamily::kTensorCores).tc_tiled_down);
    EXPECT_FALSE(WarpDecodeConfig::for_batch(s, B, WeightFormat::kMXFP8, KernelFamily::kScalar).tc_tiled_down);
    EXPECT_FALSE(WarpDecodeConfig::for_batch(s, B, WeightFormat::kMXFP8, KernelFamily::kTensorCores).tc_tiled_gate_up);
    EXPECT_TRUE(
        WarpDecodeConfig::for_batch(s, B, WeightFormat::kMXFP8, KernelFamily::kTensorCores, true).tc_tiled_gate_up);
    // BF16 weights hold tiled copies only as a pair (tiled-only): both read.
    const auto bf = WarpDecodeConfig::for_batch(s, B, WeightFormat::kBF16, KernelFamily::kTensorCores, true);
    EXPECT_TRUE(bf.tc_tiled_gate_up && bf.tc_tiled_down);
    EXPECT_FALSE(WarpDecodeConfig::for_batch(s, B, WeightFormat::kMXFP8, KernelFamily::kScalar, true).tc_tiled_gate_up);
  }
  EXPECT_EQ(WarpDecodeConfig::for_batch(s, 8, WeightFormat::kBF16, KernelFamily::kTensorCores).label(),
            "tc/ef/pdl");
}

// gate_up on the tiled copy shows in the label.
TEST(WarpDecodeConfig, TiledGateUpLabel) {
  WarpDecodeConfig c;
  c.tensor_cores = true;
  c.tc_tiled_down = true;
  c.tc_tiled_gate_up = true;
  EXPECT_EQ(c.label(), "tc/tiled/tgu");
}

TEST(WarpDecodeConfig, KernelFamiliesHaveNames) {
  EXPECT_STREQ(to_string(KernelFamily::kAuto), "auto");
  EXPECT_STREQ(to_string(KernelFamily::kScalar), "scalar");
  EXPECT_STREQ(to_string(KernelFamily::kTensorCores), "tensor-cores");
}

// The constructor refuses before it allocates anything, so this runs without a GPU.
TEST(WarpDecodeConfig, ObjectsRefuseTensorCoresOnShapesTheyCannotTake) {
  EXPECT_THROW(WarpDecodeMoe(make_shape(160, 96, 20, 6), 4, KernelFamily::kTensorCores), InvalidArgument);
}

}  // namespace
}  // namespace wd
#endif  // WD_HAVE_CUDA
