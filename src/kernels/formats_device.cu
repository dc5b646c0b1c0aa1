#include "kernels/formats_device.cuh"

#include <algorithm>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/mxfp8_tiling.h"
#include "kernels/mma.cuh"

namespace wd::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) { return unsigned((n + kThreads - 1) / kThreads); }

// *out = max(*out, the largest of n bytes): a grid-stride walk, a warp
// maximum, one atomicMax a warp (a maximum does not depend on the order).
__global__ void max_byte_kernel(const uint8_t* in, size_t n, uint32_t* out) {
  uint32_t m = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    m = max(m, uint32_t(in[i]));
  m = __reduce_max_sync(0xFFFFFFFFu, m);
  if (threadIdx.x % 32 == 0) atomicMax(out, m);
}

__global__ void e4m3_decode_kernel(const uint8_t* in, float* out, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = e4m3_to_float(in[i]);
}

// One thread per 16 codes (one scale).
__global__ void mx8_bf16_decode_kernel(const uint4* codes, const uint8_t* scales, size_t n16, Mx8Bf16Decode path,
                                       uint16_t* out) {
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n16) return;
  const uint4 raw = codes[t];
  const uint32_t c = scales[t];
  if (path == Mx8Bf16Decode::kSixteenNarrow || path == Mx8Bf16Decode::kSixteenWide ||
      path == Mx8Bf16Decode::kSixteenNarrowPacked || path == Mx8Bf16Decode::kSixteenWidePacked) {
    uint32_t o[8];
    switch (path) {
      case Mx8Bf16Decode::kSixteenNarrow: e4m3x16_to_bf16x8<true>(raw, c, o); break;
      case Mx8Bf16Decode::kSixteenWide: e4m3x16_to_bf16x8<false>(raw, c, o); break;
      case Mx8Bf16Decode::kSixteenNarrowPacked: e4m3x16_to_bf16x8<true, true>(raw, c, o); break;
      default: e4m3x16_to_bf16x8<false, true>(raw, c, o); break;
    }
    for (int k = 0; k < 8; ++k) {
      out[16 * t + 2 * k] = uint16_t(o[k]);
      out[16 * t + 2 * k + 1] = uint16_t(o[k] >> 16);
    }
    return;
  }
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  for (int q = 0; q < 4; ++q) {
    const size_t i = 4 * t + q;
    const uint32_t w = words[q], codes4 = c * 0x01010101u;
    uint32_t lo = 0, hi = 0, m_lo = 0, m_hi = 0;
    switch (path) {
      case Mx8Bf16Decode::kConvertNarrow:
        lo = bf16x2_mul(e4m3x2_to_bf16x2_pow2(w), narrow_scale_factor<kConvertBias>(codes4, 0));
        hi = bf16x2_mul(e4m3x2_to_bf16x2_pow2(w >> 16), narrow_scale_factor<kConvertBias>(codes4, 3));
        break;
      case Mx8Bf16Decode::kConvertWide:
        scale_factors<kConvertBias>(c, m_lo, m_hi);
        lo = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_pow2(w), m_lo), m_hi);
        hi = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_pow2(w >> 16), m_lo), m_hi);
        break;
      case Mx8Bf16Decode::kIntegerNarrow:
        lo = bf16x2_mul(e4m3x2_to_bf16x2_shift120(w, 0x1404u), narrow_scale_factor<kIntBias>(codes4, 1));
        hi = bf16x2_mul(e4m3x2_to_bf16x2_shift120(w, 0x3424u), narrow_scale_factor<kIntBias>(codes4, 2));
        break;
      case Mx8Bf16Decode::kIntegerWide:
        scale_factors<kIntBias>(c, m_lo, m_hi);
        lo = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_shift120(w, 0x1404u), m_lo), m_hi);
        hi = bf16x2_mul(bf16x2_mul(e4m3x2_to_bf16x2_shift120(w, 0x3424u), m_lo), m_hi);
        break;
      default:
        break;
    }
    out[4 * i] = uint16_t(lo);
    out[4 * i + 1] = uint16_t(lo >> 16);
    out[4 * i + 2] = uint16_t(hi);
    out[4 * i + 3] = uint16_t(hi >> 16);
  }
}

__global__ void e4m3_encode_kernel(const float* in, uint8_t* out, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float_to_e4m3(in[i]);
}

__global__ void bf16_encode_kernel(const float* in, uint16_t* out, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float_to_bf16(in[i]);
}

// One thread per block of 32: two passes over the block's 64 bytes (the
// second from L1) instead of a local array, which would live in local memory.
__global__ void mxfp8_quantize_kernel(const uint16_t* in, size_t blocks, uint8_t* q,
                                      uint8_t* scales, MxScaleRule rule) {
  const size_t b = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const uint16_t* src = in + b * kMxBlock;
  float amax = 0.0f;
  for (int i = 0; i < kMxBlock; ++i) amax = fmaxf(amax, fabsf(bf16_to_float(src[i])));
  const uint8_t code = mx_scale_code(amax, rule);
  const float inv = mx_quantize_multiplier(code);
  for (int i = 0; i < kMxBlock; ++i) q[b * kMxBlock + i] = float_to_e4m3(bf16_to_float(src[i]) * inv);
  scales[b] = code;
}

// One thread per 16-byte piece of codes (and per scale chunk): the walks of
// core/mxfp8_tiling.h, which the host runs too. kUntile: tiled -> canonical.
template <bool kUntile, typename Tiling>
__global__ void tiling_kernel(Tiling t, size_t E, const uint8_t* q, const uint8_t* scales, uint8_t* out,
                              uint8_t* out_scales) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kUntile) untile_piece(t, E, i, q, scales, out, out_scales);
  else tile_piece(t, E, i, q, scales, out, out_scales);
}

template <bool kUntile, typename Tiling>
void launch_tiling(const Tiling& t, size_t E, const void* q, const uint8_t* scales, void* out, uint8_t* out_scales,
                   cudaStream_t stream) {
  const size_t n = tiling_pieces(t, E);
  if (n == 0) return;
  WD_CHECK(!kUntile || n <= UINT32_MAX, "untiling: ", n, " pieces of 16 bytes (a layer past 64 GiB) do not fit its "
           "32-bit index");
  tiling_kernel<kUntile><<<blocks_for(n), kThreads, 0, stream>>>(t, E, static_cast<const uint8_t*>(q), scales,
                                                                  static_cast<uint8_t*>(out), out_scales);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace

void tile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                        uint8_t* scales_tiled, cudaStream_t stream) {
  launch_tiling<false>(gate_up_walk(s, 1, "tile_mxfp8_gate_up", {q, scales, q_tiled, scales_tiled}),
                       s.experts, q, scales, q_tiled, scales_tiled, stream);
}

void tile_mxfp8_down(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                     uint8_t* scales_tiled, cudaStream_t stream) {
  launch_tiling<false>(down_walk(s, 1, "tile_mxfp8_down", {q, scales, q_tiled, scales_tiled}),
                       s.experts, q, scales, q_tiled, scales_tiled, stream);
}

void tile_bf16_down(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled, cudaStream_t stream) {
  launch_tiling<false>(down_walk(s, 2, "tile_bf16_down", {w, w_tiled}),
                       s.experts, w, nullptr, w_tiled, nullptr, stream);
}

void tile_bf16_gate_up(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled, cudaStream_t stream) {
  launch_tiling<false>(gate_up_walk(s, 2, "tile_bf16_gate_up", {w, w_tiled}),
                       s.experts, w, nullptr, w_tiled, nullptr, stream);
}

void untile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                          uint8_t* scales, cudaStream_t stream) {
  launch_tiling<true>(gate_up_walk(s, 1, "untile_mxfp8_gate_up", {q_tiled, scales_tiled, q, scales}),
                      s.experts, q_tiled, scales_tiled, q, scales, stream);
}

void untile_mxfp8_down(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                       uint8_t* scales, cudaStream_t stream) {
  launch_tiling<true>(down_walk(s, 1, "untile_mxfp8_down", {q_tiled, scales_tiled, q, scales}),
                      s.experts, q_tiled, scales_tiled, q, scales, stream);
}

void untile_bf16_down(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w, cudaStream_t stream) {
  launch_tiling<true>(down_walk(s, 2, "untile_bf16_down", {w_tiled, w}),
                      s.experts, w_tiled, nullptr, w, nullptr, stream);
}

void untile_bf16_gate_up(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w, cudaStream_t stream) {
  launch_tiling<true>(gate_up_walk(s, 2, "untile_bf16_gate_up", {w_tiled, w}),
                      s.experts, w_tiled, nullptr, w, nullptr, stream);
}

void e4m3_decode(const uint8_t* in, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  e4m3_decode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  WD_CUDA_CHECK_LAUNCH();
}

void mx8_bf16_decode(const uint8_t* codes, const uint8_t* scales, size_t n, Mx8Bf16Decode path, uint16_t* out,
                     cudaStream_t stream) {
  WD_CHECK(n % 16 == 0 && reinterpret_cast<uintptr_t>(codes) % 16 == 0,
           "mx8_bf16_decode: n = ", n, " must be a multiple of 16 and the codes 16-byte aligned");
  if (n == 0) return;
  mx8_bf16_decode_kernel<<<blocks_for(n / 16), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(codes), scales,
                                                                      n / 16, path, out);
  WD_CUDA_CHECK_LAUNCH();
}

void e4m3_encode(const float* in, uint8_t* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  e4m3_encode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  WD_CUDA_CHECK_LAUNCH();
}

void bf16_encode(const float* in, uint16_t* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  bf16_encode_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n);
  WD_CUDA_CHECK_LAUNCH();
}

uint8_t max_byte(const uint8_t* in, size_t n, cudaStream_t stream) {
  if (n == 0) return 0;
  DeviceBuffer<uint32_t> out(1);
  WD_CUDA_CHECK(cudaMemsetAsync(out.data(), 0, sizeof(uint32_t), stream));
  max_byte_kernel<<<std::min(blocks_for(n), 4096u), kThreads, 0, stream>>>(in, n, out.data());
  WD_CUDA_CHECK_LAUNCH();
  uint32_t v = 0;
  WD_CUDA_CHECK(cudaMemcpyAsync(&v, out.data(), sizeof v, cudaMemcpyDeviceToHost, stream));
  WD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return uint8_t(v);
}

void mxfp8_quantize(const uint16_t* in, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule, cudaStream_t stream) {
  WD_CHECK(cols % kMxBlock == 0, "mxfp8_quantize: row length ", cols,
           " is not a multiple of 32");
  const size_t blocks = rows * cols / kMxBlock;
  if (blocks == 0) return;
  mxfp8_quantize_kernel<<<blocks_for(blocks), kThreads, 0, stream>>>(in, blocks, q, scales, rule);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace wd::kernels
