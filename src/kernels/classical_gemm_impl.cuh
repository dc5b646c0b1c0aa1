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

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/launch.cuh"
#include "kernels/classical_wgmma.cuh"
#include "kernels/common.cuh"
#include "warpdecode/formats.h"

namespace wd::kernels::gemm {

constexpr int kRowBytes = 128;  // K bytes of one row per pipeline stage

// Tile shapes and pipelines (evidence: docs/CLASSICAL.md, perf log).
//   mma.sync, T <= 32 (decode): BW = 64 weight rows, 4 warps each 16 rows x T
//     tokens; persistent blocks walk their tiles with one continuous cp.async
//     stream (short per-tile blocks drained the pipeline: FP8 down GEMM at
//     2.0 TB/s in run 1), 8-10 stages deep, 2 blocks per SM.
//   mma.sync, T = 64 / 128: BW = 128, 8 warps; one tile per block.
//   wgmma (sm_90a), T = 64 / 128: BW = 128, 2 warpgroups x 64 weight rows x T
//     tokens; wgmma stays in flight across the stage barrier.
template <WeightFormat F, int kT, bool kWgmma>
struct Config {
  static constexpr bool kFp8 = F != WeightFormat::kBF16;
  static constexpr bool kMx = F == WeightFormat::kMXFP8;
  static constexpr bool kPersistent = !kWgmma && kT <= 32;
  // FP8 at T = 128 on mma.sync: 64 weight rows, so that the accumulators and
  // the per-stage partial sums (2 x 32 floats a thread) fit without spilling.
  static constexpr bool kNarrow = !kWgmma && kFp8 && kT == 128;
  static constexpr int kBW = kWgmma ? 128 : ((kT <= 32 || kNarrow) ? 64 : 128);
  static constexpr int kWW = kWgmma ? 8 : (kT <= 32 ? 4 : (kT == 64 || kNarrow ? 4 : 2));
  static constexpr int kWT = kWgmma ? 1 : (kT <= 32 ? 1 : (kT == 64 || kNarrow ? 2 : 4));
  static constexpr int kStages = kWgmma ? (kFp8 ? (kT == 128 ? 5 : 4) : 3) : (kT <= 16 ? 10 : (kT == 32 ? 8 : 4));
  static_assert(kStages >= 3, "the wgmma refill of slot kt-1 needs 3 stages");
  static constexpr int kMinBlocks = kWgmma ? (kFp8 ? 1 : 2) : (kT <= 32 ? 2 : 1);
  static constexpr int kWarps = kWW * kWT, kThreads = kWarps * 32;
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
  // Epilogue: the (T × BW) output tile staged in shared memory, rows padded;
  // its own region when blocks are persistent (loads of the next tile are in
  // flight during the epilogue), else the pipeline's.
  static constexpr int kOutPitchMax = kBW * 4 + 16;
  static constexpr int kStageOff = kPersistent ? kPipeBytes : 0;
  static constexpr int kStagingBytes = kT * kOutPitchMax;
  static constexpr int kUsed = kPersistent ? kPipeBytes + kStagingBytes
                                           : (kPipeBytes > kStagingBytes ? kPipeBytes : kStagingBytes);
  static constexpr int kSmemBytes = kUsed + 1024;  // + alignment of the base to 1024

  static_assert(kWM % 16 == 0 && kWN % 8 == 0, "warp tile must be whole m16 x n8 tiles");
  static_assert(kNT == 1 || kNT % 2 == 0, "B fragments are loaded two n-tiles at a time");
  static_assert(kWBytes % 1024 == 0 && kABytes % 1024 == 0, "tiles must keep 1024-byte alignment");
  static_assert(!kWgmma || (kBW == 128 && kWW == 8 && kWT == 1 && kMT == 1), "wgmma: 2 warpgroups x 64 rows");
  static_assert(!kFp8 || kBW <= 128, "FP8 block-128: one weight scale per block");
  static_assert(kSmemBytes * kMinBlocks <= 227 * 1024, "shared memory of kMinBlocks blocks per SM");
};

// ---- PTX helpers ---------------------------------------------------------------

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
  const int N = p.n, K = p.k;
  const int ntn = (N + C::kBW - 1) / C::kBW;  // weight-row tiles
  // The block table comes from the align stage, complete before this kernel
  // starts even under PDL (the kernel before us waited for it before letting
  // us start); L2-coherent loads, as an L1 line from an earlier call could
  // be stale.
  const int nb = p.num_blocks != nullptr ? __ldcg(p.num_blocks) : p.max_blocks;
  // This block's tiles: persistent blocks take t = blockIdx.x + j·gridDim.x
  // of the nb·ntn tiles (t = block·ntn + weight tile); others their one tile.
  int my_tiles;
  if constexpr (C::kPersistent) {
    const int total = nb * ntn;
    my_tiles = int(blockIdx.x) < total ? (total - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  } else {
    my_tiles = int(blockIdx.x) < nb ? 1 : 0;
  }
  if (my_tiles == 0) {
    wait_for_previous_kernel();  // a kernel's completion must imply its predecessor's
    return;
  }
  struct Coord {
    int row0, n0, expert;
  };
  auto coord = [&](int j) {
    const int t = C::kPersistent ? int(blockIdx.x) + j * int(gridDim.x) : int(blockIdx.x) * ntn + int(blockIdx.y);
    const int blk = t / ntn;
    Coord c;
    c.row0 = blk * kT;
    c.n0 = (t % ntn) * C::kBW;
    c.expert = p.block_expert != nullptr ? __ldcg(p.block_expert + blk) : 0;
    return c;
  };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = (smem_u32(smem_raw) + 1023u) & ~1023u;
  uint8_t* smem_ptr = smem_raw + (smem - smem_u32(smem_raw));

  const size_t k_bytes = size_t(K) * C::kElemBytes;  // bytes of one row
  const int k_tiles = int((k_bytes + kRowBytes - 1) / kRowBytes);
  const int steps = my_tiles * k_tiles;
  const uint8_t* a_base = static_cast<const uint8_t*>(p.a);

  // Producer: the stages of all this block's tiles in order, every thread
  // issuing a share of each stage's 16-byte copies. The weight part of a
  // stage (and its scales) reads only layer inputs; the activation part reads
  // the previous stage's output.
  struct Prod {
    int step, kt, j;
    Coord c;
  };
  auto advance = [&](Prod& st) {
    ++st.step;
    if (++st.kt == k_tiles) {
      st.kt = 0;
      if (++st.j < my_tiles) st.c = coord(st.j);
    }
  };
  auto issue = [&](int slot, const Prod& st, bool weights, bool activations) {
    if (st.step >= steps) return;
    const int kt = st.kt;
    const Coord& c = st.c;
    if (weights) {
      const uint8_t* w_base = static_cast<const uint8_t*>(p.w) + size_t(c.expert) * N * k_bytes;
      const uint32_t sw = smem + C::kWOff + slot * C::kWBytes;
#pragma unroll 1
      for (int i = tid; i < C::kBW * 8; i += C::kThreads) {
        const int r = i >> 3, ch = i & 7;
        const size_t kb = size_t(kt) * kRowBytes + ch * 16;
        const bool ok = c.n0 + r < N && kb < k_bytes;
        cp_async16(swz(sw, r, ch), ok ? w_base + size_t(c.n0 + r) * k_bytes + kb : w_base, ok);
      }
      if constexpr (C::kMx) {
        const int kgroups = K / 32;
        for (int i = tid; i < C::kBW; i += C::kThreads) {
          const bool ok = c.n0 + i < N;
          cp_async4(smem + C::kWScaleOff + slot * C::kWScaleBytes + i * 4,
                    ok ? p.w_mx_scales + (size_t(c.expert) * N + c.n0 + i) * kgroups + kt * 4 : p.w_mx_scales, ok);
        }
      } else if constexpr (C::kFp8) {
        if (tid == 0)
          cp_async4(smem + C::kWScaleOff + slot * C::kWScaleBytes,
                    p.w_block_scales + (size_t(c.expert) * (N / 128) + c.n0 / 128) * (K / 128) + kt, true);
      }
    }
    if (activations) {
      const uint32_t sa = smem + C::kAOff + slot * C::kABytes;
#pragma unroll 1
      for (int i = tid; i < kT * 8; i += C::kThreads) {
        const int r = i >> 3, ch = i & 7;
        const size_t kb = size_t(kt) * kRowBytes + ch * 16;
        const bool ok = c.row0 + r < p.rows && kb < k_bytes;
        cp_async16(swz(sa, r, ch), ok ? a_base + size_t(c.row0 + r) * k_bytes + kb : a_base, ok);
      }
      if constexpr (C::kFp8) {
        const int kblocks = K / 128;
        for (int i = tid; i < kT; i += C::kThreads) {
          const bool ok = c.row0 + i < p.rows;
          cp_async4(smem + C::kAScaleOff + slot * C::kAScaleBytes + i * 4,
                    ok ? p.a_scales + size_t(c.row0 + i) * kblocks + kt : p.a_scales, ok);
        }
      }
    }
  };
  Prod ld{0, 0, 0, coord(0)};
  auto load_next = [&](int slot) {
    issue(slot, ld, true, true);
    advance(ld);
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

  // Epilogue of tile c: stage the (T × BW) tile through shared memory, then
  // 16-byte row-contiguous stores; the accumulators are zeroed for the next.
  auto epilogue = [&](const Coord& c) {
    if constexpr (!C::kPersistent) {
      cp_async_wait<0>();
      __syncthreads();  // the staging area is the pipeline's
    }
    uint8_t* stg = smem_ptr + C::kStageOff;
    const int out_bytes = p.out_fp32 ? 4 : 2;
    const int pitch = C::kBW * out_bytes + 16;
#pragma unroll
    for (int mt = 0; mt < C::kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < C::kNT; ++nt) {
        float* d = acc + (mt * C::kNT + nt) * 4;
        const int r = wrow0 + mt * 16 + g, tok = wtok0 + nt * 8 + 2 * t4;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int rr = r + (j >> 1) * 8, tt = tok + (j & 1);
          uint8_t* dst = stg + tt * pitch + rr * out_bytes;
          if (p.out_fp32) *reinterpret_cast<float*>(dst) = d[j];
          else *reinterpret_cast<uint16_t*>(dst) = float_to_bf16(d[j]);
          d[j] = 0.0f;
        }
      }
    __syncthreads();
    const int chunks_per_row = C::kBW * out_bytes / 16;
    const int elems_per_chunk = 16 / out_bytes;
    const bool vec = (size_t(N) * out_bytes) % 16 == 0;  // rows 16-byte aligned
    for (int i = tid; i < kT * chunks_per_row; i += C::kThreads) {
      const int tt = i / chunks_per_row, ch = i % chunks_per_row;
      const int row = c.row0 + tt, col = c.n0 + ch * elems_per_chunk;
      if (row >= p.rows || col >= N) continue;
      const uint8_t* src = stg + tt * pitch + ch * 16;
      uint8_t* dst = static_cast<uint8_t*>(p.out) + (size_t(row) * N + col) * out_bytes;
      if (vec && col + elems_per_chunk <= N) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        for (int e = 0; e < elems_per_chunk && col + e < N; ++e)
          for (int b = 0; b < out_bytes; ++b) dst[e * out_bytes + b] = src[e * out_bytes + b];
      }
    }
  };

  // Prologue: the weights of the first stages stream while the previous
  // kernel finishes (PDL); then its output, the activation rows.
  {
    Prod pw = ld;
#pragma unroll
    for (int s = 0; s < C::kStages - 1; ++s) {
      issue(s, pw, true, false);
      advance(pw);
    }
  }
  wait_for_previous_kernel();
  allow_next_kernel();
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    issue(s, ld, false, true);
    advance(ld);
    cp_async_commit();  // group s: (all the prologue's weights and) stage s's activations
  }

  if constexpr (!kWgmma) {
    // mma.sync: 4 K steps of 32 bytes per stage; stages s+1 .. s+kStages-1
    // are in flight while s is consumed, across tile boundaries.
    auto compute = [&](int slot) {
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
        // FP8 block-128: the 4 K steps of a stage summed, then promoted once;
        // MXFP8: every K step is one 32-element scale block, promoted alone.
        const bool fresh = C::kMx || ks == 0;
#pragma unroll
        for (int mt = 0; mt < C::kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < C::kNT; ++nt) {
            float* d = (C::kFp8 ? tmp : acc) + (mt * C::kNT + nt) * 4;
            const bool zero = C::kFp8 && fresh;
            float cin[4] = {zero ? 0.0f : d[0], zero ? 0.0f : d[1], zero ? 0.0f : d[2], zero ? 0.0f : d[3]};
            float o[4];
            mma<C::kFp8>(o, af[mt], bf[nt][0], bf[nt][1], cin);
            d[0] = o[0], d[1] = o[1], d[2] = o[2], d[3] = o[3];
          }
        if constexpr (C::kFp8)
          if (C::kMx || ks == 3) promote(tmp, slot, ks);
      }
    };
    int cs_kt = 0, cs_j = 0;
    Coord cs = coord(0);
    for (int s = 0; s < steps; ++s) {
      cp_async_wait<C::kStages - 2>();
      __syncthreads();  // stage s visible to all; stage s-1 fully consumed
      load_next((s + C::kStages - 1) % C::kStages);
      cp_async_commit();
      compute(s % C::kStages);
      if (++cs_kt == k_tiles) {
        epilogue(cs);
        cs_kt = 0;
        if (++cs_j < my_tiles) cs = coord(cs_j);
      }
    }
  } else {
#if WD_WGMMA_AVAILABLE
    // wgmma: warpgroup wg owns weight rows [64·wg, 64·wg+64). BF16: the
    // stage-kt MMAs stay in flight while the block waits for kt+1 and refills
    // the slot of kt-1 (wait_group 1 + a barrier before the refill). FP8: a
    // stage's MMAs sum into a second register set that is promoted with the
    // scales once they are done (a second set to keep in flight does not fit
    // in the registers: spills at T = 128); MXFP8 promotes every K step.
    const int wg = warp >> 2;
    auto desc_a = [&](int slot) { return wgmma::sw128_desc(smem + C::kWOff + slot * C::kWBytes + wg * 64 * kRowBytes); };
    auto desc_b = [&](int slot) { return wgmma::sw128_desc(smem + C::kAOff + slot * C::kABytes); };
    auto mma_bf16 = [&](float (&d)[C::kAcc], uint64_t da, uint64_t db) {
      if constexpr (kT == 128) wgmma::wgmma_m64n128_bf16(d, da, db, 1);
      else wgmma::wgmma_m64n64_bf16(d, da, db, 1);
    };
    auto mma_fp8 = [&](float (&d)[C::kAcc], uint64_t da, uint64_t db, int scale_d) {
      if constexpr (kT == 128) wgmma::wgmma_m64n128_e4m3(d, da, db, scale_d);
      else wgmma::wgmma_m64n64_e4m3(d, da, db, scale_d);
    };
    float tmp[C::kFp8 ? C::kAcc : 1];
    auto stage_begin = [&](int kt) {
      cp_async_wait<C::kStages - 2>();
      wgmma::fence_proxy_async();
      __syncthreads();  // stage kt visible to both warpgroups (and the async proxy)
    };
    auto stage_end = [&](int kt) {
      __syncthreads();  // both warpgroups are done with the slot of kt-1
      load_next((kt + C::kStages - 1) % C::kStages);
      cp_async_commit();
    };
    for (int kt = 0; kt < k_tiles; ++kt) {
      stage_begin(kt);
      const int slot = kt % C::kStages;
      const uint64_t da = desc_a(slot), db = desc_b(slot);
      if constexpr (!C::kFp8) {
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) mma_bf16(acc, da + 2 * ks, db + 2 * ks);
        wgmma::commit();
        wgmma::wait<1>();
      } else {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          if (C::kMx || ks == 0) wgmma::fence();
          mma_fp8(tmp, da + 2 * ks, db + 2 * ks, (C::kMx || ks == 0) ? 0 : 1);
          if (C::kMx || ks == 3) {
            wgmma::commit();
            wgmma::wait<0>();
            promote(tmp, slot, ks);
          }
        }
      }
      stage_end(kt);
    }
    wgmma::wait<0>();
    epilogue(coord(0));
#endif
  }
  }
#endif
}

// Host launcher of one instantiation. Persistent kernels get at most as many
// blocks as fit on the device at once.
template <WeightFormat F, int kT, bool kWgmma>
void launch(const GroupedGemmParams& p, cudaStream_t stream, bool pdl) {
  using C = Config<F, kT, kWgmma>;
  auto kernel = grouped_gemm_kernel<F, kT, kWgmma>;
  // Also raises the kernel's shared-memory limit on this device (launch.cuh).
  const long resident = resident_blocks(kernel, C::kThreads, C::kSmemBytes);
  const int ntn = (p.n + C::kBW - 1) / C::kBW;
  const dim3 grid = C::kPersistent
                        ? dim3(unsigned(std::min<long>(long(p.max_blocks) * ntn, resident)), 1)
                        : dim3(unsigned(p.max_blocks), unsigned(ntn));
  launch_kernel(kernel, grid, dim3(C::kThreads), C::kSmemBytes, stream, pdl, p);
}

}  // namespace wd::kernels::gemm

// Explicit instantiations live in classical_gemm_{bf16,fp8}.cu.
#define WD_CLASSICAL_GEMM_INSTANCES(F)                                                   \
  template void launch<F, 8, false>(const GroupedGemmParams&, cudaStream_t, bool);            \
  template void launch<F, 16, false>(const GroupedGemmParams&, cudaStream_t, bool);           \
  template void launch<F, 32, false>(const GroupedGemmParams&, cudaStream_t, bool);           \
  template void launch<F, 64, false>(const GroupedGemmParams&, cudaStream_t, bool);           \
  template void launch<F, 128, false>(const GroupedGemmParams&, cudaStream_t, bool);          \
  template void launch<F, 64, true>(const GroupedGemmParams&, cudaStream_t, bool);            \
  template void launch<F, 128, true>(const GroupedGemmParams&, cudaStream_t, bool);
