// The packed E4M3 word of the tiled MXFP8 copies (warpdecode/down_tiling.h,
// warpdecode/gate_up_tiling.h): four E4M3 codes stored so that the
// tensor-core kernels turn them into their two BF16x2 operand words with
// four integer instructions instead of eight (kernels/mma.cuh).
//
// What the kernels need from a canonical word (codes A, B, C, D in bytes 0-3,
// A first along the row): two BF16x2 words whose values are the codes'
// E4M3 values × 2^-120, exactly (the scale multiply follows):
//   lo = (A, B), hi = (C, D), each half "s 0000 eeee mmm 0000": the code's
//   exponent and mantissa at bits 4-10, its sign at 15 (E4M3 subnormals land
//   on BF16 subnormals in the same ratio, as in e4m3x2_to_bf16x2_shift120).
// Such a half uses 8 of its 16 bits, always the same ones (kPackedMask), so
// a BF16x2 word carries 16 bits of data at fixed places and zeros elsewhere.
//
// The packed word w is the 32 bits of (lo, hi) arranged so that
//   lo = w & kPackedMask                       (one LOP3)
//   hi = ((w << 4) ^ (w >> 4)) & kPackedMask   (two shifts and one LOP3)
// lo's bits are stored where they are used; hi's go to the other 16 places,
// each as the XOR that the shifted copies put together (hi's bit t is w's
// bit t - 4 XOR bit t + 4). Every bit of hi has at least one neighbour
// outside kPackedMask, and solving bit by bit (pack_e4m3x4 below) shows the
// map is one-to-one: a packed word holds exactly the four codes. No pair of
// plain shifts, rotations or the identity does it with one instruction for
// hi (its 7-bit runs cannot land in the 4-bit gaps between lo's), which is
// why hi takes three.
//
// The map is a bijection of 32-bit words, so every byte pattern packs,
// E4M3 NaN codes included (they decode as today: to the same BF16 bits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "warpdecode/formats.h"

namespace wd {

// Bits 4-10 and 15 of each half: where a BF16 half of the decode has data.
constexpr uint32_t kPackedMask = 0x87F087F0u;

// Two E4M3 codes (bits 0-7 and 8-15 of `two`) -> the BF16x2 word of their
// values × 2^-120 (low half the first code), as the kernels decode it.
WD_HD uint32_t e4m3x2_bf16x2_bits(uint32_t two) {
  const uint32_t a = two & 0xFFu, b = (two >> 8) & 0xFFu;
  const uint32_t ha = ((a & 0x7Fu) << 4) | ((a & 0x80u) << 8), hb = ((b & 0x7Fu) << 4) | ((b & 0x80u) << 8);
  return ha | (hb << 16);
}

// The decode's two words of a packed word (the kernels' version is in
// kernels/mma.cuh; this one is the definition the tests hold it to).
WD_HD uint32_t packed_e4m3_lo(uint32_t w) { return w & kPackedMask; }
WD_HD uint32_t packed_e4m3_hi(uint32_t w) { return ((w << 4) ^ (w >> 4)) & kPackedMask; }

// Canonical word (codes A, B, C, D in bytes 0-3) -> packed word.
WD_HD uint32_t pack_e4m3x4(uint32_t canonical) {
  const uint32_t lo = e4m3x2_bf16x2_bits(canonical), hi = e4m3x2_bf16x2_bits(canonical >> 16);
  // hi bit t = w bit t - 4 ^ w bit t + 4 (t + 4 > 31: zero). lo fills the
  // mask's bits; the free bits follow from hi:
  // - bits 0-2 (16-18): hi bits 4-6 (20-22) with w bits 8-10 (24-26);
  // - bits 12-14 (28-30): hi bits 8-10 (24-26) with w bits 4-6 (20-22);
  // - bits 27, 19, 11, 3 in a chain: hi bit 31 = w bit 27, hi bit 23 =
  //   w 19 ^ w 27, hi bit 15 = w 11 ^ w 19, hi bit 7 = w 3 ^ w 11.
  uint32_t w = lo;
  w |= ((hi >> 4) ^ (lo >> 8)) & 0x00070007u;
  w |= ((hi << 4) ^ (lo << 8)) & 0x70007000u;
  uint32_t b = hi >> 31 & 1u;
  w |= b << 27;
  b ^= hi >> 23 & 1u;
  w |= b << 19;
  b ^= hi >> 15 & 1u;
  w |= b << 11;
  b ^= hi >> 7 & 1u;
  w |= b << 3;
  return w;
}

// A decoded BF16 half -> its E4M3 code.
WD_HD uint32_t packed_half_code(uint32_t half) { return ((half >> 4) & 0x7Fu) | ((half >> 8) & 0x80u); }

// Packed word -> the canonical word (its inverse; the kernels' wide-scale
// path and the tests use it).
WD_HD uint32_t unpack_e4m3x4(uint32_t packed) {
  const uint32_t lo = packed_e4m3_lo(packed), hi = packed_e4m3_hi(packed);
  return packed_half_code(lo & 0xFFFFu) | packed_half_code(lo >> 16) << 8 | packed_half_code(hi & 0xFFFFu) << 16 |
         packed_half_code(hi >> 16) << 24;
}

// Host: f applied to each little-endian 32-bit word of n bytes (n % 4 ==
// 0), in to out (they may be the same buffer): words as the device reads them.
template <typename F>
inline void map_e4m3_words(const uint8_t* in, size_t n, uint8_t* out, F&& f) {
  for (size_t i = 0; i + 4 <= n; i += 4) {
    const uint32_t w = f(uint32_t(in[i]) | uint32_t(in[i + 1]) << 8 | uint32_t(in[i + 2]) << 16 |
                         uint32_t(in[i + 3]) << 24);
    for (int b = 0; b < 4; ++b) out[i + b] = uint8_t(w >> 8 * b);
  }
}

// Host: n bytes of canonical codes -> packed words (the tiling's host walk),
// and back: a tiled copy's codes in the order of its bytes
// (down_tiled_offset, gate_up_tiled_offset).
inline void pack_e4m3_words(const uint8_t* in, size_t n, uint8_t* out) {
  map_e4m3_words(in, n, out, [](uint32_t w) { return pack_e4m3x4(w); });
}
inline void unpack_e4m3_words(const uint8_t* packed, size_t n, uint8_t* out) {
  map_e4m3_words(packed, n, out, [](uint32_t w) { return unpack_e4m3x4(w); });
}

}  // namespace wd
