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

// The kernel: grid (C, groups), one thread-block cluster of C blocks per
// group of up to kTokens tokens (C = ceil(E / kWarps), at most 16). Each block
// stages the group's activations (nb × H BF16) in shared memory with
// cp.async (every copy in flight at once); warp w of cluster block r computes
// the logits of experts e = r·kWarps + w, + C·kWarps, ... for the group's
// tokens. Lane l takes 16-byte chunks l, l+32, ... of the router row, loaded
// once for all the group's tokens, kRowBatch at a time with the next batch
// in flight (the first expert's first batch issued before the wait for the
// previous kernel), and accumulates each token's products in chunk order;
// one butterfly per token. A token's sum is the same sequence of FMAs
// whatever the group size, the cluster size or the other tokens: its logits
// do not depend on the batch. Lane 0 stores each logit into block 0's shared
// memory (st.shared::cluster); after one cluster barrier block 0 runs the
// softmax and top-K, one warp per token.
// Why a cluster: the E·H router is read by C SMs in parallel, and the
// logits must meet in one place. Until session 15 they met through global
// memory: each block stored them, fenced, counted itself on a per-group
// atomic counter, and the last block read them back from L2 (three L2 round
// trips in a row, and a counter the next call needed zeroed).
constexpr int kMaxCluster = 16;      // blocks of a group's cluster (non-portable above 8)
constexpr int kRowBatch = 8;         // 16-byte row chunks per lane in flight (two batches: 64 registers)
constexpr size_t kMaxStagedBytes = 160 * 1024;  // a group's activations in shared memory

// Tokens per group (one cluster each) for a batch of B: small groups spread
// small batches over more clusters (session 15 run 3, qwen3-30b-a3b, router
// alone, µs, groups of 8 / 4 / 2: B = 8 9.8 / 6.0 / 4.7, B = 32 9.9 / 7.0 /
// 8.3, B = 64 11.8 / 11.2 / 12.0; qwen3-235b-a22b alike), larger ones re-read
// the router fewer times at large batches; B = 1 a group of one (no code
// for absent tokens). Halved while the group's activations exceed
// kMaxStagedBytes (a group of one holds H <= 81920).
int group_tokens(int batch, int hidden) {
  int t = batch == 1 ? 1 : batch <= 16 ? 2 : batch <= 128 ? 4 : 8;
  while (t > 1 && size_t(t) * size_t(hidden) * 2 > kMaxStagedBytes) t /= 2;
  return t;
}

// Shared memory: the group's activations (nbmax × H BF16), then its logits
// (nbmax × E FP32; block 0's are read), nbmax = min(B, kTokens).
size_t router_smem(const RouterParams& p, int tokens) {
  const size_t nbmax = size_t(std::min(p.batch, tokens));
  return nbmax * size_t(p.hidden) * 2 + nbmax * size_t(p.experts) * 4;
}

template <int kPerLane, int kWarps, int kTokens>
__global__ void __launch_bounds__(kWarps* kWarpSize) router_kernel(const __grid_constant__ RouterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ uint4 s_x[];  // (nb, H/8) 16-byte chunks of the group's activations, then the logits
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts, chunks = H / 8;
  const int b0 = blockIdx.y * kTokens, nb = min(kTokens, p.batch - b0);
  const int nbmax = min(kTokens, p.batch);
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
  float acc[kTokens];
  auto compute = [&](const uint4 (&wr)[kRowBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kRowBatch; ++j) {
      const int c = lane + kWarpSize * (j0 + j);
      if (c >= chunks) break;
      float wv[8];
      Bf16Codec::decode(wr[j], wv);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
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
    for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
    for (int j0 = 0;; j0 += 2 * kRowBatch) {
      if (j0 + kRowBatch < nj) load(wb, j0 + kRowBatch);
      compute(wa, j0);
      if (j0 + kRowBatch >= nj) break;
      if (j0 + 2 * kRowBatch < nj) load(wa, j0 + 2 * kRowBatch);
      compute(wb, j0 + kRowBatch);
      if (j0 + 2 * kRowBatch >= nj) break;
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
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

// One expert per warp where 16 blocks suffice; fewer blocks if the device
// cannot hold a cluster that large with this shared memory (the bits do not
// depend on it). 8 warps a block up to 128 experts (kPerLane 4: 16 blocks of
// 8, the router's bytes spread over 16 SMs), 16 above.
template <int kPerLane, int kTokens>
void launch_group(const RouterParams& p, cudaStream_t stream) {
  constexpr int kWarps = kPerLane == 4 ? 8 : 16;
  const auto kernel = &router_kernel<kPerLane, kWarps, kTokens>;
  const size_t smem = router_smem(p, kTokens);
  ensure_dynamic_smem(kernel, smem);  // (largest_cluster raises it only where it tries a cluster)
  const int wanted = std::min(kMaxCluster, (p.experts + kWarps - 1) / kWarps);
  const int cluster = largest_cluster(kernel, kWarps * kWarpSize, smem, wanted);
  const unsigned groups = unsigned((p.batch + kTokens - 1) / kTokens);
  launch_kernel_ex(kernel, dim3(unsigned(cluster), groups), dim3(kWarps * kWarpSize), smem, stream,
                   p.programmatic_launch != 0, cluster, p);
}

}  // namespace

void router(const RouterParams& p, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1 && p.batch <= 65535, "router: batch = ", p.batch, " must be in [1, 65535]");
  WD_CHECK(p.hidden > 0 && p.hidden % 8 == 0 && size_t(p.hidden) * 2 <= kMaxStagedBytes, "router: H = ", p.hidden,
           " must be a positive multiple of 8, at most ", kMaxStagedBytes / 2);
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "router: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16 && p.top_k <= p.experts, "router: K = ", p.top_k,
           " must be in [1, min(E, 16)]");
  WD_CHECK(p.router && p.x && p.ids && p.weights, "router: a required pointer is null");
  with_topk_width(p.experts, [&](auto width) {
    constexpr int kPerLane = decltype(width)::value;
    switch (group_tokens(p.batch, p.hidden)) {
      case 1: return launch_group<kPerLane, 1>(p, stream);
      case 2: return launch_group<kPerLane, 2>(p, stream);
      case 4: return launch_group<kPerLane, 4>(p, stream);
      default: return launch_group<kPerLane, 8>(p, stream);
    }
  });
}

}  // namespace wd::kernels
