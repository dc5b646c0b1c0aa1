// The tensor-core tiled layout of MXFP8 down weights: an optional second copy
// of an MXFP8 layer's down projection that moe_down_tc streams instead of the
// canonical (E, H, I) rows (docs/DESIGN.md, "Tiled MXFP8 down weights").
//
// Why: moe_down_tc's work item is 16 rows × 64 elements of one expert, one
// 64-byte piece of each of 16 rows. HBM serves such pieces at 60 % of the
// streaming-read bandwidth with two items in flight per warp and at most
// 75 % however deep; the same bytes stored as one contiguous kilobyte reach
// 80 % / 86 % / 92 % at 2 / 3 / 4 items in flight (bench/access_pattern.cu,
// docs/PERF_LOG.md v12).
//
// Layout. Item (e, t, u), t < H/16, u < I/64, is rows 16t..16t+15 and
// elements 64u..64u+63 of expert e; items are stored in (e, t, u) order,
// 1024 bytes each. Row 16t + 8h + g (h < 2, g < 8), elements 64u + 16q ..
// 64u + 16q + 15 (q < 4) sit at byte 512h + 16(4g + q) of the item: lane
// 4g + q of a warp reads its two 16-byte pieces at 16·lane and 512 + 16·lane,
// and each of the warp's two loads is 512 contiguous bytes.
// Scales: 32 bytes per item in the same order; the E8M0 scale of row
// 16t + 8h + g, block 2u + b (b < 2) at byte 16h + 2g + b.
// The canonical codes moved, each 16-byte piece whole, and every aligned word
// of four codes (4 consecutive elements of a row) stored packed
// (warpdecode/packed_e4m3.h): moe_down_tc decodes a packed word in half the
// integer instructions, to the same BF16 operands. The scales moved as they
// are: E·H·I code bytes and E·H·I/32 scales.
// Needs H % 16 == 0 and I % 64 == 0 (every shape the tensor-core kernels take).
//
// BF16 (tiled-only weights, DeviceWeightsOptions::tiled_only()): the same
// layout over the rows' bytes, nothing packed, as if the (E, H, I) BF16
// tensor were an (E, H, 2I) byte tensor: byte b of row r at
// down_tiled_offset(e, r, b, H, 2I). A moe_down_tc unit (64 BF16 elements,
// 128 bytes of a row) is then two consecutive 1 KB items: 2 KB contiguous.
// No scales.
#pragma once

#include <cstddef>
#include <cstdint>

#include "warpdecode/formats.h"
#include "warpdecode/layout.h"

namespace wd {

constexpr int kDownTileRows = 16;      // rows of one item
constexpr int kDownTileElems = 64;     // elements of I per item
constexpr int kDownTileBytes = 1024;   // E4M3 bytes of one item
constexpr int kDownTileScales = 32;    // scale bytes of one item

bool down_tiling_fits(const MoeShape& s);

// Byte offset in the tiled codes of canonical element (e, row, k): both
// tensors hold E·H·I bytes (MXFP8: the code's word there is packed, its
// byte is in the word's unpacked form at this offset).
WD_HD size_t down_tiled_offset(size_t e, size_t row, size_t k, size_t H, size_t I) {
  const size_t t = row / kDownTileRows, r = row % kDownTileRows, u = k / kDownTileElems, c = k % kDownTileElems;
  const size_t item = (e * (H / kDownTileRows) + t) * (I / kDownTileElems) + u;
  return item * kDownTileBytes + (r / 8) * 512 + 16 * (4 * (r % 8) + c / 16) + c % 16;
}

// Byte offset in the tiled scales of canonical scale (e, row, block j = k/32).
WD_HD size_t down_tiled_scale_offset(size_t e, size_t row, size_t j, size_t H, size_t I) {
  const size_t t = row / kDownTileRows, r = row % kDownTileRows, u = j / 2;
  const size_t item = (e * (H / kDownTileRows) + t) * (I / kDownTileElems) + u;
  return item * kDownTileScales + (r / 8) * 16 + 2 * (r % 8) + j % 2;
}

// Host: canonical q (E, H, I) E4M3 and scales (E, H, I/32) -> the tiled
// copies (E·H·I and E·H·I/32 bytes). Throws unless down_tiling_fits(s).
void tile_mxfp8_down(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                     uint8_t* scales_tiled);

// Host: canonical BF16 down weights (E, H, I) -> the tiled copy (the same
// E·H·I values). Throws unless down_tiling_fits(s).
void tile_bf16_down(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled);

// Host: the inverses (tiled copies -> canonical tensors, exactly the bytes
// the tiling took). Throw unless down_tiling_fits(s).
void untile_mxfp8_down(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                       uint8_t* scales);
void untile_bf16_down(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w);

}  // namespace wd
