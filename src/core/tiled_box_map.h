// TMA map geometry over the tiled BF16 weight copies (down_tiling.h,
// gate_up_tiling.h) that loads the classical TMA GEMM's weight box, R
// canonical rows × 64 elements of K, as two K halves: first the R rows'
// elements [k, k + 32), then their elements [k + 32, k + 64), each half R
// rows of 64 bytes in row order (the GEMM reads it with 64-byte-swizzle
// descriptors, classical_tma_gemm.cu).
//
// Why it can: a tiled BF16 item is a row-major block of 64-byte rows (down:
// 16 rows, byte 64 r + c; gate_up: 32 rows, the tile's 16 gate rows, then
// its 16 up rows). A map whose dimensions are, innermost first, the 32
// elements of a 64-byte row, the row in the item (stride 64 bytes), [gate or
// up,] the item row and, outermost, the 64-byte unit along K, with a box of
// R / 16 item rows and 2 units, walks the two halves in order.
//
// Why not the canonical 128-byte rows: under the 128-byte swizzle TMA gives
// every 64-byte inner box row a 128-byte line of its own (bench/
// tma_tiled_probe, session 51: the box spread over twice its bytes, each
// line half empty), so a box of 64-byte rows cannot land as the canonical
// map's 128-byte rows do; under the 64-byte swizzle it lands dense.
//
// Boxes must start on a 16-row boundary and, for gate_up, stay inside one
// expert's gate rows or up rows (tiled_box_fits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "warpdecode/formats.h"

namespace wd {

struct TiledBoxMap {
  int rank = 0;
  uint64_t dims[5] = {};     // elements of each dimension, innermost first
  uint64_t strides[4] = {};  // bytes between steps of dimensions 1 .. rank-1
  uint32_t box[5] = {};      // box extent per dimension
};

constexpr int kTiledBoxElems = 64;  // BF16 elements of K a box row holds (two 64-byte halves)

// A map of kRank dimensions from its lists (innermost first).
template <int kRank>
TiledBoxMap tiled_box_map(const uint64_t (&dims)[kRank], const uint64_t (&strides)[kRank - 1],
                          const uint32_t (&box)[kRank]) {
  TiledBoxMap m;
  m.rank = kRank;
  for (int d = 0; d < kRank; ++d) m.dims[d] = dims[d], m.box[d] = box[d];
  for (int d = 0; d + 1 < kRank; ++d) m.strides[d] = strides[d];
  return m;
}

// Elements of a 64-byte half row: 32 BF16, 64 MXFP8 codes (elem_bytes 2 or 1).
// MXFP8 tiled copies hold the same 64-byte rows over the codes, each aligned
// word of four codes packed (warpdecode/packed_e4m3.h): the same maps give
// a box of R rows × 128 codes, two halves of 64, in packed words, which the
// classical W8A16 TMA tile reads (w8a16_tiled_chunk_offset below).

// Down (E, H, I), rows e·H + n, K = I (elem_bytes each): rank 4 (one 64-byte
// half row, 16 rows of 64 bytes, E·H/16 item rows of 16·I·elem_bytes bytes,
// I·elem_bytes/64 units of 1 KB items).
inline TiledBoxMap down_tiled_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows, int elem_bytes = 2) {
  const uint64_t kb = I * uint64_t(elem_bytes);  // bytes of a row
  return tiled_box_map<4>({64 / uint64_t(elem_bytes), 16, E * H / 16, kb / 64}, {64, 16 * kb, 1024},
                          {64 / uint32_t(elem_bytes), 16, box_rows / 16, 2});
}

// Gate_up (E, 2I, H), gate rows e·2I + n and up rows e·2I + I + n, K = H:
// rank 5 (one 64-byte half row, 16 rows of 64 bytes, gate/up 1 KB apart,
// E·I/16 item rows of 32·H·elem_bytes bytes, H·elem_bytes/64 units of 2 KB
// items).
inline TiledBoxMap gate_up_tiled_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows, int elem_bytes = 2) {
  const uint64_t kb = H * uint64_t(elem_bytes);
  return tiled_box_map<5>({64 / uint64_t(elem_bytes), 16, 2, E * I / 16, kb / 64}, {64, 1024, 32 * kb, 2048},
                          {64 / uint32_t(elem_bytes), 16, 1, box_rows / 16, 2});
}

// MXFP8 tiled scales (down_tiled_scale_offset, gate_up_tiled_scale_offset):
// an item's 16 rows × 2 blocks of 32 codes (gate_up: its gate half, then its
// up half, 32 bytes each), row 8h + g, block b at byte 16h + 2g + b. A box
// of R rows × 4 blocks (a slot's 128 codes of K), no swizzle, lands as
// [unit u < 2][item row < R/16][32 bytes]: row r's block b4 < 4 at
// tiled_scale_box_offset(r, b4, R). Down: rank 3 (32 bytes, E·H/16 item
// rows of I/2 bytes, I/64 units of 32 bytes); gate_up: rank 4 (32 bytes,
// gate/up 32 bytes apart, E·I/16 item rows of H bytes, H/64 units of 64
// bytes).
inline TiledBoxMap down_tiled_scale_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows) {
  return tiled_box_map<3>({32, E * H / 16, I / 64}, {I / 2, 32}, {32, box_rows / 16, 2});
}
inline TiledBoxMap gate_up_tiled_scale_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows) {
  return tiled_box_map<4>({32, 2, E * I / 16, H / 64}, {32, H, 64}, {32, 1, box_rows / 16, 2});
}
WD_HD constexpr int tiled_scale_box_offset(int r, int b4, int box_rows) {
  return (b4 >> 1) * (box_rows / 16) * 32 + (r / 16) * 32 + ((r % 16) / 8) * 16 + 2 * (r % 8) + (b4 & 1);
}

// The W8A16 TMA tile's slot over tiled MXFP8 copies (classical_tma_gemm.cu):
// 128 codes of K (k = 128·kt on), tile rows t in boxes of box_rows rows
// (fused gate_up: box 0 the gate rows, box 1 the same neurons' up rows;
// else one box), box b = t / box_rows holding its row rr = t % box_rows.
// Host and device functions, CPU-tested against the tiled copies through
// the maps above (tests/cpu/test_tiled_box_map.cpp, TiledBoxMap.W8a16Slot*).
//
// Weights: box b at byte b·128·box_rows, its two 64-byte K halves of
// box_rows rows each, landed by TMA under the 64-byte swizzle, which moves
// 16-byte chunk c of the 64-byte row rr to chunk c ^ ((rr >> 1) & 3) (it
// XORs address bits 4-5 with bits 7-8; every box and half starts 512-byte
// aligned). The byte offset of codes 16·ks .. 16·ks + 15 (ks < 8) of tile
// row t, packed words (warpdecode/packed_e4m3.h):
WD_HD constexpr int w8a16_tiled_chunk_offset(int t, int ks, int box_rows) {
  const int b = t / box_rows, rr = t % box_rows;
  return b * box_rows * 128 + (ks >> 2) * box_rows * 64 + rr * 64 + (((ks & 3) ^ ((rr >> 1) & 3)) << 4);
}
// Scales: box b's 4·box_rows bytes at byte b·4·box_rows, as the scale box
// lands (tiled_scale_box_offset). The byte offset of tile row t's two
// scales of blocks 2·pair and 2·pair + 1 (pair < 2), one 16-bit word:
WD_HD constexpr int w8a16_tiled_scale_pair_offset(int t, int pair, int box_rows) {
  return (t / box_rows) * box_rows * 4 + tiled_scale_box_offset(t % box_rows, 2 * pair, box_rows);
}
// The slot's scales are copied by 16-byte chunks (cp.async, not TMA: 4·box_rows
// bytes a box); chunk i < boxes·box_rows / 4 is half `i & 1` of the 32 bytes
// of item row item_row0 + j, unit 2·kt + u (gate_up: its gate or up half b).
// item_rows: the tensor's item rows (E·N/16, fused E·I/16); units: K / 64.
struct W8a16ScaleChunk {
  size_t src;  // byte offset in the tiled scales (down_tiled_scale_offset, gate_up_tiled_scale_offset)
  int dst;     // byte offset in the slot's scales
  bool ok;     // inside the tensor; past it the chunk is zeros
};
WD_HD W8a16ScaleChunk w8a16_tiled_scale_chunk(int i, int box_rows, bool fused, int item_row0, int item_rows, int units,
                                             int kt) {
  const int nj = box_rows / 16, half = i & 1, q = i >> 1, j = q % nj, u = (q / nj) & 1, b = q / nj >> 1;
  const int item_row = item_row0 + j;
  const size_t item = size_t(item_row) * units + 2 * kt + u;
  return {(fused ? item * 64 + 32 * b : item * 32) + 16 * half, b * box_rows * 4 + u * nj * 32 + j * 32 + 16 * half,
          item_row < item_rows};
}

// Whether a box of box_rows canonical rows from `row` (K from any multiple
// of 64) maps: 16-row aligned, and for gate_up (I > 0: the tensor's I)
// inside one gate or up half of one expert.
WD_HD bool tiled_box_fits(int row, int box_rows, int gate_up_I) {
  if (row % 16 != 0 || box_rows % 16 != 0 || box_rows <= 0) return false;
  return gate_up_I <= 0 || row % gate_up_I + box_rows <= gate_up_I;
}

// The map coordinates (innermost first) of the box whose canonical corner is
// (element k, row); k a multiple of 128 / elem_bytes (a box's K). The scale
// maps take the same corner: down_tiled_scale_box_coords with the down
// codes' item row, gate_up's with the gate/up and item row coordinates.
WD_HD void down_tiled_box_coords(int k, int row, int (&c)[5], int elem_bytes = 2) {
  c[0] = 0, c[1] = 0, c[2] = row / 16, c[3] = k * elem_bytes / 64, c[4] = 0;
}
// A gate_up row e·2I + up·I + n: whether it is an up row, and its item row
// (e·I + n) / 16.
struct GateUpTiledRow {
  int up, item_row;
};
WD_HD GateUpTiledRow gate_up_tiled_row(int row, int I) {
  const int e = row / (2 * I), in = row - e * 2 * I, up = in >= I ? 1 : 0, n = in - up * I;
  return {up, (e * I + n) / 16};
}
WD_HD void gate_up_tiled_box_coords(int k, int row, int I, int (&c)[5], int elem_bytes = 2) {
  const GateUpTiledRow g = gate_up_tiled_row(row, I);
  c[0] = 0, c[1] = 0, c[2] = g.up, c[3] = g.item_row, c[4] = k * elem_bytes / 64;
}
// The TMA tile producer's weight box over a tiled copy
// (classical_tma_gemm.cu, kTiledW): box `box` of the slot (fused gate_up: 0
// the gate rows, 1 the up rows; down: 0) from item row item_row, K slot kt
// (the two 64-byte units 2·kt, 2·kt + 1: 128 bytes of K a slot row). These
// are the coordinates of the box's canonical corner above
// (TiledBoxMap.ProducerBoxCoordsAreItsCanonicalCorner), and the ones the
// slot emulation lands (TiledBoxMap.W8a16Slot*). Down's map is rank 4 (c[4]
// is 0).
WD_HD constexpr void tiled_w_box_coords(bool fused, int box, int item_row, int kt, int (&c)[5]) {
  c[0] = 0, c[1] = 0;
  c[2] = fused ? box : item_row, c[3] = fused ? item_row : 2 * kt, c[4] = fused ? 2 * kt : 0;
}
WD_HD void down_tiled_scale_box_coords(int k, int row, int (&c)[5]) {
  c[0] = 0, c[1] = row / 16, c[2] = k / 64, c[3] = 0, c[4] = 0;
}
WD_HD void gate_up_tiled_scale_box_coords(int k, int row, int I, int (&c)[5]) {
  const GateUpTiledRow g = gate_up_tiled_row(row, I);
  c[0] = 0, c[1] = g.up, c[2] = g.item_row, c[3] = k / 64, c[4] = 0;
}

}  // namespace wd
