// The TMA map geometry over the tiled BF16 copies (core/tiled_box_map.h):
// a box read through it, in TMA's dense box order (innermost dimension
// fastest, before any swizzle), must hold the canonical box's elements as
// two K halves: rows row .. row + R - 1, each row's 32 elements from k, then
// the same rows' 32 elements from k + 32. The device's part (strides that do
// not ascend, the 64-byte swizzle) is bench/tma_tiled_probe's.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "core/tiled_box_map.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"

#include "test_support.h"

namespace wd {
namespace {

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = uint16_t(rng());
  return v;
}

// What a tiled TMA load of box c lands, in dense box order, from a tensor of
// 2-byte elements (TMA's addressing: element offset along dimension 0,
// byte strides along the others). Fails the test for a box past the map's
// dimensions (TMA would fill it with zeros).
std::vector<uint16_t> tma_box(const std::vector<uint16_t>& t, const TiledBoxMap& m, const int (&c)[5]) {
  size_t total = 1;
  for (int d = 0; d < m.rank; ++d) total *= m.box[d];
  std::vector<uint16_t> out(total);
  for (size_t i = 0; i < total; ++i) {
    size_t rem = i;
    uint64_t bytes = 0;
    for (int d = 0; d < m.rank; ++d) {
      const uint64_t at = uint64_t(c[d]) + rem % m.box[d];
      rem /= m.box[d];
      EXPECT_LT(at, m.dims[d]) << "dimension " << d;
      bytes += d == 0 ? 2 * at : at * m.strides[d - 1];
    }
    out[i] = t.at(bytes / 2);
  }
  return out;
}

// K offsets to try: the first two boxes, one in the middle, the last.
std::vector<int> k_offsets(int K) { return {0, kTiledBoxElems, K / 2 / kTiledBoxElems * kTiledBoxElems, K - kTiledBoxElems}; }

// The canonical box as two K halves: rows row .. row + R - 1 of a (rows, K)
// row-major tensor, 32 elements from k each, then 32 from k + 32 each.
std::vector<uint16_t> canonical_box(const std::vector<uint16_t>& w, size_t K, int row, int R, int k) {
  std::vector<uint16_t> out;
  for (int half = 0; half < 2; ++half)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < kTiledBoxElems / 2; ++j) out.push_back(w.at((size_t(row) + r) * K + k + 32 * half + j));
  return out;
}

TEST(TiledBoxMap, DownBoxesAreTheCanonicalBoxes) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{2048, 768, 2}, std::tuple{160, 192, 3}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto w = random_bf16(size_t(E) * H * I, seed);
    std::vector<uint16_t> t(w.size());
    tile_bf16_down(s, w.data(), t.data());
    for (int R : {16, 64, 128}) {
      const TiledBoxMap m = down_tiled_box_map(E, H, I, R);
      for (int k : k_offsets(I))
        for (int row = 0; row + R <= E * H; row += 48) {  // every expert, boxes across experts too
          ASSERT_TRUE(tiled_box_fits(row, R, 0));
          int c[5];
          down_tiled_box_coords(k, row, c);
          ASSERT_EQ(tma_box(t, m, c), canonical_box(w, I, row, R, k))
              << "H " << H << ", I " << I << ", R " << R << ", k " << k << ", row " << row;
        }
    }
  }
}

TEST(TiledBoxMap, GateUpBoxesAreTheCanonicalBoxes) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{2048, 768, 2}, std::tuple{128, 96, 3}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto w = random_bf16(size_t(E) * 2 * I * H, seed);
    std::vector<uint16_t> t(w.size());
    tile_bf16_gate_up(s, w.data(), t.data());
    for (int R : {16, 32, 64}) {
      const TiledBoxMap m = gate_up_tiled_box_map(E, H, I, R);
      int boxes = 0;
      for (int k : k_offsets(H))
        for (int row = 0; row + R <= E * 2 * I; row += 16) {
          if (!tiled_box_fits(row, R, I)) continue;
          int c[5];
          gate_up_tiled_box_coords(k, row, I, c);
          ASSERT_EQ(tma_box(t, m, c), canonical_box(w, H, row, R, k))
              << "H " << H << ", I " << I << ", R " << R << ", k " << k << ", row " << row;
          boxes++;
        }
      EXPECT_GT(boxes, 0);
    }
  }
}

// A box across a gate/up boundary does not map (the tiled copy keeps each
// tile's gate and up rows together), and tiled_box_fits says so: read anyway,
// it is not the canonical box.
TEST(TiledBoxMap, GateUpBoxesStayInOneHalf) {
  const int H = 128, I = 96, E = 2, R = 32;
  const MoeShape s = test::make_shape(H, I, E, 2);
  const auto w = random_bf16(size_t(E) * 2 * I * H, std::random_device{}());
  std::vector<uint16_t> t(w.size());
  tile_bf16_gate_up(s, w.data(), t.data());
  EXPECT_FALSE(tiled_box_fits(I - 16, R, I));          // gate rows into up rows
  EXPECT_FALSE(tiled_box_fits(2 * I - 16, R, I));      // up rows into the next expert's gate rows
  EXPECT_FALSE(tiled_box_fits(8, 16, I));              // not 16-row aligned
  EXPECT_TRUE(tiled_box_fits(I, R, I));
  const TiledBoxMap m = gate_up_tiled_box_map(E, H, I, R);
  int c[5];
  gate_up_tiled_box_coords(0, I - 16, I, c);
  EXPECT_NE(tma_box(t, m, c), canonical_box(w, H, I - 16, R, 0));
}

}  // namespace
}  // namespace wd
