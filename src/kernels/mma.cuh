// Tensor-core building blocks of the tensor-core warp-decode kernels
// (moe_gate_up_tc.cu, moe_down_tc.cu): one BF16 mma.sync tile and the exact
// conversions that feed it.
//
// The tile is m16n8k16 (A 16×16 row-major, B 16×8 column-major, FP32 C).
// Lane l = 4·g + q holds A rows g and g+8, B column g and C rows g, g+8 ×
// columns 2q, 2q+1 (PTX ISA, "Matrix fragments for mma.m16n8k16").
//
// K permutation: a dot product does not care in which order k is visited,
// only that A and B agree. Lane q of a row loads 16 contiguous bytes of that
// row (8 BF16, or 16 E4M3 decoded to 8 words), so four lanes cover one
// contiguous segment and every load is a full 16-byte vector. Word j of a
// lane's data goes to the fragment slot of k16 step j/2: words 2s and 2s+1
// are the "k = 2q, 2q+1" and "k = 2q+8, 2q+9" pairs of step s. A and B
// fragments are built from the same words, so A·B is the exact segment dot
// product: every BF16×BF16 product is exact in FP32.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common.cuh"
#include "warpdecode/packed_e4m3.h"

namespace wd::kernels {

// C += A·B on one m16n8k16 BF16 tile, FP32 accumulation.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two floats -> BF16x2 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 E4M3 codes times their block's E8M0 scale (code c, 2^(c-127)) -> 8
// BF16x2 words, in element order. Exact whenever the product is a BF16
// normal (a 4-bit significand times a power of two): for every E4M3 value at
// scales from 2^-117 to 2^119 (codes 10 to 246; real weights' scales are near
// 1); at smaller scales the smallest products fall among BF16 subnormals.
//
// Two paths, chosen per work item by the caller with one warp vote
// (scales_narrow), so that the decode of a whole item is one basic block:
// a branch per row split it into small blocks whose dependency chains the
// scheduler could not interleave (ncu, PERF_LOG v9).
// - kNarrow (codes <= kNarrowMaxCode, scales up to 2^7: every real
//   checkpoint): the integer decode, e4m3x2_to_bf16x2_shift120 below (a
//   byte permute, a shift and an add a pair, the value × 2^-120), then ×
//   2^(c-7) in one BF16x2 multiply (a BF16: c <= 134). Until session 25 the
//   hardware E4M3x2 -> F16x2 convert and a bit move (the "convert" decode
//   below, × 2^-112), a shift more for a word's high pair.
// - otherwise: through FP32, exact over the same range.
//
// Both decodes leave the E4M3 value × 2^-kBias (the integer decode kIntBias
// = 120, the hardware convert kConvertBias = 112) and multiply by the BF16
// 2^(c-127+kBias), whose exponent field c + kBias must stay below 255: a
// narrow code is at most kNarrowMax<kBias> = 254 - kBias (134, resp. 142).
// The scale helpers below (scales_narrow4, narrow_scale_factor,
// scale_factors) take the bias as their template argument.
constexpr uint32_t kIntBias = 120, kConvertBias = 112;
template <uint32_t kBias>
constexpr uint32_t kNarrowMax = 254 - kBias;
constexpr uint32_t kNarrowMaxCode = kMxNarrowMaxCode;
static_assert(kMxNarrowMaxCode == kNarrowMax<kIntBias>, "the integer decode's one multiply by 2^(c-7) needs c <= 134");

__device__ __forceinline__ bool scales_narrow(uint32_t max_code) {
  return __all_sync(kFullMask, max_code <= kNarrowMaxCode);
}

// Runs f(std::true_type{}) (the narrow decode) when every lane's largest
// scale code of the item is narrow, else f(std::false_type{}); with
// kMx8 = false (no scales) always the narrow path.
template <bool kMx8, typename F>
__device__ __forceinline__ void with_scale_path(uint32_t max_code, F&& f) {
  if constexpr (kMx8) {
    if (scales_narrow(max_code)) f(std::true_type{});
    else f(std::false_type{});
  } else {
    f(std::true_type{});
  }
}

// Two E4M3 codes (the low 16 bits of `two`) -> BF16x2 whose values are the
// E4M3 values × 2^-112, exactly: E4M3 -> F16 in hardware, then the F16
// exponent and mantissa moved down three places. Every E4M3 value,
// subnormals included, is an F16 normal, and lands on a BF16 normal.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_pow2(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu), __NV_E4M3);
  const uint32_t x = uint32_t(h.x) | (uint32_t(h.y) << 16);
  return ((x >> 3) & 0x0FFF0FFFu) | (x & 0x80008000u);
}

// 16 E4M3 codes -> 8 BF16x2 words of their values × 2^-112 (exact): for a
// caller that folds the 2^112 into a later scale (classical_stream_gemm.cu).
__device__ __forceinline__ void e4m3x16_to_bf16x8_pow2(const uint4& raw, uint32_t (&out)[8]) {
  const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = e4m3x2_to_bf16x2_pow2(v[i / 2] >> (16 * (i % 2)));
}

// Any code, after a decode that left the value × 2^-kBias: the BF16x2
// factors 2^(min(c, L) - 127 + kBias) and 2^(max(c, L) - L), L =
// kNarrowMax<kBias> (the second is 1 for every narrow code): two multiplies
// and no branch (the W8A16 TMA tile's wide path).
template <uint32_t kBias>
__device__ __forceinline__ void scale_factors(uint32_t code, uint32_t& m_lo, uint32_t& m_hi) {
  constexpr uint32_t kMax = kNarrowMax<kBias>;
  m_lo = ((min(code, kMax) + kBias) << 7) * 0x10001u;
  m_hi = ((max(code, kMax) - (kMax - 127u)) << 7) * 0x10001u;
}
// Whether all four E8M0 codes of a word are at most kNarrowMax<kBias>.
template <uint32_t kBias>
__device__ __forceinline__ bool scales_narrow4(uint32_t codes) {
  return __vcmpgtu4(codes, kNarrowMax<kBias> * 0x01010101u) == 0;
}
// The BF16x2 2^(c-127+kBias) of code c = byte j of a word of narrow codes:
// c + kBias (no carry) moved to bits 7-14 of both halves, the BF16 exponent
// field (bytes 1 and 3 by one permute, then one place down).
template <uint32_t kBias>
__device__ __forceinline__ uint32_t narrow_scale_factor(uint32_t codes, int j) {
  return __byte_perm(codes + kBias * 0x01010101u, 0u, 0x0404u | (j << 4) | (j << 12)) >> 1;
}
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// The integer decode (warp decode's MXFP8 kernels through e4m3x16_to_bf16x8,
// the W8A16 TMA tile from T = 16): two E4M3 codes of w, which the byte
// selector sel moves to bytes 1 and 3 (0x1404: w's bytes 0-1; 0x3424:
// bytes 2-3) -> BF16x2 of their values × 2^-120, exactly. An E4M3 code's
// exponent and mantissa bits are a BF16's shifted down four places with
// the exponent bias 120 apart (127 - 7), subnormals included (they land on
// BF16 subnormals in the same ratio); its sign, there at bit 11 (27),
// moves to 15 (31) by adding 15 × 2^11 (bits 12-14 are zero). Four integer
// instructions a pair and no convert: the hardware E4M3 convert takes a
// register's low half, so a word's high pair costs a shift more, and its
// F16 result a shift and two masks to become BF16 (session 25: the integer
// decode measured 4-13 % faster in the W8A16 tile, 2-6 % in warp decode).
// The scale 2^(c-127) follows as × 2^(c-7), a BF16 normal for codes up to
// kNarrowMaxCode (scales up to 2^7); wider codes take two multiplies
// (scale_factors). Exact where the product is a BF16 normal (codes 10 to
// 246).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_shift120(uint32_t w, uint32_t sel) {
  const uint32_t a = __byte_perm(w, 0u, sel) >> 4;
  return a + 15u * (a & 0x08000800u);
}

// The integer decode's scale factor for a narrow code c: the BF16x2
// 2^(c-7), 2^(c-7) (values × 2^-120 times it: × 2^(c-127)).
__device__ __forceinline__ uint32_t narrow_scale_bf16x2(uint32_t code) { return ((code + kIntBias) << 7) * 0x10001u; }

// One packed word of the tiled copies (warpdecode/packed_e4m3.h) with a
// narrow scale code -> BF16x2 words lo (its codes 0, 1) and hi (2, 3) times
// 2^(c-127): one LOP3, then two shifts and a LOP3, then one multiply each.
__device__ __forceinline__ void packed_e4m3x4_to_bf16x2x2(uint32_t w, uint32_t code, uint32_t& lo, uint32_t& hi) {
  const uint32_t m = narrow_scale_bf16x2(code);
  lo = bf16x2_mul(packed_e4m3_lo(w), m);
  hi = bf16x2_mul(packed_e4m3_hi(w), m);
}

// The W8A16 TMA tile's A fragments (classical_tma_gemm.cu): the two BF16x2
// words of one fragment row from its words lo and hi, scaled by the row's
// E8M0 code of 32-K block j (byte j of row_codes). The integer decode
// (kIntDecode): the low pair's codes are bytes sel_lo of lo, the high
// pair's bytes sel_hi of hi (e4m3x2_to_bf16x2_shift120's selectors), or,
// kPacked, the tiled copies' packed words (the same two words in fewer
// instructions). The convert decode: each pair in the low half of lo, hi.
// Either leaves the values × 2^-kBias; the scale follows in one multiply
// (kNarrow) or two. The two decodes keep their own branches: merged, the
// T = 8 kernel's PTX comes out in another order, a form never measured on
// the device.
template <bool kIntDecode, bool kPacked, bool kNarrow, uint32_t kBias>
__device__ __forceinline__ void a16_fragment_row(uint32_t row_codes, int j, uint32_t lo, uint32_t sel_lo, uint32_t hi,
                                                 uint32_t sel_hi, uint32_t& out_lo, uint32_t& out_hi) {
  const uint32_t code = (row_codes >> (8 * j)) & 0xFFu;
  if constexpr (kIntDecode) {
    const uint32_t v_lo = kPacked ? packed_e4m3_lo(lo) : e4m3x2_to_bf16x2_shift120(lo, sel_lo);
    const uint32_t v_hi = kPacked ? packed_e4m3_hi(hi) : e4m3x2_to_bf16x2_shift120(hi, sel_hi);
    if constexpr (kNarrow) {
      const uint32_t m = narrow_scale_factor<kBias>(row_codes, j);
      out_lo = bf16x2_mul(v_lo, m);
      out_hi = bf16x2_mul(v_hi, m);
    } else {
      uint32_t m_lo, m_hi;
      scale_factors<kBias>(code, m_lo, m_hi);
      out_lo = bf16x2_mul(bf16x2_mul(v_lo, m_lo), m_hi);
      out_hi = bf16x2_mul(bf16x2_mul(v_hi, m_lo), m_hi);
    }
  } else if constexpr (kNarrow) {
    const uint32_t m = narrow_scale_factor<kBias>(row_codes, j);
    out_lo = bf16x2_mul(e4m3x2_to_bf16x2_pow2(lo), m);
    out_hi = bf16x2_mul(e4m3x2_to_bf16x2_pow2(hi), m);
  } else {
    uint32_t m_lo, m_hi;
    scale_factors<kBias>(code, m_lo, m_hi);
    out_lo = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_pow2(lo), m_lo), m_hi);
    out_hi = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_pow2(hi), m_lo), m_hi);
  }
}

// kPacked: the words are the tiled copies' packed words
// (warpdecode/packed_e4m3.h), which give the same two BF16x2 words (values ×
// 2^-120) with one LOP3 and with two shifts and a LOP3: four integer
// instructions a word of four codes where the canonical word takes eight.
// The wide path unpacks them and runs the canonical one: the same bits.
template <bool kNarrow, bool kPacked = false>
__device__ __forceinline__ void e4m3x16_to_bf16x8(const uint4& raw, uint32_t code, uint32_t (&out)[8]) {
  if constexpr (kNarrow && kPacked) {
    const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) packed_e4m3x4_to_bf16x2x2(v[i], code, out[2 * i], out[2 * i + 1]);
  } else if constexpr (kNarrow) {
    const uint32_t m = narrow_scale_bf16x2(code);
    const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // values × 2^-120, then × 2^(c-7): × 2^(c-127)
      out[2 * i] = bf16x2_mul(e4m3x2_to_bf16x2_shift120(v[i], 0x1404u), m);
      out[2 * i + 1] = bf16x2_mul(e4m3x2_to_bf16x2_shift120(v[i], 0x3424u), m);
    }
  } else if constexpr (kPacked) {
    const uint4 canonical = {unpack_e4m3x4(raw.x), unpack_e4m3x4(raw.y), unpack_e4m3x4(raw.z), unpack_e4m3x4(raw.w)};
    e4m3x16_to_bf16x8<false, false>(canonical, code, out);
  } else {
    const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
    const float scale = e8m0_to_float(uint8_t(code));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 a = e4m3x2_to_float2(v[i]);
      const float2 b = e4m3x2_to_float2(v[i] >> 16);
      out[2 * i] = pack_bf16x2(a.x * scale, a.y * scale);
      out[2 * i + 1] = pack_bf16x2(b.x * scale, b.y * scale);
    }
  }
}

// FP32 -> hi + lo, both BF16: hi = bf16(v), lo = bf16(v - hi) (v - hi is
// exact). hi + lo carries 16 significant bits: |v - hi - lo| <= 2^-17·|v|.
// moe_gate_up_tc stores h split this way, so that moe_down_tc's two BF16
// MMAs (hi, then lo) reproduce its products with a BF16 weight to ~2^-17
// instead of 2^-9.
__device__ __forceinline__ void split_bf16(float v, uint16_t& hi, uint16_t& lo) {
  const __nv_bfloat16 h = __float2bfloat16_rn(v);
  const __nv_bfloat16 l = __float2bfloat16_rn(v - __bfloat162float(h));
  hi = *reinterpret_cast<const uint16_t*>(&h);
  lo = *reinterpret_cast<const uint16_t*>(&l);
}

}  // namespace wd::kernels
