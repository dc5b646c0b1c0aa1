// The tensor-core tiled layout of MXFP8 gate_up weights: an optional second
// copy of an MXFP8 layer's gate and up projections that moe_gate_up_tc
// streams instead of the canonical (E, 2I, H) rows (docs/DESIGN.md).
//
// Why: a moe_gate_up_tc round reads, per warp, 64 bytes of each of 32 rows
// (gate and up rows g, g+8 of a 16-neuron tile). Stored as one contiguous
// 2 KB item instead, a warp's whole K range is one contiguous stream (the
// load pattern alone: 98 % of the streaming-read bandwidth against 92 %,
// bench/access_pattern.cu).
//
// Layout. Item (e, t, c), t < I/16, c < H/64, holds the 32 rows of tile t
// (gate rows 16t + 8h + g and up rows I + 16t + 8h + g, h < 2, g < 8) at
// elements 64c .. 64c + 63, 2048 bytes; items in (e, t, c) order. Kernel row
// r = 2·(up) + h: elements 64c + 16q .. + 15 (q < 4) of row (r, g) sit at byte
// 512r + 16(4g + q) of the item, so lane 4g + q of a warp reads 16 bytes at
// 512r + 16·lane and each of the warp's four loads is 512 contiguous bytes.
// Scales: 64 bytes per item in the same order; the E8M0 scale of row (r, g),
// block 2c + b (b < 2) at byte 16r + 2g + b.
// The canonical codes moved, every aligned word of four stored packed
// (warpdecode/packed_e4m3.h, as the tiled down copy); the scales moved.
// Needs I % 16 == 0, H % 64 == 0.
//
// BF16 (tiled-only weights): the same layout over the rows' bytes (nothing
// packed), as if the (E, 2I, H) BF16 tensor were an (E, 2I, 2H) byte
// tensor: byte b of row r at gate_up_tiled_offset(e, r, b, 2H, I). A
// moe_gate_up_tc chunk (32 BF16 elements, 64 bytes of each of its 32 rows)
// is then one 2 KB item. No scales.
#pragma once

#include <cstddef>
#include <cstdint>

#include "warpdecode/formats.h"
#include "warpdecode/layout.h"

namespace wd {

constexpr int kGateUpTileNeurons = 16;  // neurons (gate and up rows each) of one item
constexpr int kGateUpTileElems = 64;    // elements of H per item
constexpr int kGateUpTileBytes = 2048;  // E4M3 bytes of one item
constexpr int kGateUpTileScales = 64;   // scale bytes of one item

bool gate_up_tiling_fits(const MoeShape& s);

// Byte offset in the tiled codes of canonical element (e, row, k), row < 2I
// (MXFP8: of the code in its word's unpacked form; warpdecode/packed_e4m3.h).
WD_HD size_t gate_up_tiled_offset(size_t e, size_t row, size_t k, size_t H, size_t I) {
  const size_t up = row / I, n = row % I, t = n / 16, h = (n % 16) / 8, g = n % 8;
  const size_t item = (e * (I / 16) + t) * (H / 64) + k / 64, kk = k % 64;
  return item * kGateUpTileBytes + 512 * (2 * up + h) + 16 * (4 * g + kk / 16) + kk % 16;
}

// Byte offset in the tiled scales of canonical scale (e, row, block j = k/32).
WD_HD size_t gate_up_tiled_scale_offset(size_t e, size_t row, size_t j, size_t H, size_t I) {
  const size_t up = row / I, n = row % I, t = n / 16, h = (n % 16) / 8, g = n % 8;
  const size_t item = (e * (I / 16) + t) * (H / 64) + j / 2;
  return item * kGateUpTileScales + 16 * (2 * up + h) + 2 * g + j % 2;
}

// Host: canonical q (E, 2I, H) E4M3 and scales (E, 2I, H/32) -> the tiled
// copies (same sizes). Throws unless gate_up_tiling_fits(s).
void tile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                        uint8_t* scales_tiled);

// Host: canonical BF16 gate_up weights (E, 2I, H) -> the tiled copy. Throws
// unless gate_up_tiling_fits(s).
void tile_bf16_gate_up(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled);

// Host: the inverses (tiled copies -> canonical tensors, exactly the bytes
// the tiling took). Throw unless gate_up_tiling_fits(s).
void untile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                          uint8_t* scales);
void untile_bf16_gate_up(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w);

}  // namespace wd
