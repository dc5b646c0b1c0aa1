// The tiled layout of MXFP8 gate_up weights (warpdecode/gate_up_tiling.h): a
// permutation of the canonical bytes, with the positions moe_gate_up_tc's
// lanes read. Checked against the layout's definition, written out here afresh.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "warpdecode/error.h"
#include "warpdecode/packed_e4m3.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/weights.h"

#include "test_support.h"

namespace wd {
namespace {

MoeShape shape(int H, int I, int E) { return test::make_shape(H, I, E, 2); }

TEST(GateUpTiling, OffsetsAreAPermutationOfTheCanonicalBytes) {
  const size_t E = 3, H = 128, I = 32;
  std::set<size_t> codes, scales;
  for (size_t e = 0; e < E; ++e)
    for (size_t r = 0; r < 2 * I; ++r) {
      for (size_t k = 0; k < H; ++k) codes.insert(gate_up_tiled_offset(e, r, k, H, I));
      for (size_t j = 0; j < H / kMxBlock; ++j) scales.insert(gate_up_tiled_scale_offset(e, r, j, H, I));
    }
  EXPECT_EQ(codes.size(), E * 2 * I * H);
  EXPECT_EQ(*codes.rbegin(), E * 2 * I * H - 1);
  EXPECT_EQ(scales.size(), E * 2 * I * H / kMxBlock);
  EXPECT_EQ(*scales.rbegin(), E * 2 * I * H / kMxBlock - 1);
}

// Where lane 4g + q of the warp reading chunk c (elements 64c .. 64c + 63) of
// 16-neuron tile t finds its bytes: kernel row r (gate g, gate g+8, up g,
// up g+8 for r = 0..3) at 512r + 16·lane of item (e, t, c); its scale at
// 16r + 2g + q/2 of the item's 64.
TEST(GateUpTiling, LaneReadsItsFragmentRows) {
  const MoeShape s = shape(192, 48, 2);
  const size_t E = 2, H = 192, I = 48, T = I / 16, C = H / 64;
  std::vector<uint8_t> q(E * 2 * I * H), sc(q.size() / 32), qt(q.size()), st(sc.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint8_t(i * 7 + i / 251);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = uint8_t(100 + i % 53);
  tile_mxfp8_gate_up(s, q.data(), sc.data(), qt.data(), st.data());
  // The codes are packed a word at a time (warpdecode/packed_e4m3.h): read them unpacked.
  std::vector<uint8_t> qu(qt.size());
  unpack_e4m3_words(qt.data(), qt.size(), qu.data());
  EXPECT_NE(qu, qt);
  for (size_t e = 0; e < E; ++e)
    for (size_t t = 0; t < T; ++t)
      for (size_t c = 0; c < C; ++c) {
        const size_t item = (e * T + t) * C + c;
        for (int lane = 0; lane < 32; ++lane) {
          const size_t g = lane / 4, qq = lane % 4;
          for (int r = 0; r < 4; ++r) {
            const size_t row = e * 2 * I + (r / 2) * I + 16 * t + 8 * (r % 2) + g;
            for (size_t b = 0; b < 16; ++b)
              ASSERT_EQ(qu[item * 2048 + 512 * r + 16 * lane + b], q[row * H + 64 * c + 16 * qq + b])
                  << e << " " << t << " " << c << " " << lane << " " << r;
            ASSERT_EQ(st[item * 64 + 16 * r + 2 * g + qq / 2], sc[row * (H / 32) + 2 * c + qq / 2]);
          }
        }
      }
}

TEST(GateUpTiling, RefusesShapesItCannotTile) {
  EXPECT_TRUE(gate_up_tiling_fits(shape(2048, 768, 128)));
  EXPECT_FALSE(gate_up_tiling_fits(shape(96, 32, 2)));   // H % 64
  EXPECT_FALSE(gate_up_tiling_fits(shape(128, 40, 2)));  // I % 16
  std::vector<uint8_t> b(96 * 64 * 2);
  EXPECT_THROW(tile_mxfp8_gate_up(shape(96, 32, 2), b.data(), b.data(), b.data(), b.data()), InvalidArgument);
  // A shape it takes, a pointer null.
  std::vector<uint8_t> q(size_t(2) * 32 * 64 * 2);
  EXPECT_THROW(tile_mxfp8_gate_up(shape(64, 16, 2), q.data(), nullptr, q.data(), q.data()), InvalidArgument);
  EXPECT_THROW(untile_mxfp8_gate_up(shape(64, 16, 2), q.data(), q.data(), nullptr, q.data()), InvalidArgument);
  std::vector<uint16_t> w(size_t(2) * 32 * 64 * 2);
  EXPECT_THROW(tile_bf16_gate_up(shape(64, 16, 2), nullptr, w.data()), InvalidArgument);
}

// A view's tiled gate_up weights: MXFP8 (weights and scales together) or BF16
// (no scales), on a shape the layout takes.
TEST(GateUpTiling, ViewsCheckTheirTiledTensors) {
  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).to_mxfp8();
  std::vector<uint8_t> qt(w.gate_up_q.size()), st(w.gate_up_scales.size());
  tile_mxfp8_gate_up(w.shape(), w.gate_up_q.data(), w.gate_up_scales.data(), qt.data(), st.data());
  MoeWeightsView v = w.view();
  v.gate_up_tiled = qt.data();
  v.gate_up_tiled_scales = st.data();
  EXPECT_NO_THROW(v.validate());
  MoeWeightsView half = v;
  half.gate_up_tiled = nullptr;
  EXPECT_THROW(half.validate(), InvalidArgument);
  MoeWeightsView bf = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).view();
  bf.gate_up_tiled = qt.data();
  bf.gate_up_tiled_scales = st.data();
  EXPECT_THROW(bf.validate(), InvalidArgument);  // BF16 tiled weights have no scales
  bf.gate_up_tiled_scales = nullptr;
  EXPECT_NO_THROW(bf.validate());
  MoeWeightsView odd = v;
  odd.shape.hidden = 96;  // a valid shape (H % 32 == 0) the tiled layout does not take (H % 64 != 0)
  EXPECT_NO_THROW(odd.shape.validate());
  try {
    odd.validate();
    ADD_FAILURE() << "a tiled gate_up at H = 96 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("H % 64 == 0"), std::string::npos) << e.what();
  }
}

// BF16: the same layout over the rows' bytes (a row of H elements is 2H
// bytes): element (e, r, k) is the 16-bit word at byte
// gate_up_tiled_offset(e, r, 2k, 2H, I).
TEST(GateUpTiling, Bf16IsTheByteLayoutOfTheRows) {
  const MoeShape s = shape(128, 32, 3);
  const size_t H = 128, I = 32, E = 3;
  std::vector<uint16_t> w(E * 2 * I * H), wt(w.size(), 0xFFFF);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint16_t(i * 2654435761u >> 7);
  tile_bf16_gate_up(s, w.data(), wt.data());
  std::set<size_t> seen;
  for (size_t e = 0; e < E; ++e)
    for (size_t r = 0; r < 2 * I; ++r)
      for (size_t k = 0; k < H; ++k) {
        const size_t b = gate_up_tiled_offset(e, r, 2 * k, 2 * H, I);
        ASSERT_EQ(b % 2, 0u);
        ASSERT_EQ(wt[b / 2], w[(e * 2 * I + r) * H + k]) << e << " " << r << " " << k;
        seen.insert(b);
      }
  EXPECT_EQ(seen.size(), w.size());
  EXPECT_THROW(tile_bf16_gate_up(shape(96, 32, 2), w.data(), wt.data()), InvalidArgument);  // H % 64
}

}  // namespace
}  // namespace wd
