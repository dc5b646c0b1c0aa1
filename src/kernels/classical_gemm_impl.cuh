// The grouped GEMM kernels of classical_gemm.cuh (read that header first),
// included by the per-format instantiation files only.
//
// Shared-memory layout of one pipeline stage (each region 1024-byte aligned,
// as wgmma's 128-byte swizzle needs):
//   W tile  BW rows × 128 B    row r at r·128, 16-byte chunk c at chunk c ^ (r % 8)
//   A tile  T rows × 128 B     same swizzle
//   a_scale T floats           W8A8: the A rows' scales of this 128-K block
//   w_scale 1 float            FP8 block-128: the (n-block, k-block) scale
//           BW × 4 E8M0 bytes  MXFP8: each row's 4 scales of this stage
// The swizzle makes both the 16-byte cp.async writes and the 8-row ldmatrix
// reads bank-conflict free.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/classical_wgmma.cuh"
#include "warpdecode/formats.h"

namespace wd::kernels::gemm {

constexpr int kRowBytes = 128;  // K bytes of one row per pipeline stage

// Tile shapes. BW weight rows × T token rows per block; warps WW × WT each own
// (BW/WW) × (T/WT) outputs (mma.sync) or, for wgmma, 2 warpgroups own 64
// weight rows each across all T tokens. Registers: acc BW·T/threads floats
// (+ as many again for FP8 promotion).
template <int kTileTokens, bool kWgmma>
struct Tile;
template <> struct Tile<8, false>   { static constexpr int kBW = 64,  kWW = 4, kWT = 1, kStages = 6, kMinBlocks = 3; };
template <> struct Tile<16, false>  { static constexpr int kBW = 64,  kWW = 4, kWT = 1, kStages = 6, kMinBlocks = 3; };
template <> struct Tile<32, false>  { static constexpr int kBW = 64,  kWW = 4, kWT = 1, kStages = 5, kMinBlocks = 3; };
template <> struct Tile<64, false>  { static constexpr int kBW = 128, kWW = 4, kWT = 2, kStages = 4, kMinBlocks = 1; };
template <> struct Tile<128, false> { static constexpr int kBW = 128, kWW = 2, kWT = 4, kStages = 4, kMinBlocks = 1; };
template <> struct Tile<64, true>   { static constexpr int kBW = 128, kWW = 8, kWT = 1, kStages = 4, kMinBlocks = 1; };
template <> struct Tile<128, true>  { static constexpr int kBW = 128, kWW = 8, kWT = 1, kStages = 4, kMinBlocks = 1; };

template <WeightFormat F, int kT, bool kWgmma>
struct Config {
  using TileT = Tile<kT, kWgmma>;
  static constexpr int kBW = TileT::kBW, kWW = TileT::kWW, kWT = TileT::kWT;
  static constexpr int kStages = TileT::kStages, kMinBlocks = TileT::kMinBlocks;
  static constexpr int kWarps = kWW * kWT, kThreads = kWarps * 32;
  static constexpr bool kFp8 = F != WeightFormat::kBF16;
  static constexpr bool kMx = F == WeightFormat::kMXFP8;
  static constexpr int kElemBytes = kFp8 ? 1 : 2;
  static constexpr int kStageK = kRowBytes / kElemBytes;  // K elements per stage
  static constexpr int kWM = kBW / kWW, kWN = kT / kWT;   // warp tile (weight rows × tokens)
  static constexpr int kMT = kWM / 16, kNT = kWN / 8;     // m16 × n8 tiles per warp
  static constexpr int kAcc = kMT * kNT * 4;
  // Stage regions (bytes).
  static constexpr int kWBytes = kBW * kRowBytes;
  static constexpr int kABytes = kT * kRowBytes;
  static constexpr int kAScaleBytes = kFp8 ? ((kT * 4 + 15) / 16) * 16 : 0;
  static constexpr int kWScaleBytes = !kFp8 ? 0 : (kMx ? kBW * 4 : 16);
  static constexpr int kWOff = 0;
  static constexpr int kAOff = kStages * kWBytes;
  static constexpr int kAScaleOff = kAOff + kStages * kABytes;
  static constexpr int kWScaleOff = kAScaleOff + kStages * kAScaleBytes;
  static constexpr int kPipeBytes = kWScaleOff + kStages * kWScaleBytes;
  // Epilogue: the (T × BW) output tile staged in shared memory, rows padded.
  static constexpr int kOutPitchMax = kBW * 4 + 16;
  static constexpr int kSmemBytes = (kPipeBytes > kT * kOutPitchMax ? kPipeBytes : kT * kOutPitchMax) + 1024;

  static_assert(kWM % 16 == 0 && kWN % 8 == 0, "warp tile must be whole m16 x n8 tiles");
  static_assert(kNT == 1 || kNT % 2 == 0, "B fragments are loaded two n-tiles at a time");
  static_assert(kWBytes % 1024 == 0 && kABytes % 1024 == 0, "tiles must keep 1024-byte alignment");
  static_assert(!kWgmma || (kBW == 128 && kWW == 8 && kWT == 1 && kMT == 1), "wgmma: 2 warpgroups x 64 rows");
  static_assert(!kFp8 || kBW <= 128, "FP8 block-128: one weight scale per block");
};

// ---- PTX helpers ---------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes = 0 writes zeros (rows or K past the end).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(pred ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// d = a·b + c on one m16n8 tile: k16 of BF16 or k32 of E4M3 (both 32 bytes of K).
template <bool kFp8>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                    const float (&c)[4]) {
  if constexpr (kFp8) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  }
}

// Byte address of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ __forceinline__ uint32_t swz(uint32_t tile, int row, int chunk) {
  return tile + uint32_t(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// ---- the kernel ------------------------------------------------------------------
template <WeightFormat F, int kT, bool kWgmma>
__global__ void __launch_bounds__(Config<F, kT, kWgmma>::kThreads, Config<F, kT, kWgmma>::kMinBlocks)
    grouped_gemm_kernel(const __grid_constant__ GroupedGemmParams p) {
  using C = Config<F, kT, kWgmma>;
#if defined(__CUDA_ARCH__)
  if constexpr (kWgmma && !WD_WGMMA_AVAILABLE) {
    __trap();  // the host never launches wgmma kernels on other architectures
  } else {
  const int blk = blockIdx.x;
  if (p.num_blocks != nullptr && blk >= __ldg(p.num_blocks)) return;
  const int expert = p.block_expert != nullptr ? __ldg(p.block_expert + blk) : 0;
  const int n0 = blockIdx.y * C::kBW;
  const int row0 = blk * kT;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = (smem_u32(smem_raw) + 1023u) & ~1023u;
  uint8_t* smem_ptr = smem_raw + (smem - smem_u32(smem_raw));

  const int N = p.n, K = p.k;
  const size_t k_bytes = size_t(K) * C::kElemBytes;  // bytes of one row
  const int k_tiles = int((k_bytes + kRowBytes - 1) / kRowBytes);
  const uint8_t* w_base = static_cast<const uint8_t*>(p.w) + size_t(expert) * N * k_bytes;
  const uint8_t* a_base = static_cast<const uint8_t*>(p.a);

  // Producer: every thread issues a share of the stage's 16-byte copies.
  auto load_stage = [&](int slot, int kt) {
    const bool live = kt < k_tiles;
    const uint32_t sw = smem + C::kWOff + slot * C::kWBytes;
    const uint32_t sa = smem + C::kAOff + slot * C::kABytes;
#pragma unroll
    for (int c = tid; c < C::kBW * 8; c += C::kThreads) {
      const int r = c >> 3, ch = c & 7;
      const size_t kb = size_t(kt) * kRowBytes + ch * 16;
      const bool ok = live && n0 + r < N && kb < k_bytes;
      const uint8_t* src = ok ? w_base + size_t(n0 + r) * k_bytes + kb : w_base;
      if (live) cp_async16(swz(sw, r, ch), src, ok);
    }
#pragma unroll
    for (int c = tid; c < kT * 8; c += C::kThreads) {
      const int r = c >> 3, ch = c & 7;
      const size_t kb = size_t(kt) * kRowBytes + ch * 16;
      const bool ok = live && row0 + r < p.rows && kb < k_bytes;
      const uint8_t* src = ok ? a_base + size_t(row0 + r) * k_bytes + kb : a_base;
      if (live) cp_async16(swz(sa, r, ch), src, ok);
    }
    if constexpr (C::kFp8) {
      const int kblocks = K / 128;
      for (int c = tid; c < kT; c += C::kThreads) {
        const bool ok = live && row0 + c < p.rows;
        const float* src = ok ? p.a_scales + size_t(row0 + c) * kblocks + kt : p.a_scales;
        if (live) cp_async4(smem + C::kAScaleOff + slot * C::kAScaleBytes + c * 4, src, ok);
      }
      if constexpr (C::kMx) {
        const int kgroups = K / 32;
        for (int c = tid; c < C::kBW; c += C::kThreads) {
          const bool ok = live && n0 + c < N;
          const uint8_t* src = ok ? p.w_mx_scales + (size_t(expert) * N + n0 + c) * kgroups + kt * 4 : p.w_mx_scales;
          if (live) cp_async4(smem + C::kWScaleOff + slot * C::kWScaleBytes + c * 4, src, ok);
        }
      } else {
        if (tid == 0 && live)
          cp_async4(smem + C::kWScaleOff + slot * C::kWScaleBytes,
                    p.w_block_scales + (size_t(expert) * (N / 128) + n0 / 128) * kblocks + kt, true);
      }
    }
  };

  float acc[C::kAcc];
#pragma unroll
  for (int i = 0; i < C::kAcc; ++i) acc[i] = 0.0f;

  const int warp_w = warp % C::kWW, warp_t = warp / C::kWW;
  const int wrow0 = warp_w * C::kWM, wtok0 = warp_t * C::kWN;
  const int g = lane >> 2, t4 = lane & 3;

  // acc += tmp · sw(row) · sa(token) for this thread's fragment elements.
  // Elements 0,1 are row g, tokens 2t, 2t+1; elements 2,3 row g+8.
  auto promote = [&](const float* tmp, int slot, int ks) {
    const float* sas = reinterpret_cast<const float*>(smem_ptr + C::kAScaleOff + slot * C::kAScaleBytes);
    const uint8_t* wsb = smem_ptr + C::kWScaleOff + slot * C::kWScaleBytes;
#pragma unroll
    for (int mt = 0; mt < C::kMT; ++mt) {
      float s_lo, s_hi;
      if constexpr (C::kMx) {
        const int r = wrow0 + mt * 16 + g;
        s_lo = e8m0_to_float(wsb[r * 4 + ks]);
        s_hi = e8m0_to_float(wsb[(r + 8) * 4 + ks]);
      } else {
        s_lo = s_hi = *reinterpret_cast<const float*>(wsb);
      }
#pragma unroll
      for (int nt = 0; nt < C::kNT; ++nt) {
        const int tok = wtok0 + nt * 8 + 2 * t4;
        const float a0 = sas[tok], a1 = sas[tok + 1];
        float* d = acc + (mt * C::kNT + nt) * 4;
        const float* s = tmp + (mt * C::kNT + nt) * 4;
        d[0] = __fmaf_rn(s[0], s_lo * a0, d[0]);
        d[1] = __fmaf_rn(s[1], s_lo * a1, d[1]);
        d[2] = __fmaf_rn(s[2], s_hi * a0, d[2]);
        d[3] = __fmaf_rn(s[3], s_hi * a1, d[3]);
      }
    }
  };

  // Consumer (mma.sync): 4 K steps of 32 bytes per stage.
  auto compute_mma = [&](int slot) {
    const uint32_t sw = smem + C::kWOff + slot * C::kWBytes;
    const uint32_t sa = smem + C::kAOff + slot * C::kABytes;
    float tmp[C::kFp8 ? C::kAcc : 1];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      uint32_t af[C::kMT][4];
      uint32_t bf[C::kNT][2];
#pragma unroll
      for (int mt = 0; mt < C::kMT; ++mt)
        ldmatrix_x4(af[mt], swz(sw, wrow0 + mt * 16 + (lane & 15), 2 * ks + (lane >> 4)));
      if constexpr (C::kNT == 1) {
        ldmatrix_x2(bf[0][0], bf[0][1], swz(sa, wtok0 + (lane & 7), 2 * ks + ((lane >> 3) & 1)));
      } else {
#pragma unroll
        for (int np = 0; np < C::kNT / 2; ++np) {
          uint32_t r[4];
          ldmatrix_x4(r, swz(sa, wtok0 + np * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1)));
          bf[2 * np][0] = r[0];
          bf[2 * np][1] = r[1];
          bf[2 * np + 1][0] = r[2];
          bf[2 * np + 1][1] = r[3];
        }
      }
      if constexpr (!C::kFp8) {
#pragma unroll
        for (int mt = 0; mt < C::kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < C::kNT; ++nt) {
            float* d = acc + (mt * C::kNT + nt) * 4;
            float c[4] = {d[0], d[1], d[2], d[3]};
            float o[4];
            mma<false>(o, af[mt], bf[nt][0], bf[nt][1], c);
            d[0] = o[0], d[1] = o[1], d[2] = o[2], d[3] = o[3];
          }
      } else {
        // FP8 block-128: sum the 4 K steps of the stage, then promote once.
        // MXFP8: promote every K step (each is one 32-element scale block).
        const bool fresh = C::kMx || ks == 0;
#pragma unroll
        for (int mt = 0; mt < C::kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < C::kNT; ++nt) {
            float* d = tmp + (mt * C::kNT + nt) * 4;
            float c[4] = {fresh ? 0.0f : d[0], fresh ? 0.0f : d[1], fresh ? 0.0f : d[2], fresh ? 0.0f : d[3]};
            float o[4];
            mma<true>(o, af[mt], bf[nt][0], bf[nt][1], c);
            d[0] = o[0], d[1] = o[1], d[2] = o[2], d[3] = o[3];
          }
        if (C::kMx || ks == 3) promote(tmp, slot, ks);
      }
    }
  };

#if WD_WGMMA_AVAILABLE
  // Consumer (wgmma): warpgroup wg owns weight rows [64·wg, 64·wg+64).
  auto compute_wgmma = [&](int slot) {
    if constexpr (kWgmma) {
    const int wg = warp >> 2;
    const uint64_t da = wgmma::sw128_desc(smem + C::kWOff + slot * C::kWBytes + wg * 64 * kRowBytes);
    const uint64_t db = wgmma::sw128_desc(smem + C::kAOff + slot * C::kABytes);
    float tmp[C::kFp8 ? C::kAcc : 1];
    if constexpr (!C::kFp8) {
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if constexpr (kT == 128) wgmma::wgmma_m64n128_bf16(acc, da + 2 * ks, db + 2 * ks, 1);
        else wgmma::wgmma_m64n64_bf16(acc, da + 2 * ks, db + 2 * ks, 1);
      }
      wgmma::commit();
      wgmma::wait<0>();
    } else {
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        if (C::kMx || ks == 0) wgmma::fence();
        if constexpr (kT == 128) wgmma::wgmma_m64n128_e4m3(tmp, da + 2 * ks, db + 2 * ks, (C::kMx || ks == 0) ? 0 : 1);
        else wgmma::wgmma_m64n64_e4m3(tmp, da + 2 * ks, db + 2 * ks, (C::kMx || ks == 0) ? 0 : 1);
        if (C::kMx || ks == 3) {
          wgmma::commit();
          wgmma::wait<0>();
          promote(tmp, slot, ks);
        }
      }
    }
    }
  };
#endif

  // Multistage pipeline: stages kt+1 .. kt+kStages-1 are in flight while kt is consumed.
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    load_stage(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<C::kStages - 2>();
#if WD_WGMMA_AVAILABLE
    if constexpr (kWgmma) wgmma::fence_proxy_async();
#endif
    __syncthreads();  // stage kt visible to all; stage kt-1 fully consumed
    load_stage((kt + C::kStages - 1) % C::kStages, kt + C::kStages - 1);
    cp_async_commit();
    if constexpr (kWgmma) {
#if WD_WGMMA_AVAILABLE
      compute_wgmma(kt % C::kStages);
#endif
    } else {
      compute_mma(kt % C::kStages);
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // Epilogue: stage the (T × BW) tile through shared memory, then 16-byte
  // row-contiguous stores.
  const int out_bytes = p.out_fp32 ? 4 : 2;
  const int pitch = C::kBW * out_bytes + 16;
#pragma unroll
  for (int mt = 0; mt < C::kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::kNT; ++nt) {
      const float* d = acc + (mt * C::kNT + nt) * 4;
      const int r = wrow0 + mt * 16 + g, tok = wtok0 + nt * 8 + 2 * t4;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int rr = r + (j >> 1) * 8, tt = tok + (j & 1);
        uint8_t* dst = smem_ptr + tt * pitch + rr * out_bytes;
        if (p.out_fp32) *reinterpret_cast<float*>(dst) = d[j];
        else *reinterpret_cast<uint16_t*>(dst) = float_to_bf16(d[j]);
      }
    }
  __syncthreads();
  const int chunks_per_row = C::kBW * out_bytes / 16;
  const int elems_per_chunk = 16 / out_bytes;
  const bool vec = (size_t(N) * out_bytes) % 16 == 0;  // rows 16-byte aligned
  for (int c = tid; c < kT * chunks_per_row; c += C::kThreads) {
    const int tt = c / chunks_per_row, ch = c % chunks_per_row;
    const int row = row0 + tt, col = n0 + ch * elems_per_chunk;
    if (row >= p.rows || col >= N) continue;
    const uint8_t* src = smem_ptr + tt * pitch + ch * 16;
    uint8_t* dst = static_cast<uint8_t*>(p.out) + (size_t(row) * N + col) * out_bytes;
    if (vec && col + elems_per_chunk <= N) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int e = 0; e < elems_per_chunk && col + e < N; ++e)
        for (int b = 0; b < out_bytes; ++b) dst[e * out_bytes + b] = src[e * out_bytes + b];
    }
  }
  }
#endif
}

// Host launcher of one instantiation.
template <WeightFormat F, int kT, bool kWgmma>
void launch(const GroupedGemmParams& p, cudaStream_t stream) {
  using C = Config<F, kT, kWgmma>;
  auto kernel = grouped_gemm_kernel<F, kT, kWgmma>;
  static const bool attribute_set = [&] {
    WD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes));
    return true;
  }();
  (void)attribute_set;
  const dim3 grid(unsigned(p.max_blocks), unsigned((p.n + C::kBW - 1) / C::kBW));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(p);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace wd::kernels::gemm

// Explicit instantiations live in classical_gemm_{bf16,fp8}.cu.
#define WD_CLASSICAL_GEMM_INSTANCES(F)                                                   \
  template void launch<F, 8, false>(const GroupedGemmParams&, cudaStream_t);            \
  template void launch<F, 16, false>(const GroupedGemmParams&, cudaStream_t);           \
  template void launch<F, 32, false>(const GroupedGemmParams&, cudaStream_t);           \
  template void launch<F, 64, false>(const GroupedGemmParams&, cudaStream_t);           \
  template void launch<F, 128, false>(const GroupedGemmParams&, cudaStream_t);          \
  template void launch<F, 64, true>(const GroupedGemmParams&, cudaStream_t);            \
  template void launch<F, 128, true>(const GroupedGemmParams&, cudaStream_t);
