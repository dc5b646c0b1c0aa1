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
// back (UntiledWeights: the classical path on tiled-only weights), i then the
// tiled copy's piece, the scales a 16-byte chunk of it per i < E·R·L/512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
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
  // The canonical (e, row, k) of the tiled copy's 16-byte piece i: code()'s
  // inverse on pieces. Piece i is lane i % 32 of 512-byte half (i / 32) % 2
  // of item i / 64: row 16t + 8h + lane / 4, bytes 64u + 16 (lane % 4) on.
  // U: uint32_t on the device (its divisions are short), size_t on the host.
  template <typename U>
  WD_HD void piece(U i, U& e, U& row, U& k) const {
    const U lane = i % 32, h = (i / 32) % 2, item = i / 64;
    const U units = U(I / kDownTileElems), tiles = U(H / kDownTileRows);
    const U et = item / units, u = item - et * units;
    e = et / tiles;
    row = kDownTileRows * (et - e * tiles) + 8 * h + lane / 4;
    k = kDownTileElems * u + 16 * (lane % 4);
  }
  // Aligned 16-byte chunk k of the tiled scales: item k/2's half h = k % 2,
  // its byte 2g + b the scale of (e, row0 + g, j0 + b) (down_tiling.h).
  WD_HD void scale_chunk(size_t k, size_t& e, size_t& row0, size_t& j0) const {
    const size_t item = k / 2, u = item % (I / kDownTileElems), et = item / (I / kDownTileElems);
    e = et / (H / kDownTileRows);
    row0 = kDownTileRows * (et % (H / kDownTileRows)) + 8 * (k % 2);
    j0 = 2 * u;
  }
};

// The gate and up projections (E, 2I, H): rows of H bytes (MXFP8; BF16: H = 2 × its H).
struct GateUpTiling {
  size_t H, I;
  WD_HD size_t rows() const { return 2 * I; }
  WD_HD size_t len() const { return H; }
  WD_HD size_t code(size_t e, size_t r, size_t k) const { return gate_up_tiled_offset(e, r, k, H, I); }
  WD_HD size_t scale(size_t e, size_t r, size_t j) const { return gate_up_tiled_scale_offset(e, r, j, H, I); }
  // The canonical (e, row, k) of the tiled copy's 16-byte piece i: code()'s
  // inverse on pieces. Piece i is lane i % 32 of kernel row r = (i / 32) % 4
  // = 2·up + h of item i / 128: row up·I + 16t + 8h + lane / 4, bytes 64c +
  // 16 (lane % 4) on. U as DownTiling::piece.
  template <typename U>
  WD_HD void piece(U i, U& e, U& row, U& k) const {
    const U lane = i % 32, r = (i / 32) % 4, item = i / 128;
    const U chunks = U(H / kGateUpTileElems), tiles = U(I / kGateUpTileNeurons);
    const U et = item / chunks, c = item - et * chunks;
    e = et / tiles;
    row = (r / 2) * U(I) + kGateUpTileNeurons * (et - e * tiles) + 8 * (r % 2) + lane / 4;
    k = kGateUpTileElems * c + 16 * (lane % 4);
  }
  // Aligned 16-byte chunk k of the tiled scales: item k/4's kernel row
  // 2·up + h = k % 4, its byte 2g + b the scale of (e, row0 + g, j0 + b)
  // (gate_up_tiling.h).
  WD_HD void scale_chunk(size_t k, size_t& e, size_t& row0, size_t& j0) const {
    const size_t item = k / 4, c = item % (H / kGateUpTileElems), et = item / (H / kGateUpTileElems);
    const size_t up = (k % 4) / 2, h = k % 2;
    e = et / (I / kGateUpTileNeurons);
    row0 = up * I + kGateUpTileNeurons * (et % (I / kGateUpTileNeurons)) + 8 * h;
    j0 = 2 * c;
  }
};

// Throws unless every pointer a tiling function was given is set (who: its
// name, for the error).
inline void check_tiling_pointers(const char* who, std::initializer_list<const void*> pointers) {
  for (const void* ptr : pointers) WD_CHECK(ptr != nullptr, who, ": a pointer is null");
}
// A shape's projection as the walk's byte tensor (elem_bytes: 1 MXFP8, 2
// BF16), once the shape is one the layout takes and no pointer is null: the
// one check of every host and device tiling function.
inline DownTiling down_walk(const MoeShape& s, size_t elem_bytes, const char* who,
                            std::initializer_list<const void*> pointers) {
  WD_CHECK(down_tiling_fits(s), who, ": H = ", s.hidden, ", I = ", s.intermediate, " need H % 16 == 0 and I % 64 == 0");
  check_tiling_pointers(who, pointers);
  return DownTiling{size_t(s.hidden), elem_bytes * size_t(s.intermediate)};
}
inline GateUpTiling gate_up_walk(const MoeShape& s, size_t elem_bytes, const char* who,
                                 std::initializer_list<const void*> pointers) {
  WD_CHECK(gate_up_tiling_fits(s), who, ": H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 64 == 0 and I % 16 == 0");
  check_tiling_pointers(who, pointers);
  return GateUpTiling{elem_bytes * size_t(s.hidden), size_t(s.intermediate)};
}

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

#if defined(__CUDA_ARCH__)
// unpack_e4m3x4 for the un-tiling's MXFP8 walk: the two codes of each
// decoded BF16x2 word ("s 0000 eeee mmm 0000" a half) come out together, in
// bytes 0 and 2, from two shifts and masks, and one byte permute gathers the
// four, where unpack_e4m3x4 extracts and places each code on its own. The
// GPU un-tiling test holds it to the canonical bytes.
__device__ __forceinline__ uint32_t unpack_e4m3x4_device(uint32_t packed) {
  const uint32_t lo = packed_e4m3_lo(packed), hi = packed_e4m3_hi(packed);
  const uint32_t ab = ((lo >> 4) & 0x007F007Fu) | ((lo >> 8) & 0x00800080u);  // A in byte 0, B in byte 2
  const uint32_t cd = ((hi >> 4) & 0x007F007Fu) | ((hi >> 8) & 0x00800080u);  // C in byte 0, D in byte 2
  return __byte_perm(ab, cd, 0x6420);
}
#endif

// The inverse of tile_piece: piece i of the tiled copy (and scale chunk i)
// back to the canonical tensors, MXFP8 words unpacked (unpack_e4m3x4, a
// bijection: the canonical bytes exactly). The walk's index is the tiled
// copy's, so a warp reads 512 contiguous bytes and writes 64 contiguous
// bytes of each of 8 rows; walking the canonical index instead (contiguous
// writes) read 64-byte pieces, the pattern HBM serves slowest
// (down_tiling.h; docs/PERF_LOG.md session 49).
template <typename Tiling>
WD_HD void untile_piece(const Tiling& t, size_t E, size_t i, const uint8_t* q_tiled, const uint8_t* scales_tiled,
                        uint8_t* q, uint8_t* scales) {
  const size_t R = t.rows(), L = t.len();
  if (i < E * R * L / 16) {
    const bool packed = scales_tiled != nullptr;  // MXFP8: each word of four codes packed
#if defined(__CUDA_ARCH__)
    // 32-bit divisions (the launch checks that the pieces fit): 64-bit ones
    // by a runtime divisor are long instruction sequences on the GPU.
    uint32_t e = 0, row = 0, k = 0;
    t.piece(uint32_t(i), e, row, k);
    uint4 v = reinterpret_cast<const uint4*>(q_tiled)[i];
    if (packed)
      v = {unpack_e4m3x4_device(v.x), unpack_e4m3x4_device(v.y), unpack_e4m3x4_device(v.z),
           unpack_e4m3x4_device(v.w)};
    *reinterpret_cast<uint4*>(q + (size_t(e) * R + row) * L + k) = v;
#else
    size_t e = 0, row = 0, k = 0;
    t.piece(i, e, row, k);
    uint8_t* dst = q + (e * R + row) * L + k;
    if (packed) unpack_e4m3_words(q_tiled + 16 * i, 16, dst);
    else std::memcpy(dst, q_tiled + 16 * i, 16);
#endif
  }
  // MXFP8 scales: by 16-byte chunks of the tiled copy (8 rows × 2 blocks),
  // read whole and written as 8 two-byte pairs: a thread a scale byte, read
  // scattered, cost the MXFP8 un-tiling a third of its time (session 48).
  if (scales_tiled != nullptr && i < E * R * L / kMxBlock / 16) {
    size_t e = 0, row0 = 0, j0 = 0;
    t.scale_chunk(i, e, row0, j0);
    const size_t per_row = L / kMxBlock;
#if defined(__CUDA_ARCH__)
    const uint4 v = reinterpret_cast<const uint4*>(scales_tiled)[i];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int g = 0; g < 8; ++g)
      *reinterpret_cast<uint16_t*>(scales + (e * R + row0 + g) * per_row + j0) = uint16_t(w[g / 2] >> (16 * (g % 2)));
#else
    for (size_t g = 0; g < 8; ++g)
      std::memcpy(scales + (e * R + row0 + g) * per_row + j0, scales_tiled + 16 * i + 2 * g, 2);
#endif
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
