// moe_down_tc at B = 1 with each block's weights staged in shared memory
// while moe_gate_up_tc still runs (DownParams::staged; moe_tc.cuh).
//
// Why: at B = 1 a layer is two short reads, and each pays HBM's ramp-up and
// tail (a single read of 16 / 32 MiB reaches 2.4 / 3.1 TB/s on an H200). PDL
// lets moe_down_tc start before moe_gate_up_tc ends, but its 12-warp blocks
// (about 163 registers a thread) need a whole SM's register file, so they
// start only as gate_up's blocks retire and read their weights after it
// (PERF_LOG sessions 9 and 12: every way of loading them earlier was level
// or slower, for that reason). This kernel's blocks are 4 warps; beside
// three moe_gate_up_tc blocks (3 × 128 threads × 96 registers for MXFP8)
// an SM keeps 28672 registers and, with the largest shared-memory carveout
// (GateUpParams::max_shared_carveout), the room for one of them. They start
// when gate_up's blocks signal (at their start), copy the weights and scales
// of the token's K experts for their 16 rows into shared memory (one bulk
// copy per expert and tensor: in the tiled layout a block's rows of one
// expert are contiguous), wait for gate_up, copy h, and compute from
// shared memory: the weight bytes are read while gate_up reads its own.
//
// Shared memory: per routing entry j (sorted), its expert's items for the
// block's 16 rows (I / 64 units of 1 KB MXFP8, 2 KB BF16; the tiled layout
// of warpdecode/down_tiling.h), then its scales (I / 64 × 32 bytes), then
// the token's h (K entries × (I BF16 hi, I BF16 lo)), then the slices'
// accumulators (slices × 16 floats).
//
// Same bits as moe_down_tc at B = 1 (the GPU tests compare them): per K
// range (slice) of down_tc_slices(), one MMA chain over the slice's units,
// with the hi products in column 0 and the lo products in column 4 (the
// by-token walk's tile; the general walks' two chains give the same column
// sums), hi + lo, folded w·v in ascending expert id (then entry: a token
// routed twice to an expert folds its entries in entry order, as the
// duplicate-token walk), the slices summed in order, then the residual.
#include "kernels/moe_tc.cuh"

#include <algorithm>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/moe_down_store.cuh"
#include "kernels/tma.cuh"
#include "warpdecode/down_tiling.h"

namespace wd::kernels {
namespace {

constexpr int kTile = 16;   // output rows per block
constexpr int kUnit = 64;   // elements of I per unit
#ifndef WD_STAGED_WARPS
#define WD_STAGED_WARPS 4
#endif
constexpr int kWarps = WD_STAGED_WARPS;  // warps per block: small enough to sit beside gate_up's blocks
constexpr int kMaxPer = 3;  // slices a warp computes at once (down_tc_slices: at most 12)
constexpr int kMaxK = 16;

template <bool kMx8>
struct Staged {
  static constexpr uint32_t kItemBytes = kDownTileBytes * (kMx8 ? 1 : 2);  // one unit of 16 rows
  static constexpr uint32_t kItemScales = kMx8 ? kDownTileScales : 0;
  // Element offset (within a unit) of lane q's 16-byte h piece m (moe_down_tc's h_offset).
  __device__ static constexpr int h_offset(int q, int m) { return kMx8 ? 16 * q + 8 * m : 8 * q + 32 * m; }
};

// Bytes of each region for K entries of I elements.
struct StagedLayout {
  uint32_t weights, scales, h, acc;
  __host__ __device__ StagedLayout(bool mx8, int K, int I, int slices) {
    const uint32_t units = uint32_t(I) / kUnit;
    weights = uint32_t(K) * units * (mx8 ? kDownTileBytes : 2 * kDownTileBytes);
    scales = mx8 ? uint32_t(K) * units * kDownTileScales : 0;
    h = uint32_t(K) * 4u * uint32_t(I);
    acc = uint32_t(slices) * kTile * 4;
  }
  __host__ __device__ uint32_t bytes() const { return weights + scales + h + acc; }
};

template <bool kMx8, bool kNarrowOnly>
__global__ void __launch_bounds__(kWarps * kWarpSize, 1)
moe_down_tc_staged_kernel(const __grid_constant__ DownParams p, int slices) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = Staged<kMx8>;
  const int H = p.hidden, I = p.intermediate, K = p.top_k, E = p.experts;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int units = I / kUnit / slices;  // units a slice
  const StagedLayout L(kMx8, K, I, slices);
  const uint32_t slot_bytes = uint32_t(I / kUnit) * S::kItemBytes, slot_scales = uint32_t(I / kUnit) * S::kItemScales;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint8_t* s_w = smem;
  const uint8_t* s_sc = smem + L.weights;
  const uint8_t* s_h = s_sc + L.scales;
  float* s_acc = reinterpret_cast<float*>(smem + L.weights + L.scales + L.h);
  __shared__ int s_e[kMaxK], s_i[kMaxK], s_n;
  __shared__ alignas(8) uint64_t s_bar[2];  // weights and scales; h
  const uint32_t bar_w = smem_u32(&s_bar[0]), bar_h = smem_u32(&s_bar[1]);

  // The token's entries sorted by (expert, entry); entries of no expert
  // (an id outside [0, E)) add nothing.
  if (threadIdx.x == 0) {
    int n = 0;
    for (int i = 0; i < K; ++i) {
      const int e = __ldg(p.ids + i);
      if (e < 0 || e >= E) continue;
      int j = n++;
      for (; j > 0 && s_e[j - 1] > e; --j) {
        s_e[j] = s_e[j - 1];
        s_i[j] = s_i[j - 1];
      }
      s_e[j] = e;
      s_i[j] = i;
    }
    s_n = n;
    tma::mbar_init(bar_w, 1);
    tma::mbar_init(bar_h, 1);
    tma::fence_barrier_init();
  }
  __syncthreads();
  const int n = s_n;
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);
  if (threadIdx.x == 0) {
    // In the tiled layout the block's 16 rows of expert e are I / 64
    // consecutive items: (e · H/16 + blockIdx.x) · I/64 onwards.
    tma::arrive_expect_tx(bar_w, uint32_t(n) * (slot_bytes + slot_scales));
    for (int j = 0; j < n; ++j) {
      const size_t item0 = (size_t(s_e[j]) * (H / kTile) + blockIdx.x) * (I / kUnit);
      tma::load_1d(smem_u32(s_w + j * slot_bytes), static_cast<const uint8_t*>(p.weights) + item0 * S::kItemBytes,
                   slot_bytes, bar_w, pol);
      if constexpr (kMx8)
        tma::load_1d(smem_u32(s_sc + j * slot_scales), p.scales + item0 * S::kItemScales, slot_scales, bar_w, pol);
    }
  }
  // Everything above reads routing and weights only; h is moe_gate_up's output.
  if (p.programmatic_launch) wait_for_previous_kernel();
  allow_next_kernel();
  if (threadIdx.x == 0) {
    tma::arrive_expect_tx(bar_h, L.h);
    tma::load_1d(smem_u32(s_h), p.h, L.h, bar_h, l2_stream_policy(false));
  }
  tma::wait(bar_w, 0);
  tma::wait(bar_h, 0);

  // Warp w computes slices w, w + 4, w + 8 (kMaxPer at once: independent
  // MMA chains in flight). Lane (g, q) feeds B column g: h's hi half for
  // g < 4, its lo half for g >= 4, so that column 0 holds the hi products
  // and column 4 the lo products of the token (columns 1-3, 5-7 repeat them
  // and are not read).
  const uint32_t h_half = g >= 4 ? 2u * uint32_t(I) : 0u;  // bytes
  constexpr uint32_t kHPiece = 2 * (S::h_offset(0, 1) - S::h_offset(0, 0));
  float racc[kMaxPer][2];
#pragma unroll
  for (int m = 0; m < kMaxPer; ++m) racc[m][0] = racc[m][1] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float rw = __ldg(p.route_w + s_i[j]);
    const uint8_t* wj = s_w + j * slot_bytes + 16 * lane;
    const uint8_t* sj = s_sc + j * slot_scales + 2 * g + q / 2;
    const uint8_t* hj = s_h + uint32_t(s_i[j]) * 4u * uint32_t(I) + h_half + 2 * S::h_offset(q, 0);
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int s = warp + kWarps * m;
      if (s >= slices) break;
      float tile[4] = {0.f, 0.f, 0.f, 0.f};
      for (int uu = 0; uu < units; ++uu) {
        const int u = s * units + uu;
        uint32_t a[2][8];
        const uint8_t* wp = wj + u * S::kItemBytes;  // row g; row g + 8 at + 512
        if constexpr (kMx8) {
          const uint4 raw[2] = {*reinterpret_cast<const uint4*>(wp), *reinterpret_cast<const uint4*>(wp + 512)};
          const uint32_t sc[2] = {sj[u * S::kItemScales], sj[u * S::kItemScales + 16]};
          auto decode = [&](auto narrow) {
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) e4m3x16_to_bf16x8<decltype(narrow)::value, true>(raw[hh], sc[hh], a[hh]);
          };
          if constexpr (kNarrowOnly) decode(std::true_type{});
          else with_scale_path<true>(max(sc[0], sc[1]), decode);
        } else {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const uint4 v = *reinterpret_cast<const uint4*>(wp + hh * 512 + c * kDownTileBytes);
              a[hh][4 * c] = v.x, a[hh][4 * c + 1] = v.y, a[hh][4 * c + 2] = v.z, a[hh][4 * c + 3] = v.w;
            }
        }
        const uint8_t* hp = hj + u * (2 * kUnit);
        const uint4 h0 = *reinterpret_cast<const uint4*>(hp), h1 = *reinterpret_cast<const uint4*>(hp + kHPiece);
        const uint32_t b[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
        for (int st = 0; st < 4; ++st)
          mma_bf16(tile, a[0][2 * st], a[1][2 * st], a[0][2 * st + 1], a[1][2 * st + 1], b[2 * st], b[2 * st + 1]);
      }
      // Column 0 (lane q = 0) plus column 4 (lane q = 2): hi + lo.
      const float v0 = tile[0] + __shfl_xor_sync(kFullMask, tile[0], 2);
      const float v1 = tile[2] + __shfl_xor_sync(kFullMask, tile[2], 2);
      racc[m][0] = __fmaf_rn(rw, v0, racc[m][0]);
      racc[m][1] = __fmaf_rn(rw, v1, racc[m][1]);
    }
  }
  if (q == 0) {
#pragma unroll
    for (int m = 0; m < kMaxPer; ++m) {
      const int s = warp + kWarps * m;
      if (s < slices) {
        s_acc[s * kTile + g] = racc[m][0];
        s_acc[s * kTile + g + 8] = racc[m][1];
      }
    }
  }
  __syncthreads();
  // The slices summed in order, as moe_down_tc's warps.
  if (threadIdx.x < kTile) {
    const int row = threadIdx.x;
    float v = s_acc[row];
    for (int s = 1; s < slices; ++s) v += s_acc[s * kTile + row];
    store_down_output(p, size_t(blockIdx.x) * kTile + row, v);
  }
#endif
}

}  // namespace

size_t down_tc_staged_smem(int hidden, int intermediate, int top_k, WeightFormat format) {
  const int slices = down_tc_slices(hidden, intermediate);
  return StagedLayout(format == WeightFormat::kMXFP8, top_k, intermediate, slices).bytes();
}

bool down_tc_staged_fits(int batch, int hidden, int intermediate, int top_k, bool tiled, WeightFormat format) {
  const int slices = down_tc_slices(hidden, intermediate);
  return batch == 1 && tiled && slices > 0 && (slices + kWarps - 1) / kWarps <= kMaxPer && top_k >= 1 &&
         top_k <= kMaxK && down_tc_staged_smem(hidden, intermediate, top_k, format) <= kDownStagedMaxSmem;
}

void moe_down_tc_staged(const DownParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(down_tc_staged_fits(p.batch, p.hidden, p.intermediate, p.top_k, p.tiled != 0, format), "moe_down_tc_staged: B = ", p.batch, ", H = ", p.hidden, ", I = ",
           p.intermediate, ", K = ", p.top_k, ": only B = 1 with tiled weights whose block tiles fit in ",
           kDownStagedMaxSmem, " bytes of shared memory");
  const int slices = down_tc_slices(p.hidden, p.intermediate);
  const size_t smem = down_tc_staged_smem(p.hidden, p.intermediate, p.top_k, format);
  const bool mx8 = format == WeightFormat::kMXFP8;
  auto* k = mx8 ? (p.scales_narrow ? &moe_down_tc_staged_kernel<true, true> : &moe_down_tc_staged_kernel<true, false>)
                : &moe_down_tc_staged_kernel<false, false>;
  ensure_dynamic_smem(k, smem);
  launch_kernel_attrs(k, dim3(p.hidden / kTile), dim3(kWarps * kWarpSize), smem, stream,
                      LaunchAttrs{p.programmatic_launch != 0, 1, /*max_shared_carveout=*/true}, p, slices);
}

}  // namespace wd::kernels
