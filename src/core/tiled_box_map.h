// TMA map geometry over the tiled BF16 weight copies (down_tiling.h,
// gate_up_tiling.h) that loads a box of R canonical rows × 64 elements (128
// bytes, the classical TMA GEMM's weight box) in the canonical box's element
// order: row after row, each row's 64 elements in order.
//
// Why it can: a tiled BF16 item is a row-major block of 64-byte rows (down:
// 16 rows, byte 64 r + c; gate_up: 32 rows, the tile's 16 gate rows, then
// its 16 up rows). A map whose dimensions are, innermost first, the 32
// elements of a 64-byte row piece, the 64-byte unit along K, the row in the
// item (stride 64 bytes), [gate or up,] and the item row, with a box of 2
// units and R / 16 item rows, walks exactly the canonical box. Whether TMA's
// 128-byte swizzle then puts the bytes where the canonical 2-D map puts them
// is the device's to say (bench/tma_tiled_probe); the order is checked here
// on the CPU (tests/cpu/test_tiled_box_map.cpp).
//
// Boxes must start on a 16-row boundary and, for gate_up, stay inside one
// expert's gate rows or up rows (tiled_box_fits).
#pragma once

#include <cstdint>

#include "warpdecode/formats.h"

namespace wd {

struct TiledBoxMap {
  int rank = 0;
  uint64_t dims[5] = {};     // elements of each dimension, innermost first
  uint64_t strides[4] = {};  // bytes between steps of dimensions 1 .. rank-1
  uint32_t box[5] = {};      // box extent per dimension
};

constexpr int kTiledBoxElems = 64;  // BF16 elements of K a box row holds (128 bytes)

// Down (E, H, I) BF16, rows e·H + n, K = I: rank 4 (32 elements, I/32 units
// of 1 KB items, 16 rows of 64 bytes, E·H/16 item rows of 32·I bytes).
inline TiledBoxMap down_tiled_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows) {
  TiledBoxMap m;
  m.rank = 4;
  const uint64_t dims[4] = {32, I / 32, 16, E * H / 16}, strides[3] = {1024, 64, 32 * I};
  const uint32_t box[4] = {32, 2, 16, box_rows / 16};
  for (int d = 0; d < 4; ++d) m.dims[d] = dims[d], m.box[d] = box[d];
  for (int d = 0; d < 3; ++d) m.strides[d] = strides[d];
  return m;
}

// Gate_up (E, 2I, H) BF16, gate rows e·2I + n and up rows e·2I + I + n,
// K = H: rank 5 (32 elements, H/32 units of 2 KB items, 16 rows of 64
// bytes, gate/up 1 KB apart, E·I/16 item rows of 64·H bytes).
inline TiledBoxMap gate_up_tiled_box_map(uint64_t E, uint64_t H, uint64_t I, uint32_t box_rows) {
  TiledBoxMap m;
  m.rank = 5;
  const uint64_t dims[5] = {32, H / 32, 16, 2, E * I / 16}, strides[4] = {2048, 64, 1024, 64 * H};
  const uint32_t box[5] = {32, 2, 16, 1, box_rows / 16};
  for (int d = 0; d < 5; ++d) m.dims[d] = dims[d], m.box[d] = box[d];
  for (int d = 0; d < 4; ++d) m.strides[d] = strides[d];
  return m;
}

// Whether a box of box_rows canonical rows from `row` (K from any multiple
// of 64) maps: 16-row aligned, and for gate_up (I > 0: the tensor's I)
// inside one gate or up half of one expert.
WD_HD bool tiled_box_fits(int row, int box_rows, int gate_up_I) {
  if (row % 16 != 0 || box_rows % 16 != 0 || box_rows <= 0) return false;
  return gate_up_I <= 0 || row % gate_up_I + box_rows <= gate_up_I;
}

// The map coordinates (innermost first) of the box whose canonical corner is
// (element k, row).
WD_HD void down_tiled_box_coords(int k, int row, int (&c)[5]) {
  c[0] = 0, c[1] = k / 32, c[2] = 0, c[3] = row / 16, c[4] = 0;
}
WD_HD void gate_up_tiled_box_coords(int k, int row, int I, int (&c)[5]) {
  const int e = row / (2 * I), in = row - e * 2 * I, up = in >= I ? 1 : 0, n = in - up * I;
  c[0] = 0, c[1] = k / 32, c[2] = 0, c[3] = up, c[4] = (e * I + n) / 16;
}

}  // namespace wd
