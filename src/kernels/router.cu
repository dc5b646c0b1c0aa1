#include "kernels/router.cuh"

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/topk.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 8;  // experts per block, one per warp
constexpr int kThreads = kWarps * kWarpSize;
// The spread kernel stages its group's activations in shared memory (up to
// 8·H BF16); beyond this H, one block per token. Both sum each logit in the
// same order: the bits do not depend on which one runs.
constexpr size_t kMaxStagedBytes = 160 * 1024;
constexpr int kPerTokenWarps = 16;

// Phase 1: the block stages the group's activations (nb × H BF16) in shared
// memory with cp.async (every copy in flight at once; the loop of register
// loads it replaced made one L2 round trip per 256 chunks, yet the change
// gained only 0.3-8 µs: the staging is not what the router's time is,
// docs/PERF_LOG.md v10);
// warp w of block (x, y) computes logits[b][8x + w] for the tokens b of group
// y. Lane l takes 16-byte chunks l, l+32, ... of the router row, loaded once
// for all the group's tokens, kRowBatch at a time with the next batch in
// flight (the first one issued before the staging wait), and accumulates each
// token's products in chunk order (the same for every group size: a token's
// logit does not depend on the batch); one butterfly per token. (v8's version
// read each token's activations from L2 in the inner loop, every warp of
// every block: slower than one block per token from B = 4.)
// Phase 2: the group's last block to finish (a counter per group, reset by
// that block for the next call) reads the group's logits back from L2 and
// runs the softmax and top-K, one warp per token.
constexpr int kRowBatch = 8;  // 16-byte row chunks per lane in flight (two batches: 64 registers)

template <int kPerLane>
__global__ void __launch_bounds__(kThreads) router_kernel(const __grid_constant__ RouterParams p) {
  extern __shared__ uint4 s_x[];  // (nb, H/8) 16-byte chunks of the group's activations
  __shared__ float s_logits[kWarps][kMaxExperts];
  __shared__ bool s_last;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts, chunks = H / 8;
  const int b0 = blockIdx.y * kRouterTokens, nb = min(kRouterTokens, p.batch - b0);
  const int e = blockIdx.x * kWarps + warp;

  for (int i = threadIdx.x; i < nb * chunks; i += blockDim.x)
    cp_async16(smem_u32(s_x + i), p.x + size_t(b0 + i / chunks) * H + 8 * (i % chunks), true);
  cp_async_commit();

  // Row chunk j of this lane is c = lane + 32·j, j < nj. Loads are
  // unconditional (clamped to the row's last chunk, and warps past E read
  // row E-1): their values are used only where c < chunks and e < E.
  const uint16_t* row = p.router + size_t(min(e, E - 1)) * H;
  const int nj = (chunks + kWarpSize - 1) / kWarpSize;
  auto load = [&](uint4 (&wr)[kRowBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) wr[j] = ld_cached(row + 8 * min(lane + kWarpSize * (j0 + j), chunks - 1));
  };
  float acc[kRouterTokens];
#pragma unroll
  for (int t = 0; t < kRouterTokens; ++t) acc[t] = 0.0f;
  auto compute = [&](const uint4 (&wr)[kRowBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      const int c = lane + kWarpSize * (j0 + j);
      if (c >= chunks) break;
      float wv[8];
      Bf16Codec::decode(wr[j], wv);
#pragma unroll
      for (int t = 0; t < kRouterTokens; ++t) {
        if (t < nb) {
          float a[8];
          Bf16Codec::decode(s_x[t * chunks + c], a);
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[t] = __fmaf_rn(wv[q], a[q], acc[t]);
        }
      }
    }
  };
  // Two buffers used alternately, never copied (a copy of a register whose
  // load is in flight waits for the load).
  uint4 wa[kRowBatch], wb[kRowBatch];
  load(wa, 0);
  cp_async_wait<0>();
  __syncthreads();
  for (int j0 = 0;; j0 += 2 * kRowBatch) {
    if (j0 + kRowBatch < nj) load(wb, j0 + kRowBatch);
    compute(wa, j0);
    if (j0 + kRowBatch >= nj) break;
    if (j0 + 2 * kRowBatch < nj) load(wa, j0 + 2 * kRowBatch);
    compute(wb, j0 + kRowBatch);
    if (j0 + 2 * kRowBatch >= nj) break;
  }
  if (e < E) {
#pragma unroll
    for (int t = 0; t < kRouterTokens; ++t) {
      if (t >= nb) break;
      const float v = warp_sum(acc[t]);
      if (lane == 0) p.logits[size_t(b0 + t) * E + e] = v;
    }
  }

  // The last block of the group: every other block's logits are in L2
  // (written, fenced, then counted).
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned done = atomicAdd(p.counters + blockIdx.y, 1u);
    s_last = done == gridDim.x - 1;
    if (s_last) p.counters[blockIdx.y] = 0;  // ready for the next call (kernel boundary orders it)
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int t = warp; t < nb; t += kWarps) {
    const int b = b0 + t;
    for (int i = lane; i < E; i += kWarpSize) s_logits[warp][i] = __ldcg(p.logits + size_t(b) * E + i);
    __syncwarp();
    warp_softmax_topk<kPerLane>(s_logits[warp], E, p.top_k, p.norm_topk_prob != 0, p.ids + size_t(b) * p.top_k,
                                   p.weights + size_t(b) * p.top_k);
    __syncwarp();
  }
}

// One block of 16 warps per token: warp w computes the logits of experts w,
// w+16, ... (lane l takes chunks l, l+32, ..., the same order as above) into
// shared memory, then warp 0 runs the softmax and top-K.
template <int kPerLane>
__global__ void __launch_bounds__(kPerTokenWarps * kWarpSize)
router_per_token_kernel(const __grid_constant__ RouterParams p) {
  __shared__ float s_logits[kPerLane * kWarpSize];
  const int b = blockIdx.x;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts, chunks = H / 8;
  const uint16_t* x = p.x + size_t(b) * H;
  for (int e = warp; e < E; e += kPerTokenWarps) {
    const uint16_t* row = p.router + size_t(e) * H;
    float acc = 0.0f;
    for (int c = lane; c < chunks; c += kWarpSize) {
      float wv[8], a[8];
      Bf16Codec::decode(ld_cached(row + 8 * c), wv);
      load_bf16_activations(x, 8 * c, a);
#pragma unroll
      for (int q = 0; q < 8; ++q) acc = __fmaf_rn(wv[q], a[q], acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) s_logits[e] = acc;
  }
  __syncthreads();
  if (warp != 0) return;
  warp_softmax_topk<kPerLane>(s_logits, E, p.top_k, p.norm_topk_prob != 0, p.ids + size_t(b) * p.top_k,
                              p.weights + size_t(b) * p.top_k);
}

}  // namespace

void router(const RouterParams& p, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1, "router: batch = ", p.batch, " must be >= 1");
  WD_CHECK(p.hidden > 0 && p.hidden % 8 == 0, "router: H = ", p.hidden,
           " must be a positive multiple of 8");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "router: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16 && p.top_k <= p.experts, "router: K = ", p.top_k,
           " must be in [1, min(E, 16)]");
  WD_CHECK(p.router && p.x && p.ids && p.weights && p.logits && p.counters, "router: a required pointer is null");
  const dim3 grid((p.experts + kWarps - 1) / kWarps, router_groups(p.batch));
  const size_t staged = size_t(std::min(p.batch, kRouterTokens)) * p.hidden * 2;
  with_topk_width(p.experts, [&](auto width) {
    constexpr int kPerLane = decltype(width)::value;
    if (staged <= kMaxStagedBytes) {
      ensure_dynamic_smem(router_kernel<kPerLane>, staged);
      router_kernel<kPerLane><<<grid, kThreads, staged, stream>>>(p);
    } else {
      router_per_token_kernel<kPerLane><<<p.batch, kPerTokenWarps * kWarpSize, 0, stream>>>(p);
    }
    WD_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace wd::kernels
