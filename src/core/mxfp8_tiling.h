// One walk for every tiled copy (warpdecode/down_tiling.h,
// warpdecode/gate_up_tiling.h), host and device: an (E, R, L) byte tensor
// and, for MXFP8, its (E, R, L/32) E8M0 scales, moved piece by piece to where
// a layout puts each 16 contiguous bytes (which the layouts keep together)
// and each scale byte. MXFP8: L is the row length in E4M3 codes, and each
// aligned word of four codes is stored packed (warpdecode/packed_e4m3.h).
// BF16: the same layouts over the rows' bytes (L = 2 × the row's elements),
// no scales, nothing packed.
// Piece i < E·R·L/16 of the bytes, scale byte i < E·R·L/32: the host loops
// over i, the device kernel gives each thread one i. untile_piece moves them
// back (UntiledWeights: the classical path on tiled-only weights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "warpdecode/down_tiling.h"
#include "warpdecode/formats.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/packed_e4m3.h"

namespace wd {

// The down projection (E, H, I): rows of I bytes (MXFP8; BF16: I = 2 × its I).
struct DownTiling {
  size_t H, I;
  WD_HD size_t rows() const { return H; }
  WD_HD size_t len() const { return I; }
  WD_HD size_t code(size_t e, size_t r, size_t k) const { return down_tiled_offset(e, r, k, H, I); }
  WD_HD size_t scale(size_t e, size_t r, size_t j) const { return down_tiled_scale_offset(e, r, j, H, I); }
};

// The gate and up projections (E, 2I, H): rows of H bytes (MXFP8; BF16: H = 2 × its H).
struct GateUpTiling {
  size_t H, I;
  WD_HD size_t rows() const { return 2 * I; }
  WD_HD size_t len() const { return H; }
  WD_HD size_t code(size_t e, size_t r, size_t k) const { return gate_up_tiled_offset(e, r, k, H, I); }
  WD_HD size_t scale(size_t e, size_t r, size_t j) const { return gate_up_tiled_scale_offset(e, r, j, H, I); }
};

// Number of indices the walk takes: the code pieces, more than the scale bytes.
template <typename Tiling>
WD_HD size_t tiling_pieces(const Tiling& t, size_t E) {
  return E * t.rows() * t.len() / 16;
}

// Moves code piece i (16 bytes of MXFP8 codes, or of BF16 values) and, for
// MXFP8, scale byte i (where they exist) of E experts.
template <typename Tiling>
WD_HD void tile_piece(const Tiling& t, size_t E, size_t i, const uint8_t* q, const uint8_t* scales,
                      uint8_t* q_tiled, uint8_t* scales_tiled) {
  const size_t R = t.rows(), L = t.len();
  if (i < E * R * L / 16) {
    const size_t k = (i * 16) % L, row = (i * 16) / L;
    uint8_t* dst = q_tiled + t.code(row / R, row % R, k);
    const bool packed = scales != nullptr;  // MXFP8: each word of four codes packed
#if defined(__CUDA_ARCH__)  // device buffers are 16-byte aligned: one vector load and store
    uint4 v = reinterpret_cast<const uint4*>(q)[i];
    if (packed) v = {pack_e4m3x4(v.x), pack_e4m3x4(v.y), pack_e4m3x4(v.z), pack_e4m3x4(v.w)};
    *reinterpret_cast<uint4*>(dst) = v;
#else  // host pointers may be any view's
    if (packed) pack_e4m3_words(q + 16 * i, 16, dst);
    else std::memcpy(dst, q + 16 * i, 16);
#endif
  }
  if (scales != nullptr && i < E * R * L / kMxBlock) {  // MXFP8 only
    const size_t j = i % (L / kMxBlock), row = i / (L / kMxBlock);
    scales_tiled[t.scale(row / R, row % R, j)] = scales[i];
  }
}

// The inverse of tile_piece: code piece i (and scale byte i) of the
// canonical tensors back from the tiled copies, MXFP8 words unpacked
// (unpack_e4m3x4, a bijection: the canonical bytes exactly). The walk's
// index is the canonical one, so the device kernel's writes are contiguous.
template <typename Tiling>
WD_HD void untile_piece(const Tiling& t, size_t E, size_t i, const uint8_t* q_tiled, const uint8_t* scales_tiled,
                        uint8_t* q, uint8_t* scales) {
  const size_t R = t.rows(), L = t.len();
  if (i < E * R * L / 16) {
    const size_t k = (i * 16) % L, row = (i * 16) / L;
    const uint8_t* src = q_tiled + t.code(row / R, row % R, k);
    const bool packed = scales_tiled != nullptr;  // MXFP8: each word of four codes packed
#if defined(__CUDA_ARCH__)
    uint4 v = *reinterpret_cast<const uint4*>(src);
    if (packed) v = {unpack_e4m3x4(v.x), unpack_e4m3x4(v.y), unpack_e4m3x4(v.z), unpack_e4m3x4(v.w)};
    reinterpret_cast<uint4*>(q)[i] = v;
#else
    if (packed) unpack_e4m3_words(src, 16, q + 16 * i);
    else std::memcpy(q + 16 * i, src, 16);
#endif
  }
  if (scales_tiled != nullptr && i < E * R * L / kMxBlock) {  // MXFP8 only
    const size_t j = i % (L / kMxBlock), row = i / (L / kMxBlock);
    scales[i] = scales_tiled[t.scale(row / R, row % R, j)];
  }
}

// The whole walk on the host (the host tiling functions; the device one is a
// kernel in kernels/formats_device.cu). scales == nullptr: BF16, bytes only.
template <typename Tiling>
void tile_on_host(const Tiling& t, size_t E, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                  uint8_t* scales_tiled) {
  for (size_t i = 0, n = tiling_pieces(t, E); i < n; ++i) tile_piece(t, E, i, q, scales, q_tiled, scales_tiled);
}
template <typename Tiling>
void untile_on_host(const Tiling& t, size_t E, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                    uint8_t* scales) {
  for (size_t i = 0, n = tiling_pieces(t, E); i < n; ++i) untile_piece(t, E, i, q_tiled, scales_tiled, q, scales);
}

}  // namespace wd
