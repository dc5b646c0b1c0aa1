// The TMA map geometry over the tiled BF16 copies (core/tiled_box_map.h):
// a box read through it, in TMA's dense box order (innermost dimension
// fastest, before any swizzle), must hold the canonical box's elements as
// two K halves: rows row .. row + R - 1, each row's 32 elements from k, then
// the same rows' 32 elements from k + 32; MXFP8 the same over bytes, in
// packed words, with its scale boxes; and the W8A16 tile's slot over them,
// emulated (W8a16Slot*). The device's part (strides that do not ascend, the
// 64-byte swizzle) is bench/tma_tiled_probe's.
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

// The TMA tile producer's weight boxes (tiled_w_box_coords, what
// classical_tma_gemm.cu passes to its loads) are the maps' boxes at their
// canonical corners: down rows expert·H + n0 (+ a cluster rank's half),
// fused gate_up box b the gate (b = 0) or up (b = 1) rows of neurons n0..,
// K slot kt = 128 bytes, BF16 and MXFP8. A swapped coordinate fails here.
TEST(TiledBoxMap, ProducerBoxCoordsAreItsCanonicalCorner) {
  const int E = 6, H = 512, I = 384;
  for (int eb : {1, 2})
    for (int box_rows : {64, 128, 256})
      for (int expert : {0, 1, E - 1})
        for (int kt : {0, 1, 3}) {
          const int k = kt * 128 / eb;
          for (int n0 = 0; n0 + box_rows <= H; n0 += box_rows / 2) {  // down: N = H, K = I
            int want[5], got[5];
            if (k >= I) continue;
            down_tiled_box_coords(k, expert * H + n0, want, eb);
            tiled_w_box_coords(false, 0, (expert * H + n0) / 16, kt, got);
            for (int d = 0; d < 5; ++d) ASSERT_EQ(got[d], want[d]) << "down eb " << eb << " n0 " << n0 << " dim " << d;
          }
          for (int n0 = 0; n0 + box_rows / 2 <= I; n0 += 16)  // fused gate_up: K = H, boxes of box_rows / 2 rows
            for (int b : {0, 1}) {
              int want[5], got[5];
              gate_up_tiled_box_coords(k, expert * 2 * I + b * I + n0, I, want, eb);
              tiled_w_box_coords(true, b, (expert * I + n0) / 16, kt, got);
              for (int d = 0; d < 5; ++d)
                ASSERT_EQ(got[d], want[d]) << "gate_up eb " << eb << " n0 " << n0 << " box " << b << " dim " << d;
            }
        }
}

// The W8A16 TMA tile's slot over tiled MXFP8 copies, emulated on the host
// (classical_tma_gemm.cu, kTiledW with kA16): the producer's TMA loads land
// each weight box (tma_box: dense box order) under the 64-byte swizzle, and
// its cp.async chunks (w8a16_tiled_scale_chunk) the scales; then every read
// of the consumers (w8a16_tiled_chunk_offset for the ldmatrix rows,
// w8a16_tiled_scale_pair_offset for the scales) must find its tile row's
// canonical codes (packed words) and scales, and the slot's bytes must each
// be written once. The kernel's tiles: fused gate_up, kRows / 2 neurons
// from n0 (box 0 the gate rows, box 1 the up rows; 64 or 128 rows a box);
// down, kRows rows from n0 in one box (128 or 256 rows).

// TMA's 64-byte swizzle, from a 512-byte-aligned base: address bits 4-5
// (the 16-byte chunk in a 64-byte row) XOR bits 7-8.
uint32_t swizzle64(uint32_t a) { return a ^ (((a >> 7) & 3u) << 4); }

struct W8a16Slot {
  std::vector<uint8_t> w, scales;        // the slot's weight tile and scales, as shared memory holds them
  std::vector<int> w_writes, s_writes;   // how often each byte was written
};

// What the producer lands for the tile of `rows` tile rows (boxes of
// box_rows) whose first canonical row is expert·N + n0 (fused: N = 2I, n0
// counted in neurons), K slot kt; q_tiled / s_tiled the tiled copies.
W8a16Slot land_w8a16_slot(const std::vector<uint8_t>& q_tiled, const std::vector<uint8_t>& s_tiled,
                          const TiledBoxMap& m, bool fused, int E, int N, int K, int box_rows, int expert, int n0,
                          int kt) {
  const int boxes = fused ? 2 : 1, rows = boxes * box_rows;
  W8a16Slot slot{std::vector<uint8_t>(size_t(rows) * 128), std::vector<uint8_t>(size_t(rows) * 4),
                 std::vector<int>(size_t(rows) * 128), std::vector<int>(size_t(rows) * 4)};
  const int wrow = (expert * (fused ? N / 2 : N) + n0) / 16;  // the producer's item row (w_row)
  for (int b = 0; b < boxes; ++b) {
    int c[5];
    tiled_w_box_coords(fused, b, wrow, kt, c);  // the producer's (classical_tma_gemm.cu)
    const std::vector<uint8_t> box = tma_box(q_tiled, m, c);
    EXPECT_EQ(box.size(), size_t(box_rows) * 128);
    for (uint32_t i = 0; i < box.size(); ++i) {
      const size_t at = size_t(b) * box_rows * 128 + swizzle64(i);
      slot.w.at(at) = box[i];
      slot.w_writes.at(at)++;
    }
  }
  const int item_rows = E * (fused ? N / 2 : N) / 16, units = K / 64;
  for (int i = 0; i < rows / 4; ++i) {
    const W8a16ScaleChunk ch = w8a16_tiled_scale_chunk(i, box_rows, fused, wrow, item_rows, units, kt);
    for (int j = 0; j < 16; ++j) {
      slot.scales.at(size_t(ch.dst) + j) = ch.ok ? s_tiled.at(ch.src + j) : 0;
      slot.s_writes.at(size_t(ch.dst) + j)++;
    }
  }
  return slot;
}

// Every consumer read of the slot against the canonical codes q and scales
// sc ((E·N, K) row-major; K / 32 scales a row).
void expect_w8a16_reads(const W8a16Slot& slot, const std::vector<uint8_t>& q, const std::vector<uint8_t>& sc,
                        bool fused, int N, int K, int box_rows, int expert, int n0, int kt, const std::string& what) {
  const int rows = (fused ? 2 : 1) * box_rows;
  for (size_t i = 0; i < slot.w_writes.size(); ++i) ASSERT_EQ(slot.w_writes[i], 1) << what << ", weight byte " << i;
  for (size_t i = 0; i < slot.s_writes.size(); ++i) ASSERT_EQ(slot.s_writes[i], 1) << what << ", scale byte " << i;
  for (int t = 0; t < rows; ++t) {
    // Tile row t: the gate row n0 + t or (box 1) the up row n0 + t - box_rows; down row n0 + t.
    const size_t row = size_t(expert) * N + n0 + (fused && t >= box_rows ? N / 2 - box_rows : 0) + t;
    for (int ks = 0; ks < 8; ++ks) {
      const int off = w8a16_tiled_chunk_offset(t, ks, box_rows);
      for (int w = 0; w < 4; ++w) {
        const size_t at = row * K + 128 * kt + 16 * ks + 4 * w;
        const uint32_t canonical = uint32_t(q.at(at)) | uint32_t(q.at(at + 1)) << 8 | uint32_t(q.at(at + 2)) << 16 |
                                   uint32_t(q.at(at + 3)) << 24;
        const uint8_t* p = slot.w.data() + off + 4 * w;
        const uint32_t got = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
        ASSERT_EQ(got, pack_e4m3x4(canonical)) << what << ", tile row " << t << ", step " << ks << ", word " << w;
      }
    }
    for (int pair = 0; pair < 2; ++pair) {
      const int off = w8a16_tiled_scale_pair_offset(t, pair, box_rows);
      const size_t at = row * (K / 32) + 4 * kt + 2 * pair;
      ASSERT_EQ(slot.scales.at(off), sc.at(at)) << what << ", tile row " << t << ", block " << 2 * pair;
      ASSERT_EQ(slot.scales.at(off + 1), sc.at(at + 1)) << what << ", tile row " << t << ", block " << 2 * pair + 1;
    }
  }
}

TEST(TiledBoxMap, W8a16SlotReadsTheCanonicalGateUpRows) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{256, 256, 2}, std::tuple{384, 128, 3}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto q = random_bytes(size_t(E) * 2 * I * H, seed), sc = random_bytes(size_t(E) * 2 * I * H / 32, seed + 1);
    std::vector<uint8_t> qt(q.size()), st(sc.size());
    tile_mxfp8_gate_up(s, q.data(), sc.data(), qt.data(), st.data());
    int slots = 0;
    for (int box_rows : {64, 128}) {  // T = 8's 128-row tile, the others' 256
      const TiledBoxMap m = gate_up_tiled_box_map(E, H, I, box_rows, 1);
      for (int expert = 0; expert < E; ++expert)
        for (int n0 = 0; n0 + box_rows <= I; n0 += box_rows)
          for (int kt = 0; kt < H / 128; ++kt) {
            const std::string what = "H " + std::to_string(H) + ", I " + std::to_string(I) + ", box " +
                                     std::to_string(box_rows) + ", expert " + std::to_string(expert) + ", n0 " +
                                     std::to_string(n0) + ", kt " + std::to_string(kt);
            const W8a16Slot slot = land_w8a16_slot(qt, st, m, true, E, 2 * I, H, box_rows, expert, n0, kt);
            expect_w8a16_reads(slot, q, sc, true, 2 * I, H, box_rows, expert, n0, kt, what);
            slots++;
          }
    }
    EXPECT_GT(slots, 0);
  }
}

TEST(TiledBoxMap, W8a16SlotReadsTheCanonicalDownRows) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(seed);
  for (auto [H, I, E] : {std::tuple{256, 256, 2}, std::tuple{640, 384, 2}}) {
    const MoeShape s = test::make_shape(H, I, E, 2);
    const auto q = random_bytes(size_t(E) * H * I, seed), sc = random_bytes(size_t(E) * H * I / 32, seed + 1);
    std::vector<uint8_t> qt(q.size()), st(sc.size());
    tile_mxfp8_down(s, q.data(), sc.data(), qt.data(), st.data());
    int slots = 0;
    for (int box_rows : {128, 256}) {
      const TiledBoxMap m = down_tiled_box_map(E, H, I, box_rows, 1);
      // Tiles from every box_rows-th row of each expert, those that run on
      // into the next expert's rows too (H = 640: the kernel computes them
      // and does not store them), within the tensor.
      for (int expert = 0; expert < E; ++expert)
        for (int n0 = 0; n0 < H && expert * H + n0 + box_rows <= E * H; n0 += box_rows)
          for (int kt = 0; kt < I / 128; ++kt) {
            const std::string what = "H " + std::to_string(H) + ", I " + std::to_string(I) + ", box " +
                                     std::to_string(box_rows) + ", expert " + std::to_string(expert) + ", n0 " +
                                     std::to_string(n0) + ", kt " + std::to_string(kt);
            const W8a16Slot slot = land_w8a16_slot(qt, st, m, false, E, H, I, box_rows, expert, n0, kt);
            expect_w8a16_reads(slot, q, sc, false, H, I, box_rows, expert, n0, kt, what);
            slots++;
          }
    }
    EXPECT_GT(slots, 0);
  }
}

}  // namespace
}  // namespace wd
