#include "kernels/router.cuh"

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/tma.cuh"
#include "kernels/topk.cuh"

namespace wd::kernels {
namespace {

// The kernel: grid (C, groups), one thread-block cluster of C blocks per
// group of up to 8 tokens (the n8 of one m16n8k16 tile), C up to 16.
// The logits are T × S work items: expert tile t (16 experts, rows clamped
// past E) times K slice s (a fixed run of 32-element chunks of H). Warp w of
// the cluster takes items w, w + 8C, ...; an item is a chain of BF16
// mma.sync tiles over its slice, the router rows as A and the group's
// tokens as B, both read from global memory 16 bytes a lane (mma.cuh's K
// permutation: A and B fragments from the same words), and its 16 × 8 FP32
// partial sums go to block 0's shared memory. After one cluster barrier
// block 0 adds each logit's S partial sums in slice order and runs the
// softmax and top-K, one warp per token.
// Batch invariance: T and S depend only on (E, H), a tile column's sums only
// on that token's x, and the slices are added in one order, so a token's
// logits are the same bits whatever the group, its column, C or B.
// Why tensor cores (session 43): the CUDA-core kernel before ran one FMA per
// weight and token after unpacking both, about 20 instructions per 8 FMAs;
// at B = 64 it took 11 µs (qwen3-30b-a3b) and 20 µs (qwen3-235b-a22b) for
// a 0.5-1 MB matrix, with 16 clusters of 16 blocks where 14 fit at once.
constexpr int kMaxCluster = 16;      // blocks of a group's cluster (non-portable above 8)
constexpr int kWarps = 8;            // warps a block; also the block-0 warps of the top-K (one a token)
constexpr int kTokens = 8;           // tokens a group: the tile's n8
constexpr int kChunk = 32;           // K elements a lane quad covers per tile pair (4 lanes × 8)
constexpr int kBatch = 8;            // chunks whose loads are in flight at once, per warp
constexpr int kTargetItems = kMaxCluster * kWarps;  // items a cluster should hold
constexpr int kMaxHidden = 81920;    // the router's documented bound (router.cuh)

// The work split, a function of (E, H) only (batch invariance).
struct Split {
  int tiles;   // T = ceil(E / 16)
  int chunks;  // ceil(H / 32)
  int per;     // chunks a slice
  int slices;  // S = ceil(chunks / per)
};
__host__ __device__ inline Split router_split(int experts, int hidden) {
  Split sp;
  sp.tiles = (experts + 15) / 16;
  sp.chunks = (hidden + kChunk - 1) / kChunk;
  int want = kTargetItems / sp.tiles;
  want = want < 1 ? 1 : want > sp.chunks ? sp.chunks : want;
  sp.per = (sp.chunks + want - 1) / want;
  sp.slices = (sp.chunks + sp.per - 1) / sp.per;
  return sp;
}

// Shared memory (each block of the cluster alike; block 0's is used): the
// partial sums (S, 16T, 8) FP32, then the group's logits (8, E) FP32.
size_t router_smem(const RouterParams& p) {
  const Split sp = router_split(p.experts, p.hidden);
  return size_t(sp.slices) * sp.tiles * 16 * kTokens * 4 + size_t(kTokens) * p.experts * 4;
}

template <int kPerLane>
__global__ void __launch_bounds__(kWarps* kWarpSize) router_kernel(const __grid_constant__ RouterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float s_part[];  // (S, 16T, 8) partial sums, then (8, E) logits
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;  // fragment row / column group, lane in its quad
  const int H = p.hidden, E = p.experts;
  const Split sp = router_split(E, H);
  const int b0 = blockIdx.y * kTokens, nb = min(kTokens, p.batch - b0);
  const uint32_t rank = tma::cluster_rank();
  // No block stores into block 0's shared memory before every block of the
  // cluster has started (the wait below, long satisfied by then).
  tma::cluster_arrive_relaxed();

  const int items = sp.tiles * sp.slices;
  const int stride = int(gridDim.x) * kWarps;
  int item = int(rank) * kWarps + warp;
  // Item state: rows e0 = 16t + g and e0 + 8 (clamped to E - 1: their sums
  // are never read), token column g (absent tokens read as zeros).
  const uint16_t* w_lo = nullptr;
  const uint16_t* w_hi = nullptr;
  int c_begin = 0, c_end = 0;
  uint4 wl[kBatch], wh[kBatch], xv[kBatch];
  auto start = [&](int it) {
    const int t = it / sp.slices, s = it % sp.slices;
    const int e0 = 16 * t + g;
    w_lo = p.router + size_t(min(e0, E - 1)) * H;
    w_hi = p.router + size_t(min(e0 + 8, E - 1)) * H;
    c_begin = s * sp.per;
    c_end = min(sp.chunks, c_begin + sp.per);
  };
  // Chunk c of this lane: elements 32c + 8q .. + 7 (H % 8 == 0: all or none
  // inside the row).
  auto load_w = [&](int c0) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int k = (c0 + j) * kChunk + 8 * q;
      const bool ok = c0 + j < c_end && k < H;
      wl[j] = ok ? ld_cached(w_lo + k) : make_uint4(0, 0, 0, 0);
      wh[j] = ok ? ld_cached(w_hi + k) : make_uint4(0, 0, 0, 0);
    }
  };
  auto load_x = [&](int c0) {
    const uint16_t* x = p.x + size_t(b0 + min(g, nb - 1)) * H;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int k = (c0 + j) * kChunk + 8 * q;
      xv[j] = g < nb && c0 + j < c_end && k < H ? ld_cached(x + k) : make_uint4(0, 0, 0, 0);
    }
  };
  if (item < items) {
    start(item);
    load_w(c_begin);  // the router's rows stream while the previous kernel finishes
  }
  // The activations are the previous kernel's output.
  wait_for_previous_kernel();
  allow_next_kernel();
  tma::cluster_wait();
  for (; item < items; item += stride) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c0 = c_begin;; c0 += kBatch) {
      load_x(c0);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j >= c_end) break;
        mma_bf16(acc, wl[j].x, wh[j].x, wl[j].y, wh[j].y, xv[j].x, xv[j].y);
        mma_bf16(acc, wl[j].z, wh[j].z, wl[j].w, wh[j].w, xv[j].z, xv[j].w);
      }
      if (c0 + kBatch >= c_end) break;
      load_w(c0 + kBatch);
    }
    // C rows g, g + 8 (experts), columns 2q, 2q + 1 (tokens) into block 0's
    // (S, 16T, 8) partial sums.
    const int t = item / sp.slices, s = item % sp.slices;
    const uint32_t base = smem_u32(s_part) + 4u * uint32_t((s * sp.tiles * 16 + 16 * t + g) * kTokens + 2 * q);
    tma::st_cluster(base, 0, acc[0]);
    tma::st_cluster(base + 4, 0, acc[1]);
    tma::st_cluster(base + 4u * 8 * kTokens, 0, acc[2]);
    tma::st_cluster(base + 4u * 8 * kTokens + 4, 0, acc[3]);
    if (item + stride < items) {
      start(item + stride);
      load_w(c_begin);
    }
  }

  // Every partial sum of the group is in block 0's shared memory (release
  // by each writer, acquire by block 0); the other blocks are done.
  tma::cluster_sync();
  if (rank != 0) return;
  float* logits = s_part + size_t(sp.slices) * sp.tiles * 16 * kTokens;
  for (int i = threadIdx.x; i < nb * E; i += blockDim.x) {
    const int t = i / E, e = i % E;
    float v = 0.0f;
    for (int s = 0; s < sp.slices; ++s) v += s_part[(s * sp.tiles * 16 + e) * kTokens + t];
    logits[i] = v;
  }
  __syncthreads();
  if (warp < nb) {
    const int b = b0 + warp;
    warp_softmax_topk<kPerLane>(logits + warp * E, E, p.top_k, p.norm_topk_prob != 0, p.ids + size_t(b) * p.top_k,
                                p.weights + size_t(b) * p.top_k);
  }
#else
  __trap();  // built for sm_90a and sm_100a only (clusters)
#endif
}

// As many blocks as hold the items at 8 warps each, at most 16; fewer if the
// device cannot hold a cluster that large with this shared memory (the bits
// do not depend on it: every warp runs whole items).
template <int kPerLane>
void launch_router(const RouterParams& p, cudaStream_t stream) {
  const auto kernel = &router_kernel<kPerLane>;
  const size_t smem = router_smem(p);
  ensure_dynamic_smem(kernel, smem);  // (largest_cluster raises it only where it tries a cluster)
  const Split sp = router_split(p.experts, p.hidden);
  const int wanted = std::min(kMaxCluster, (sp.tiles * sp.slices + kWarps - 1) / kWarps);
  const int cluster = largest_cluster(kernel, kWarps * kWarpSize, smem, wanted);
  const unsigned groups = unsigned((p.batch + kTokens - 1) / kTokens);
  launch_kernel_ex(kernel, dim3(unsigned(cluster), groups), dim3(kWarps * kWarpSize), smem, stream,
                   p.programmatic_launch != 0, cluster, p);
}

}  // namespace

void router(const RouterParams& p, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1 && p.batch <= 65535 * kTokens, "router: batch = ", p.batch, " must be in [1, ",
           65535 * kTokens, "]");
  WD_CHECK(p.hidden > 0 && p.hidden % 8 == 0 && p.hidden <= kMaxHidden, "router: H = ", p.hidden,
           " must be a positive multiple of 8, at most ", kMaxHidden);
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "router: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16 && p.top_k <= p.experts, "router: K = ", p.top_k,
           " must be in [1, min(E, 16)]");
  WD_CHECK(p.router && p.x && p.ids && p.weights, "router: a required pointer is null");
  with_topk_width(p.experts, [&](auto width) { launch_router<decltype(width)::value>(p, stream); });
}

}  // namespace wd::kernels
