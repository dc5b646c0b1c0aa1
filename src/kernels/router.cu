#include "kernels/router.cuh"

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/tma.cuh"
#include "kernels/topk.cuh"

namespace wd::kernels {
namespace {

// The spread kernel stages its group's activations in shared memory (up to
// 8·H BF16); beyond this H, one block per token. Both sum each logit in the
// same order: the bits do not depend on which one runs.
constexpr size_t kMaxStagedBytes = 160 * 1024;
constexpr int kPerTokenWarps = 16;
constexpr int kMaxCluster = 16;  // blocks of a group's cluster (non-portable above 8)

// The spread kernel: grid (C, groups), one cluster of C blocks per group of
// up to kRouterTokens tokens (router_cluster below: C = ceil(E / kWarps), at
// most 16). Each block stages the group's activations (nb × H BF16) in shared
// memory with cp.async (every copy in flight at once); warp w of cluster
// block r computes the logits of experts e = r·kWarps + w, + C·kWarps, ...
// for the group's tokens. Lane l takes 16-byte chunks l, l+32, ... of the
// router row, loaded once for all the group's tokens, kRowBatch at a time
// with the next batch in flight (the first expert's first batch issued
// before the staging wait), and accumulates each token's products in chunk
// order (the same for every group size: a token's logit does not depend on
// the batch); one butterfly per token. Lane 0 stores each logit into block
// 0's shared memory (st.shared::cluster); after one cluster barrier block 0
// runs the softmax and top-K, one warp per token.
// Why a cluster: the E·H router is read by E/8 SMs in parallel, and the
// logits must meet in one place. Until session 15 they met through global
// memory: each block stored them, fenced, counted itself on a per-group
// atomic counter, and the last block read them back from L2 (three L2 round
// trips in a row, and a counter the next call needed zeroed).
constexpr int kRowBatch = 8;  // 16-byte row chunks per lane in flight (two batches: 64 registers)

// Shared memory of the spread kernel: the group's activations (nbmax × H
// BF16), then its logits (nbmax × E FP32; block 0's are read), nbmax =
// min(B, kRouterTokens).
size_t router_smem(const RouterParams& p) {
  const size_t nbmax = size_t(std::min(p.batch, kRouterTokens));
  return nbmax * size_t(p.hidden) * 2 + nbmax * size_t(p.experts) * 4;
}

template <int kPerLane, int kWarps>
__global__ void __launch_bounds__(kWarps* kWarpSize) router_kernel(const __grid_constant__ RouterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ uint4 s_x[];  // (nb, H/8) 16-byte chunks of the group's activations, then the logits
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts, chunks = H / 8;
  const int b0 = blockIdx.y * kRouterTokens, nb = min(kRouterTokens, p.batch - b0);
  const int nbmax = min(kRouterTokens, p.batch);
  const uint32_t rank = tma::cluster_rank();
  const uint32_t s_logits = smem_u32(s_x) + uint32_t(nbmax * H * 2);  // (nbmax, E) FP32 of block 0
  // No block stores into block 0's shared memory before every block of the
  // cluster has started (the wait below, long satisfied by then).
  tma::cluster_arrive_relaxed();

  // Row chunk j of this lane is c = lane + 32·j, j < nj. Loads are
  // unconditional (clamped to the row's last chunk): their values are used
  // only where c < chunks.
  const int nj = (chunks + kWarpSize - 1) / kWarpSize;
  const uint16_t* row = nullptr;
  auto load = [&](uint4 (&wr)[kRowBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) wr[j] = ld_cached(row + 8 * min(lane + kWarpSize * (j0 + j), chunks - 1));
  };
  float acc[kRouterTokens];
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
  const int stride = int(gridDim.x) * kWarps;  // warps of the cluster
  int e = int(rank) * kWarps + warp;
  if (e < E) {
    row = p.router + size_t(e) * H;
    load(wa, 0);
  }
  // The activations are the previous kernel's output (under PDL the
  // router's first weights stream while it finishes).
  wait_for_previous_kernel();
  allow_next_kernel();
  for (int i = threadIdx.x; i < nb * chunks; i += blockDim.x)
    cp_async16(smem_u32(s_x + i), p.x + size_t(b0 + i / chunks) * H + 8 * (i % chunks), true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  tma::cluster_wait();
  for (; e < E; e += stride) {
    if (row == nullptr) {
      row = p.router + size_t(e) * H;
      load(wa, 0);
    }
#pragma unroll
    for (int t = 0; t < kRouterTokens; ++t) acc[t] = 0.0f;
    for (int j0 = 0;; j0 += 2 * kRowBatch) {
      if (j0 + kRowBatch < nj) load(wb, j0 + kRowBatch);
      compute(wa, j0);
      if (j0 + kRowBatch >= nj) break;
      if (j0 + 2 * kRowBatch < nj) load(wa, j0 + 2 * kRowBatch);
      compute(wb, j0 + kRowBatch);
      if (j0 + 2 * kRowBatch >= nj) break;
    }
#pragma unroll
    for (int t = 0; t < kRouterTokens; ++t) {
      if (t >= nb) break;
      const float v = warp_sum(acc[t]);
      if (lane == 0) tma::st_cluster(s_logits + 4u * uint32_t(t * E + e), 0, v);
    }
    row = nullptr;
  }

  // Every logit of the group is in block 0's shared memory (release by each
  // writer, acquire by block 0); the other blocks are done.
  tma::cluster_sync();
  if (rank != 0) return;
  const float* logits = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(s_x) + nbmax * H * 2);
  for (int t = warp; t < nb; t += kWarps) {
    const int b = b0 + t;
    warp_softmax_topk<kPerLane>(logits + t * E, E, p.top_k, p.norm_topk_prob != 0, p.ids + size_t(b) * p.top_k,
                                p.weights + size_t(b) * p.top_k);
  }
#else
  __trap();  // built for sm_90a and sm_100a only (clusters)
#endif
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
  wait_for_previous_kernel();
  allow_next_kernel();
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

// The spread kernel's cluster size for E experts: one expert per warp where
// 16 blocks suffice, fewer blocks if the device cannot hold a cluster that
// large with this shared memory (the logits' bits do not depend on it).
template <int kPerLane, int kWarps>
void launch_spread(const RouterParams& p, cudaStream_t stream) {
  const auto kernel = &router_kernel<kPerLane, kWarps>;
  const size_t smem = router_smem(p);
  const int wanted = std::min(kMaxCluster, (p.experts + kWarps - 1) / kWarps);
  const int cluster = largest_cluster(kernel, kWarps * kWarpSize, smem, wanted);
  launch_kernel_ex(kernel, dim3(unsigned(cluster), unsigned(router_groups(p.batch))), dim3(kWarps * kWarpSize),
                   smem, stream, p.programmatic_launch != 0, cluster, p);
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
  WD_CHECK(p.router && p.x && p.ids && p.weights, "router: a required pointer is null");
  const size_t staged = size_t(std::min(p.batch, kRouterTokens)) * p.hidden * 2;
  with_topk_width(p.experts, [&](auto width) {
    constexpr int kPerLane = decltype(width)::value;
    if (staged <= kMaxStagedBytes) {
      // 8 warps a block up to 128 experts (16 blocks of 8: the router's
      // bytes spread over 16 SMs), 16 above.
      if (p.experts <= 8 * kMaxCluster) launch_spread<kPerLane, 8>(p, stream);
      else launch_spread<kPerLane, 16>(p, stream);
    } else {
      launch_kernel(router_per_token_kernel<kPerLane>, dim3(unsigned(p.batch)), dim3(kPerTokenWarps * kWarpSize), 0,
                    stream, p.programmatic_launch != 0, p);
    }
  });
}

}  // namespace wd::kernels
