// Number formats shared by host and device code.
//
//  BF16      1-8-7,  round-to-nearest-even from FP32, NaN kept (quietened).
//  E4M3      OCP FP8 "fn" variant: 1-4-3, bias 7, no infinities, max ±448,
//            NaN = 0x7F / 0xFF. Encoding rounds to nearest even and saturates
//            (|x| > 448 and ±Inf give ±448, as CUDA's __NV_SATFINITE mode);
//            NaN encodes to 0x7F.
//  E8M0      unsigned power-of-two scale 2^(e-127); 0xFF is NaN.
//  MXFP8     OCP Microscaling v1.0: 32 consecutive elements along the
//            reduction dimension share one E8M0 scale; elements are E4M3;
//            value = decode_e4m3(q) * 2^(scale-127).
//
// Every function here is exact where the math allows it and never depends on
// the host's floating-point environment (no fast-math, no FTZ assumptions):
// the device kernels and the CPU reference must agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define WD_HD __host__ __device__ __forceinline__
#else
#define WD_HD inline
#endif

namespace wd {

constexpr int kMxBlock = 32;         // elements per MXFP8 scale block
constexpr float kE4M3Max = 448.0f;   // largest finite E4M3 value
constexpr uint8_t kE8M0NaN = 0xFF;
// The largest "narrow" E8M0 code (scale 2^7): every real checkpoint's
// scales are narrow (weights below 448 · 2^7). Weights whose codes all are
// let the tensor-core kernels decode on their short path without a per-item
// check (MoeWeightsView::mx_scales_narrow, kernels/mma.cuh: the integer
// decode's one multiply by 2^(c-7) needs c <= 134).
constexpr uint8_t kMxNarrowMaxCode = 134;

WD_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

WD_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- Order keys ---------------------------------------------------------------
// A float's key as an unsigned integer (the router's top-K ranks logits with
// integer warp reductions): for non-NaN a and b, a > b exactly when
// order_key(a) > order_key(b), and a == b exactly when the keys are equal
// (-0 takes +0's key). NaN keys 0, below every float's (the smallest,
// -inf's, is 0x007FFFFF).
WD_HD uint32_t order_key(float f) {
  if (f != f) return 0u;
  const uint32_t u = f == 0.0f ? 0u : float_bits(f);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
// The float of a non-zero key (-0 comes back as +0).
WD_HD float order_key_value(uint32_t k) { return bits_float((k & 0x80000000u) ? k & 0x7FFFFFFFu : ~k); }

// ---- BF16 -------------------------------------------------------------------
WD_HD float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

WD_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN: keep sign, quiet
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest, ties to even; overflow rounds to Inf correctly
  return uint16_t(u >> 16);
}

// ---- E8M0 -------------------------------------------------------------------
// 2^(e-127) as a float, built from bits so it is exact over the whole range
// (e = 0 and 1 give FP32 subnormals 2^-127 and 2^-126... handled explicitly).
WD_HD float e8m0_to_float(uint8_t e) {
  if (e == kE8M0NaN) return bits_float(0x7FC00000u);
  if (e == 0) return bits_float(0x00400000u);  // 2^-127 is an FP32 subnormal
  return bits_float(uint32_t(e) << 23);
}

// ---- E4M3 (fn) ----------------------------------------------------------------
WD_HD float e4m3_to_float(uint8_t q) {
  const uint32_t sign = uint32_t(q & 0x80) << 24;
  const uint32_t em = q & 0x7F;
  if (em == 0x7F) return bits_float(sign | 0x7FC00000u);  // NaN
  const uint32_t exp = em >> 3, man = em & 7;
  float mag;
  if (exp == 0) {
    mag = float(man) * (1.0f / 512.0f);  // subnormal: man/8 * 2^-6, exact
  } else {
    mag = bits_float(((exp + 120u) << 23) | (man << 20));  // rebias 7 -> 127
  }
  return bits_float(float_bits(mag) | sign);
}

// Round to nearest even, saturating to ±448; NaN -> 0x7F (sign kept).
WD_HD uint8_t float_to_e4m3(float f) {
  const uint32_t u = float_bits(f);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint8_t(sign | 0x7F);  // NaN
  if (a >= 0x43E00000u) return uint8_t(sign | 0x7E);  // >= 448 (and Inf): saturate
  if (a < 0x3C800000u) {
    // Below 2^-6: subnormal grid of step 2^-9. a * 2^9 rounded to nearest even
    // (exact in FP32: the product is a scaled copy and rounding is explicit).
    const float scaled = bits_float(a) * 512.0f;  // in [0, 8)
    uint32_t m = uint32_t(scaled);
    const float rem = scaled - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint8_t(sign | m);  // m == 8 becomes exponent 1, mantissa 0: correct
  }
  // Normal range: keep 3 mantissa bits with round-to-nearest-even on bit 20.
  uint32_t r = a + 0x7FFFFu + ((a >> 20) & 1u);
  r >>= 20;                     // exponent(8) | mantissa(3), bias 127
  const uint32_t em = r - (120u << 3);  // rebias to 7
  if (em > 0x7E) return uint8_t(sign | 0x7E);  // rounded past 448
  return uint8_t(sign | em);
}

// The FP32 scale of an E4M3 block or activation group whose largest
// magnitude is amax (finite): amax maps to 448, and an all-zero group keeps a
// positive scale. Every FP8 quantizer of the project (host weights, the
// activation groups on the device and in the CPU reference) takes it from
// here, so that the GPU and CPU codes agree bit for bit.
WD_HD float e4m3_scale(float amax) { return fmaxf(amax, 1e-10f) / kE4M3Max; }

// ---- MXFP8 scale rules ----------------------------------------------------------
// floor(log2(|x|)) of a finite, non-zero float, from its bits (subnormals too).
WD_HD int floor_log2(float x) {
  const uint32_t a = float_bits(x) & 0x7FFFFFFFu;
  const int e = int(a >> 23);
  if (e != 0) return e - 127;
  int lz = 0;  // subnormal: position of the leading mantissa bit
  for (uint32_t m = a; !(m & 0x400000u); m <<= 1) ++lz;
  return -127 - lz;
}

enum class MxScaleRule {
  // OCP MX v1.0: X = floor(log2(amax)) - 8. amax/2^X lies in [256, 512), so a
  // block's largest values can clip at 448 (up to 12.5% low).
  kOcpFloor,
  // Smallest power of two with amax/2^X <= 448: never saturates. Equal to the
  // OCP rule unless amax's mantissa exceeds 1.75, then one larger. Default:
  // see docs/DESIGN.md "MXFP8 scale rule" for the measurement.
  kNoSaturate,
};

// E8M0 code of the shared scale for a block whose largest magnitude is amax
// (finite, >= 0). An all-zero block gets code 127 (scale 1.0).
WD_HD uint8_t mx_scale_code(float amax, MxScaleRule rule) {
  if (!(amax > 0.0f)) return 127;
  int x = floor_log2(amax) - 8;
  const uint32_t a = float_bits(amax) & 0x7FFFFFFFu;
  if (rule == MxScaleRule::kNoSaturate && (a >> 23) != 0) {
    // amax / 2^x = m * 256 with m the mantissa in [1, 2): saturates iff m > 1.75.
    // (A subnormal amax is clamped to x = -127 below, where it cannot saturate.)
    if ((a & 0x7FFFFFu) > 0x600000u) ++x;
  }
  if (x < -127) x = -127;
  if (x > 127) x = 127;
  return uint8_t(x + 127);
}

// The exact multiplier 2^-X that maps a block's values onto the E4M3 grid for
// scale code X + 127: X lies in [-127, 119] for finite amax, so 2^-X is a
// normal float and x · 2^-X is exact unless it is itself subnormal (then it is
// rounded once, like a divide).
WD_HD float mx_quantize_multiplier(uint8_t code) { return bits_float(uint32_t(254 - code) << 23); }

// Quantize one block of n <= 32 finite values; returns the scale code and
// writes n E4M3 codes. Elements are x / 2^(code-127), rounded and saturated.
WD_HD uint8_t mx_quantize_block(const float* x, int n, uint8_t* q, MxScaleRule rule) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = bits_float(float_bits(x[i]) & 0x7FFFFFFFu);
    amax = a > amax ? a : amax;
  }
  const uint8_t code = mx_scale_code(amax, rule);
  const float inv = mx_quantize_multiplier(code);
  for (int i = 0; i < n; ++i) q[i] = float_to_e4m3(x[i] * inv);
  return code;
}

WD_HD float mx_dequantize(uint8_t q, uint8_t scale_code) {
  return e4m3_to_float(q) * e8m0_to_float(scale_code);
}

}  // namespace wd
