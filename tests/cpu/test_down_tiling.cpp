// The tiled layout of MXFP8 down weights (warpdecode/down_tiling.h): a
// permutation of the canonical bytes, with the positions moe_down_tc's lanes
// read. Checked against the layout's definition, written out here afresh.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
#include "warpdecode/packed_e4m3.h"
#include "warpdecode/weights.h"

#include "test_support.h"

namespace wd {
namespace {

MoeShape shape(int H, int I, int E) { return test::make_shape(H, I, E, 2); }

TEST(DownTiling, OffsetsAreAPermutationOfTheCanonicalBytes) {
  const size_t E = 3, H = 32, I = 128;
  std::set<size_t> codes, scales;
  for (size_t e = 0; e < E; ++e)
    for (size_t r = 0; r < H; ++r) {
      for (size_t k = 0; k < I; ++k) codes.insert(down_tiled_offset(e, r, k, H, I));
      for (size_t j = 0; j < I / kMxBlock; ++j) scales.insert(down_tiled_scale_offset(e, r, j, H, I));
    }
  EXPECT_EQ(codes.size(), E * H * I);
  EXPECT_EQ(*codes.rbegin(), E * H * I - 1);
  EXPECT_EQ(scales.size(), E * H * I / kMxBlock);
  EXPECT_EQ(*scales.rbegin(), E * H * I / kMxBlock - 1);
}

// Where lane 4g + q of the warp that owns unit u of rows [16t, 16t + 16) finds
// its bytes: its first 16 codes (row 16t + g) at 16·lane, its second (row
// 16t + 8 + g) at 512 + 16·lane of item (e, t, u); scales at 2g + q/2 and
// 16 + 2g + q/2 of the item's 32.
TEST(DownTiling, LaneReadsItsFragmentRows) {
  const MoeShape s = shape(48, 192, 2);
  const size_t E = 2, H = 48, I = 192, T = H / 16, U = I / 64;
  std::vector<uint8_t> q(E * H * I), sc(E * H * I / 32), qt(q.size()), st(sc.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint8_t(i * 7 + i / 251);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = uint8_t(100 + i % 53);
  tile_mxfp8_down(s, q.data(), sc.data(), qt.data(), st.data());
  // The codes are packed a word at a time (warpdecode/packed_e4m3.h): read them unpacked.
  std::vector<uint8_t> qu(qt.size());
  unpack_e4m3_words(qt.data(), qt.size(), qu.data());
  EXPECT_NE(qu, qt);
  for (size_t e = 0; e < E; ++e)
    for (size_t t = 0; t < T; ++t)
      for (size_t u = 0; u < U; ++u) {
        const size_t item = (e * T + t) * U + u;
        for (int lane = 0; lane < 32; ++lane) {
          const size_t g = lane / 4, qq = lane % 4;
          for (int h = 0; h < 2; ++h) {
            const size_t row = e * H + 16 * t + 8 * h + g;
            for (size_t c = 0; c < 16; ++c)
              ASSERT_EQ(qu[item * 1024 + 512 * h + 16 * lane + c], q[row * I + 64 * u + 16 * qq + c])
                  << e << " " << t << " " << u << " " << lane;
            ASSERT_EQ(st[item * 32 + 16 * h + 2 * g + qq / 2], sc[row * (I / 32) + 2 * u + qq / 2]);
          }
        }
      }
}

TEST(DownTiling, RefusesShapesItCannotTile) {
  EXPECT_TRUE(down_tiling_fits(shape(2048, 768, 128)));
  EXPECT_FALSE(down_tiling_fits(shape(40, 128, 2)));   // H % 16
  EXPECT_FALSE(down_tiling_fits(shape(32, 96, 2)));    // I % 64
  std::vector<uint8_t> b(40 * 128 * 2);
  EXPECT_THROW(tile_mxfp8_down(shape(40, 128, 2), b.data(), b.data(), b.data(), b.data()), InvalidArgument);
  // A shape it takes, a pointer null: MXFP8 without its scales would
  // otherwise be tiled as bytes, its words not packed.
  EXPECT_THROW(tile_mxfp8_down(shape(32, 128, 2), b.data(), nullptr, b.data(), b.data()), InvalidArgument);
  std::vector<uint16_t> w(size_t(32) * 128 * 2);
  EXPECT_THROW(tile_bf16_down(shape(32, 128, 2), w.data(), nullptr), InvalidArgument);
  EXPECT_THROW(untile_bf16_down(shape(32, 128, 2), nullptr, w.data()), InvalidArgument);
}

// A view's tiled down weights: MXFP8 (weights and scales together) or BF16
// (no scales), on a shape the layout takes.
TEST(DownTiling, ViewsCheckTheirTiledTensors) {
  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).to_mxfp8();
  std::vector<uint8_t> qt(w.down_q.size()), st(w.down_scales.size());
  tile_mxfp8_down(w.shape(), w.down_q.data(), w.down_scales.data(), qt.data(), st.data());
  MoeWeightsView v = w.view();
  v.down_tiled = qt.data();
  v.down_tiled_scales = st.data();
  EXPECT_NO_THROW(v.validate());
  MoeWeightsView half = v;
  half.down_tiled_scales = nullptr;
  EXPECT_THROW(half.validate(), InvalidArgument);
  MoeWeightsView bf = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).view();
  bf.down_tiled = qt.data();
  bf.down_tiled_scales = st.data();
  EXPECT_THROW(bf.validate(), InvalidArgument);  // BF16 tiled weights have no scales
  bf.down_tiled_scales = nullptr;
  EXPECT_NO_THROW(bf.validate());
  MoeWeightsView odd = v;
  odd.shape.intermediate = 96;  // I % 64 != 0
  EXPECT_THROW(odd.validate(), InvalidArgument);
}

// BF16: the same layout over the rows' bytes (a row of I elements is 2I
// bytes); each element's two bytes stay together, so element (e, r, k) is the
// 16-bit word at byte down_tiled_offset(e, r, 2k, H, 2I).
TEST(DownTiling, Bf16IsTheByteLayoutOfTheRows) {
  const MoeShape s = shape(32, 128, 3);
  const size_t H = 32, I = 128, E = 3;
  std::vector<uint16_t> w(E * H * I), wt(w.size(), 0xFFFF);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint16_t(i * 2654435761u >> 7);
  tile_bf16_down(s, w.data(), wt.data());
  std::set<size_t> seen;
  for (size_t e = 0; e < E; ++e)
    for (size_t r = 0; r < H; ++r)
      for (size_t k = 0; k < I; ++k) {
        const size_t b = down_tiled_offset(e, r, 2 * k, H, 2 * I);
        ASSERT_EQ(b % 2, 0u);
        ASSERT_EQ(wt[b / 2], w[(e * H + r) * I + k]) << e << " " << r << " " << k;
        seen.insert(b);
      }
  EXPECT_EQ(seen.size(), w.size());
  // A moe_down_tc unit (64 elements, 128 bytes of each of 16 rows) is two
  // consecutive 1 KB items: its second 64 bytes open the next item.
  EXPECT_EQ(down_tiled_offset(0, 0, 64, H, 2 * I), size_t(kDownTileBytes));
  EXPECT_EQ(down_tiled_offset(0, 0, 128, H, 2 * I), size_t(2 * kDownTileBytes));
  EXPECT_THROW(tile_bf16_down(shape(32, 96, 2), w.data(), wt.data()), InvalidArgument);  // I % 64
}

}  // namespace
}  // namespace wd
