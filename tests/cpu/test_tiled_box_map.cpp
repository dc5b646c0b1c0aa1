// The TMA map geometry over the tiled BF16 copies (core/tiled_box_map.h):
// a box read through it, in TMA's dense box order (innermost dimension
// fastest, before any swizzle), must hold the canonical box's elements as
// two K halves: rows row .. row + R - 1, each row's 32 elements from k, then
// the same rows' 32 elements from k + 32. The device's part (strides that do
// not ascend, the 64-byte swizzle) is bench/tma_tiled_probe's.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/tiled_box_map.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/packed_e4m3.h"

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
// sizeof(T)-byte elements (TMA's addressing: element offset along dimension
// 0, byte strides along the others). Fails the test for a box past the
// map's dimensions (TMA would fill it with zeros).
template <typename T>
std::vector<T> tma_box(const std::vector<T>& t, const TiledBoxMap& m, const int (&c)[5]) {
  size_t total = 1;
  for (int d = 0; d < m.rank; ++d) total *= m.box[d];
  std::vector<T> out(total);
  for (size_t i = 0; i < total; ++i) {
    size_t rem = i;
    uint64_t bytes = 0;
    for (int d = 0; d < m.rank; ++d) {
      const uint64_t at = uint64_t(c[d]) + rem % m.box[d];
      rem /= m.box[d];
      EXPECT_LT(at, m.dims[d]) << "dimension " << d;
      bytes += d == 0 ? sizeof(T) * at : at * m.strides[d - 1];
    }
    out[i] = t.at(bytes / sizeof(T));
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

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng());
  return v;
}

// The MXFP8 box a W8A16 reader of tiled-only weights would load: R rows of
// a (rows, K) code tensor from k, the 64 codes from k then the 64 from k +
// 64 (two halves), each aligned word of four codes packed.
std::vector<uint8_t> packed_halves(const std::vector<uint8_t>& q, size_t K, int row, int R, int k) {
  std::vector<uint8_t> out;
  for (int half = 0; half < 2; ++half)
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < 16; ++w) {
        const size_t at = (size_t(row) + r) * K + k + 64 * half + 4 * w;
        const uint32_t word = uint32_t(q.at(at)) | uint32_t(q.at(at + 1)) << 8 | uint32_t(q.at(at + 2)) << 16 |
                              uint32_t(q.at(at + 3)) << 24;
        const uint32_t p = pack_e4m3x4(word);
        for (int b = 0; b < 4; ++b) out.push_back(uint8_t(p >> (8 * b)));
      }
  return out;
}

// The scale box as its reader would index it: row r's block b4 at
// tiled_scale_box_offset(r, b4, R) is canonical scale (row + r, k/32 + b4).
void expect_scale_box(const std::vector<uint8_t>& box, const std::vector<uint8_t>& scales, size_t K, int row, int R,
                      int k, const std::string& what) {
  ASSERT_EQ(box.size(), size_t(R) * 4) << what;
  for (int r = 0; r < R; ++r)
    for (int b4 = 0; b4 < 4; ++b4)
      ASSERT_EQ(box.at(tiled_scale_box_offset(r, b4, R)), scales.at((size_t(row) + r) * (K / 32) + k / 32 + b4))
          << what << ", r " << r << ", block " << b4;
}

// MXFP8 tiled copies (packed words, tiled scales) through the same maps
// over bytes: each box is the canonical box's two halves in packed words,
// and the scale box puts every row's four block scales where
// tiled_scale_box_offset says.
TEST(TiledBoxMap, Mxfp8DownBoxesAreThePackedCanonicalHalves) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{256, 256, 2}, std::tuple{160, 384, 3}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto q = random_bytes(size_t(E) * H * I, seed), sc = random_bytes(size_t(E) * H * I / 32, seed + 1);
    std::vector<uint8_t> qt(q.size()), st(sc.size());
    tile_mxfp8_down(s, q.data(), sc.data(), qt.data(), st.data());
    for (int R : {16, 64, 128}) {
      const TiledBoxMap m = down_tiled_box_map(E, H, I, R, 1), ms = down_tiled_scale_box_map(E, H, I, R);
      for (int k = 0; k < I; k += 128)
        for (int row = 0; row + R <= E * H; row += 48) {
          const std::string what = "H " + std::to_string(H) + ", I " + std::to_string(I) + ", R " +
                                   std::to_string(R) + ", k " + std::to_string(k) + ", row " + std::to_string(row);
          int c[5], cs[5];
          down_tiled_box_coords(k, row, c, 1);
          ASSERT_EQ(tma_box(qt, m, c), packed_halves(q, I, row, R, k)) << what;
          down_tiled_scale_box_coords(k, row, cs);
          expect_scale_box(tma_box(st, ms, cs), sc, I, row, R, k, what);
        }
    }
  }
}

TEST(TiledBoxMap, Mxfp8GateUpBoxesAreThePackedCanonicalHalves) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{256, 128, 2}, std::tuple{384, 96, 3}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto q = random_bytes(size_t(E) * 2 * I * H, seed), sc = random_bytes(size_t(E) * 2 * I * H / 32, seed + 1);
    std::vector<uint8_t> qt(q.size()), st(sc.size());
    tile_mxfp8_gate_up(s, q.data(), sc.data(), qt.data(), st.data());
    for (int R : {16, 32, 64}) {
      const TiledBoxMap m = gate_up_tiled_box_map(E, H, I, R, 1), ms = gate_up_tiled_scale_box_map(E, H, I, R);
      int boxes = 0;
      for (int k = 0; k < H; k += 128)
        for (int row = 0; row + R <= E * 2 * I; row += 16) {
          if (!tiled_box_fits(row, R, I)) continue;
          const std::string what = "H " + std::to_string(H) + ", I " + std::to_string(I) + ", R " +
                                   std::to_string(R) + ", k " + std::to_string(k) + ", row " + std::to_string(row);
          int c[5], cs[5];
          gate_up_tiled_box_coords(k, row, I, c, 1);
          ASSERT_EQ(tma_box(qt, m, c), packed_halves(q, H, row, R, k)) << what;
          gate_up_tiled_scale_box_coords(k, row, I, cs);
          expect_scale_box(tma_box(st, ms, cs), sc, H, row, R, k, what);
          boxes++;
        }
      EXPECT_GT(boxes, 0);
    }
  }
}

}  // namespace
}  // namespace wd
