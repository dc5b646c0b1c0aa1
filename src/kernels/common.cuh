// Device helpers shared by the MoE kernels: 16-byte loads, warp reductions,
// and the per-format weight decoders.
//
// A "chunk" is what one lane loads with one 16-byte load: 8 BF16 or 16 E4M3
// weights. Rows are split into chunks; lane l takes chunks l, l+32, l+64, ...
// so every load instruction of a warp reads 512 contiguous bytes. An MXFP8
// chunk of 16 elements lies inside one 32-element scale block (both aligned),
// so each chunk has exactly one scale.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/layout.h"

namespace wd::kernels {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// f(std::integral_constant<int, i>{}) for i = 0 .. N-1, in order, written out
// at compile time: an index into a register array stays a constant (a
// runtime index, even in a loop the compiler unrolls later, may put the
// array in local memory or reorder what is around it). Host code uses it
// to walk a constexpr list with a compile-time index (moe_down_tc's launch).
template <int... Is, class F>
__host__ __device__ __forceinline__ void for_each_index_impl(std::integer_sequence<int, Is...>, F&& f) {
  (f(std::integral_constant<int, Is>{}), ...);
}
template <int N, class F>
__host__ __device__ __forceinline__ void for_each_index(F&& f) {
  for_each_index_impl(std::make_integer_sequence<int, N>{}, f);
}

// Programmatic dependent launch (sm_90+; launch.cuh launches with it): a
// kernel launched with the programmatic-serialization attribute may start
// before its predecessor in the stream ends; it must call
// wait_for_previous_kernel() before reading anything the predecessor writes
// (the wait returns once that grid has completed and its writes are
// visible). allow_next_kernel() lets the dependent grid be scheduled; it
// orders no memory. Without the launch attribute both are no-ops.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Shared-memory address of a generic pointer, for cp.async and ldmatrix.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix (m8n8, 16-bit elements): lanes 8i..8i+7 give the 16-byte rows of
// matrix i; lane 4g + t receives the word of row g holding elements 2t and
// 2t + 1 of each matrix (bytes 4t..4t+3 of the row, whatever they hold).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// Asynchronous global -> shared copies (cp.async, sm_80+): no registers, all
// in flight at once. pred = false writes zeros (rows or K past the end).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 4 : 0));
}
// Barrier `id` (1-15: 0 is __syncthreads') among `threads` threads, whole
// warps.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Weights are streamed once: bypass L1 and keep L2 for data that is reused.
// volatile: keeps the compiler from sinking a prefetch down to its use,
// which would undo the kernels' double buffering.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

// The L2 policy of streamed weight loads: evict-first lets weights that have
// been consumed make way for data that is reused (measured 3-5 % faster on
// the H200, docs/PERF_LOG.md v6); evict-normal is the hardware default.
__device__ __forceinline__ uint64_t l2_stream_policy(bool evict_first) {
  uint64_t pol;
  if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}

// ld_stream with an L2 policy from l2_stream_policy.
__device__ __forceinline__ uint4 ld_stream(const void* p, uint64_t pol) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p), "l"(pol));
  return r;
}

// Asks for [p, p + bytes) to be brought into L2 ahead of the loads that will
// read it. A hint: it holds no register or shared memory and nothing waits
// for it, so one lane can keep kilobytes in flight on behalf of its warp.
// (Measured 1-15 % slower in both kernels on the H200, docs/PERF_LOG.md v6:
// the per-call options that use it are off by default.) 16-byte aligned
// ranges go to the bulk (TMA) prefetch; others (small: scale rows) are
// prefetched per 128-byte line.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (((a | bytes) & 15u) == 0) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
  } else {
    for (uintptr_t l = a & ~uintptr_t(127); l < a + bytes; l += 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(l));
  }
}

// Activations and intermediates are read by many warps: cached loads.
__device__ __forceinline__ uint4 ld_cached(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

__device__ __forceinline__ uint8_t ld_byte(const uint8_t* p) { return __ldg(p); }

// Butterfly sum: every lane ends with the same total, summed in the same
// order on every lane and every run (deterministic, bitwise).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// A condition every lane of the warp already holds alike, voted so that the
// compiler knows it too and branches on it warp-uniformly. Where wgmmas stay
// in flight across a branch, that is worth time: the FP8 128-token tile's
// branches voted ran 2.4-3.6 % faster at 4096 tokens (session 38 run 1).
__device__ __forceinline__ bool warp_uniform(bool p) { return __all_sync(kFullMask, p); }

// Inclusive prefix sum over the warp's lanes: lane i (the caller's lane
// index) gets v_0 + ... + v_i.
__device__ __forceinline__ int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int o = 1; o < kWarpSize; o <<= 1) {
    const int n = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// Two BF16 packed in a word -> floats (exact).
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

// Two E4M3 (low 16 bits of w >> shift) -> floats, exact: E4M3 -> F16 -> F32.
__device__ __forceinline__ float2 e4m3x2_to_float2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu),
                                                   __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// A codec turns one 16-byte chunk of a weight row into FP32 values.
// BF16: 8 weights per chunk, no scales.
struct Bf16Codec {
  static constexpr int kChunkElems = 8;
  static constexpr int kElemBytes = 2;
  static constexpr bool kScaled = false;
  __device__ __forceinline__ static void decode(const uint4& raw, float (&w)[kChunkElems]) {
    const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[2 * i] = bf16_lo(v[i]);
      w[2 * i + 1] = bf16_hi(v[i]);
    }
  }
  // Elements [4·quarter, 4·quarter + 4) of the chunk (quarter is 0 or 1).
  __device__ __forceinline__ static void decode4(const uint4& raw, int quarter, float (&w)[4]) {
    const uint32_t a = quarter ? raw.z : raw.x, b = quarter ? raw.w : raw.y;
    w[0] = bf16_lo(a);
    w[1] = bf16_hi(a);
    w[2] = bf16_lo(b);
    w[3] = bf16_hi(b);
  }
};

// How MXFP8 weights become FP32 in registers (measured: bench/decode_rate.cu,
// docs/PERF_LOG.md). Both are exact.
enum class Mx8Decode {
  kCvt,  // hardware E4M3x2 -> F16x2 convert, then F16 -> F32 convert
  kInt,  // integer bit placement (value × 2^-120), then an exact × 2^120
};

// Four E4M3 codes in w -> floats by bit placement. The bits alone are the
// value × 2^-120 (small codes land on FP32 subnormals), so scale back up
// exactly before any arithmetic sees them.
__device__ __forceinline__ void e4m3x4_to_float_int(uint32_t w, float* f) {
  f[3] = __uint_as_float((w & 0x80000000u) | ((w >> 4) & 0x07F00000u)) * 0x1p120f;
  f[2] = __uint_as_float(((w << 8) & 0x80000000u) | ((w << 4) & 0x07F00000u)) * 0x1p120f;
  f[1] = __uint_as_float(((w << 16) & 0x80000000u) | ((w << 12) & 0x07F00000u)) * 0x1p120f;
  f[0] = __uint_as_float(((w << 24) & 0x80000000u) | ((w << 20) & 0x07F00000u)) * 0x1p120f;
}

// MXFP8: 16 E4M3 weights per chunk, one E8M0 scale per 2 chunks.
template <Mx8Decode D>
struct Mx8Codec {
  static constexpr int kChunkElems = 16;
  static constexpr int kElemBytes = 1;
  static constexpr bool kScaled = true;
  // Four E4M3 codes of one 32-bit word -> floats, exactly.
  __device__ __forceinline__ static void decode_word(uint32_t v, float* w) {
    if constexpr (D == Mx8Decode::kInt) {
      e4m3x4_to_float_int(v, w);
    } else {
      const float2 a = e4m3x2_to_float2(v);
      const float2 b = e4m3x2_to_float2(v >> 16);
      w[0] = a.x;
      w[1] = a.y;
      w[2] = b.x;
      w[3] = b.y;
    }
  }
  __device__ __forceinline__ static void decode(const uint4& raw, float (&w)[kChunkElems]) {
    decode_word(raw.x, w);
    decode_word(raw.y, w + 4);
    decode_word(raw.z, w + 8);
    decode_word(raw.w, w + 12);
  }
  // Elements [4·quarter, 4·quarter + 4) of the chunk (quarter is 0..3).
  __device__ __forceinline__ static void decode4(const uint4& raw, int quarter, float (&w)[4]) {
    decode_word(quarter == 0 ? raw.x : quarter == 1 ? raw.y : quarter == 2 ? raw.z : raw.w, w);
  }
};

// Calls launch(Codec{}) with the codec of a weight format: the one place the
// warp-decode launchers turn a run-time format into a template argument.
// Throws for formats warp decode does not stream.
template <typename Launch>
void with_codec(WeightFormat format, bool mx8_int_decode, const char* op, Launch&& launch) {
  switch (format) {
    case WeightFormat::kBF16: launch(Bf16Codec{}); return;
    case WeightFormat::kMXFP8:
      if (mx8_int_decode) launch(Mx8Codec<Mx8Decode::kInt>{});
      else launch(Mx8Codec<Mx8Decode::kCvt>{});
      return;
    default:
      throw InvalidArgument(detail::concat(op, ": weight format ", to_string(format),
                                           " is not supported by warp decode (bf16, mxfp8)"));
  }
}

// Scale of chunk c of a row whose scales start at `row_scales`.
__device__ __forceinline__ float chunk_scale(const uint8_t* row_scales, int chunk) {
  return e8m0_to_float(ld_byte(row_scales + (chunk >> 1)));
}

// x chunk (BF16) matching a weight chunk of kElems elements at element offset
// `elem`: kElems/8 16-byte loads.
template <int kElems>
__device__ __forceinline__ void load_bf16_activations(const uint16_t* x, int elem, float (&out)[kElems]) {
#pragma unroll
  for (int j = 0; j < kElems / 8; ++j) {
    const uint4 r = ld_cached(x + elem + 8 * j);
    const uint32_t v[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[8 * j + 2 * i] = bf16_lo(v[i]);
      out[8 * j + 2 * i + 1] = bf16_hi(v[i]);
    }
  }
}

// FP32 chunk of kElems elements from shared or global memory (generic loads).
template <int kElems>
__device__ __forceinline__ void load_f32_any(const float* p, int elem, float (&out)[kElems]) {
#pragma unroll
  for (int j = 0; j < kElems / 4; ++j) {
    const float4 r = reinterpret_cast<const float4*>(p + elem)[j];
    out[4 * j] = r.x;
    out[4 * j + 1] = r.y;
    out[4 * j + 2] = r.z;
    out[4 * j + 3] = r.w;
  }
}

// Σ w[i]·a[i] over one chunk, in element order, as a chain of FMAs.
template <int kElems>
__device__ __forceinline__ float chunk_dot(const float (&w)[kElems], const float (&a)[kElems]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kElems; ++i) s = __fmaf_rn(w[i], a[i], s);
  return s;
}

// Accurate expf: one call per output, so speed does not matter here.
__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

// The same with the hardware's approximate exp2 and reciprocal (a few ulp;
// 0 for g below about -88, where 1 + e^-g is infinite): for an h that is
// quantized to E4M3 next (2^-4 relative), where the accurate form's ~25
// instructions a value made the W8A8 gate_up epilogue cost more than the
// stage it replaces (session 18 run 1).
__device__ __forceinline__ float silu_fast(float g) { return __fdividef(g, 1.0f + __expf(-g)); }

}  // namespace wd::kernels
