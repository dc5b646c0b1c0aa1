// Decode throughput of the weight formats on this GPU: how many weights per
// clock per SM each decoder turns into FP32 and multiplies into an FMA chain,
// with the weights already on chip (shared memory), so that only the
// instruction cost is measured. Decides the MXFP8 decoder of the warp-decode
// kernels (docs/PERF_LOG.md).
//
//   build/bench/decode_rate
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/common.cuh"

namespace {

using namespace wd::kernels;

constexpr int kThreads = 256;
constexpr int kIters = 4096;

enum Variant { kBf16, kE4m3Cvt, kE4m3Int, kE4m3CvtInt };

// E4M3 x4 -> float via integer bit placement, then an exact ×2^120 (the bits
// alone would be the value ×2^-120: FP32 subnormals for small codes).
__device__ __forceinline__ void e4m3x4_int(uint32_t w, float* f) {
  f[3] = __uint_as_float((w & 0x80000000u) | ((w >> 4) & 0x07F00000u)) * 0x1p120f;
  f[2] = __uint_as_float(((w << 8) & 0x80000000u) | ((w << 4) & 0x07F00000u)) * 0x1p120f;
  f[1] = __uint_as_float(((w << 16) & 0x80000000u) | ((w << 12) & 0x07F00000u)) * 0x1p120f;
  f[0] = __uint_as_float(((w << 24) & 0x80000000u) | ((w << 20) & 0x07F00000u)) * 0x1p120f;
}

// E4M3 x2 -> F16 x2 with the hardware converter, then F16 -> F32 by bits.
__device__ __forceinline__ void e4m3x2_cvt_int(uint32_t two, float* f) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu), __NV_E4M3);
  const uint32_t v = uint32_t(h.x) | (uint32_t(h.y) << 16);
  f[0] = __uint_as_float(((v << 16) & 0x80000000u) | ((v << 13) & 0x0FFFE000u)) * 0x1p112f;
  f[1] = __uint_as_float((v & 0x80000000u) | ((v >> 3) & 0x0FFFE000u)) * 0x1p112f;
}

template <Variant V>
__global__ void __launch_bounds__(kThreads) decode_kernel(const uint4* src, float* out, float xv) {
  __shared__ uint4 s[kThreads * 4];
  for (int i = threadIdx.x; i < kThreads * 4; i += kThreads) s[i] = src[i];
  __syncthreads();
  float acc0 = 0, acc1 = 0;
  for (int it = 0; it < kIters; ++it) {
    const uint4 r = s[(threadIdx.x + it) & (kThreads * 4 - 1)];
    const uint32_t v[4] = {r.x, r.y, r.z, r.w};
    float w[16];
    if constexpr (V == kBf16) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        w[2 * i] = bf16_lo(v[i]);
        w[2 * i + 1] = bf16_hi(v[i]);
      }
    } else if constexpr (V == kE4m3Cvt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = e4m3x2_to_float2(v[i]), b = e4m3x2_to_float2(v[i] >> 16);
        w[4 * i] = a.x; w[4 * i + 1] = a.y; w[4 * i + 2] = b.x; w[4 * i + 3] = b.y;
      }
    } else if constexpr (V == kE4m3Int) {
#pragma unroll
      for (int i = 0; i < 4; ++i) e4m3x4_int(v[i], w + 4 * i);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        e4m3x2_cvt_int(v[i], w + 4 * i);
        e4m3x2_cvt_int(v[i] >> 16, w + 4 * i + 2);
      }
    }
    constexpr int kElems = V == kBf16 ? 8 : 16;
#pragma unroll
    for (int i = 0; i < kElems; i += 2) {
      acc0 = __fmaf_rn(w[i], xv, acc0);
      acc1 = __fmaf_rn(w[i + 1], xv, acc1);
    }
  }
  out[blockIdx.x * kThreads + threadIdx.x] = acc0 + acc1;
}

template <Variant V>
double rate(const char* name, int elems_per_iter, const uint4* src, float* out, int blocks, int sms, int clock_khz) {
  cudaEvent_t a, b;
  WD_CUDA_CHECK(cudaEventCreate(&a));
  WD_CUDA_CHECK(cudaEventCreate(&b));
  decode_kernel<V><<<blocks, kThreads>>>(src, out, 1.0f);  // warm-up
  WD_CUDA_CHECK_LAUNCH();
  WD_CUDA_CHECK(cudaEventRecord(a));
  decode_kernel<V><<<blocks, kThreads>>>(src, out, 1.0f);
  WD_CUDA_CHECK_LAUNCH();
  WD_CUDA_CHECK(cudaEventRecord(b));
  WD_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  WD_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  const double elems = double(blocks) * kThreads * kIters * elems_per_iter;
  const double per_clk_sm = elems / (ms * 1e-3) / (double(clock_khz) * 1e3) / sms;
  std::printf("%-28s %8.3f ms  %7.1f weights/clk/SM  (%.0f G weights/s)\n", name, ms, per_clk_sm, elems / ms / 1e6);
  WD_CUDA_CHECK(cudaEventDestroy(a));
  WD_CUDA_CHECK(cudaEventDestroy(b));
  return per_clk_sm;
}

}  // namespace

int main() {
  int sms = 0, clk = 0;
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  const int blocks = sms * 8;
  wd::DeviceBuffer<uint4> src(kThreads * 4);
  wd::DeviceBuffer<float> out(size_t(blocks) * kThreads);
  src.fill_bytes(0x3C);  // finite codes in every format
  std::printf("# decode rate, %d SMs, max clock %d MHz (rates per clock use the max clock)\n", sms, clk / 1000);
  std::printf("# HBM at 4.5 TB/s needs %.1f BF16 or %.1f E4M3 weights/clk/SM\n", 4.5e12 / 2 / (clk * 1e3) / sms,
              4.5e12 / (clk * 1e3) / sms);
  rate<kBf16>("bf16 unpack", 8, src.data(), out.data(), blocks, sms, clk);
  rate<kE4m3Cvt>("e4m3 cvt f16x2 + cvt f32", 16, src.data(), out.data(), blocks, sms, clk);
  rate<kE4m3Int>("e4m3 int bits + fmul", 16, src.data(), out.data(), blocks, sms, clk);
  rate<kE4m3CvtInt>("e4m3 cvt f16x2 + int f32", 16, src.data(), out.data(), blocks, sms, clk);
  WD_CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
