#include "kernels/router.cuh"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/tma.cuh"
#include "kernels/topk.cuh"

namespace wd::kernels {
namespace {

// The kernel: grid (C, groups), one thread-block cluster of C blocks per
// group of kTokens tokens, the last group perhaps fewer (C = ceil(E /
// kWarps), at most 16). Each block
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
// 16-byte row chunks per lane in flight (two batches: 64 registers at 8);
// 4 from 5 tokens a group, whose accumulators and activations need the
// registers (at most 128 a thread, two 8-warp blocks an SM).
template <int kTokens>
constexpr int kRowBatch = kTokens >= 5 ? 4 : 8;
constexpr size_t kMaxStagedBytes = 160 * 1024;  // a group's activations in shared memory

// Tokens per group (one cluster each) for a batch of B, before the wave
// count is looked at: small groups spread small batches over more clusters
// (session 15 run 3, qwen3-30b-a3b, router alone, µs, groups of 8 / 4 / 2:
// B = 8 9.8 / 6.0 / 4.7, B = 32 9.9 / 7.0 / 8.3, B = 64 11.8 / 11.2 / 12.0;
// qwen3-235b-a22b alike), larger ones re-read the router fewer times at
// large batches; B = 1 a group of one (no code for absent tokens). Halved
// while the group's activations exceed kMaxStagedBytes (a group of one
// holds H <= 81920).
int measured_group(int batch, int hidden) {
  int t = batch == 1 ? 1 : batch <= 16 ? 2 : batch <= 128 ? 4 : 8;
  while (t > 1 && size_t(t) * size_t(hidden) * 2 > kMaxStagedBytes) t /= 2;
  return t;
}

// The largest group a cluster can take: kMaxGroup tokens, fewer where their
// activations exceed the staging budget.
constexpr int kMaxGroup = 8;
int largest_group(int hidden) {
  return int(std::min<size_t>(kMaxGroup, kMaxStagedBytes / (size_t(hidden) * 2)));
}

// Shared memory: the group's activations (nbmax × H BF16), then its logits
// (nbmax × E FP32; block 0's are read), nbmax = min(B, tokens).
size_t router_smem(const RouterParams& p, int tokens) {
  const size_t nbmax = size_t(std::min(p.batch, tokens));
  return nbmax * size_t(p.hidden) * 2 + nbmax * size_t(p.experts) * 4;
}

template <int kPerLane, int kWarps, int kTokens>
__global__ void __launch_bounds__(kWarps* kWarpSize, kWarps == 8 ? 2 : 1)
    router_kernel(const __grid_constant__ RouterParams p) {
  constexpr int kBatch = kRowBatch<kTokens>;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ uint4 s_x[];  // (nb, H/8) 16-byte chunks of the group's activations, then the logits
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts, chunks = H / 8;
  const int b0 = int(blockIdx.y) * kTokens, nb = min(kTokens, p.batch - b0);
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
  auto load = [&](uint4 (&wr)[kBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) wr[j] = ld_cached(row + 8 * min(lane + kWarpSize * (j0 + j), chunks - 1));
  };
  // Every token slot of the group computes, a slot past the group's last
  // token on that token's activations (its sums are never stored): straight
  // code the compiler interleaves across tokens, where a test per token made
  // a basic block of each token's chain, run one after another (session 44:
  // 2.2 M of the 2.9 M warp instructions at B = 64 were that code, issued at
  // 0.24 a scheduler-cycle).
  float acc[kTokens];
  auto compute = [&](const uint4 (&wr)[kBatch], int j0) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int c = lane + kWarpSize * (j0 + j);
      if (c >= chunks) break;
      float wv[8];
      Bf16Codec::decode(wr[j], wv);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float a[8];
        Bf16Codec::decode(s_x[min(t, nb - 1) * chunks + c], a);
#pragma unroll
        for (int q = 0; q < 8; ++q) acc[t] = __fmaf_rn(wv[q], a[q], acc[t]);
      }
    }
  };
  // Two buffers used alternately, never copied (a copy of a register whose
  // load is in flight waits for the load).
  uint4 wa[kBatch], wb[kBatch];
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
  for (int t = 0; t < nb; ++t)
    for (int c = threadIdx.x; c < chunks; c += blockDim.x)
      cp_async16(smem_u32(s_x + t * chunks + c), p.x + size_t(b0 + t) * H + 8 * c, true);
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
    for (int j0 = 0;; j0 += 2 * kBatch) {
      if (j0 + kBatch < nj) load(wb, j0 + kBatch);
      compute(wa, j0);
      if (j0 + kBatch >= nj) break;
      if (j0 + 2 * kBatch < nj) load(wa, j0 + 2 * kBatch);
      compute(wb, j0 + kBatch);
      if (j0 + 2 * kBatch >= nj) break;
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

// How a group size launches: the kernel instance (one for each group size,
// 1 to 8), its cluster and how many such clusters the device holds at once.
// One expert per warp where 16 blocks suffice; fewer blocks if the device
// cannot hold a cluster that large with this shared memory (the bits do not
// depend on it). 8 warps a block up to 128 experts (kPerLane 4: 16 blocks of
// 8, the router's bytes spread over 16 SMs), 16 above.
struct Geometry {
  int group = 0;      // tokens a cluster
  int cluster = 1;    // blocks a cluster
  long resident = 1;  // clusters the device holds at once
  size_t smem = 0;    // dynamic shared memory a block
};

template <int kPerLane>
constexpr int kWarpsFor = kPerLane == 4 ? 8 : 16;

template <typename F>
void with_group(int group, F&& f) {
  switch (group) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, kMaxGroup>{});
  }
}
static_assert(kMaxGroup == 8, "with_group instantiates groups 1 to 8");

template <int kPerLane>
Geometry geometry(const RouterParams& p, int group) {
  constexpr int kWarps = kWarpsFor<kPerLane>;
  Geometry g;
  g.group = group;
  g.smem = router_smem(p, group);
  with_group(group, [&](auto tokens) {
    const auto kernel = &router_kernel<kPerLane, kWarps, decltype(tokens)::value>;
    ensure_dynamic_smem(kernel, g.smem);  // (largest_cluster raises it only where it tries a cluster)
    const int wanted = std::min(kMaxCluster, (p.experts + kWarps - 1) / kWarps);
    g.cluster = largest_cluster(kernel, kWarps * kWarpSize, g.smem, wanted);
    g.resident = resident_clusters(kernel, kWarps * kWarpSize, g.smem, g.cluster);
  });
  return g;
}

long waves(const RouterParams& p, const Geometry& g) {
  const long clusters = (p.batch + g.group - 1) / g.group;
  return (clusters + g.resident - 1) / g.resident;
}

// The group size of a call: the measured rule, or, where its clusters take
// more than one wave on this device, the smallest larger group whose
// clusters fit in one wave, if there is one. Session 43's ncu at
// qwen3-235b-a22b B = 64: 16 clusters of 16 blocks where 14 fit, so the last
// two ran on their own. Session 44 (H200, router alone, two rounds each):
// groups of 5 at B = 64 and 7 at B = 96 took 10.7-11.5 µs where groups of 4
// took 12.4-14.3 (qwen3-30b-a3b), 18.2-22.6 where 19.7-23.2
// (qwen3-235b-a22b); at B = 128, where no group of 8 or fewer reaches one
// wave, groups of 5 in two waves were 5-8 % slower than groups of 4 in
// three, so the rule leaves such batches alone. A token's logits do not
// depend on the group, so neither do the bits. Chosen once per (device,
// batch, shape): a call costs a map lookup.
template <int kPerLane>
Geometry chosen_geometry(const RouterParams& p) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, int>, Geometry> chosen;
  int dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  const auto key = std::make_tuple(dev, p.batch, p.hidden, p.experts, p.group_tokens);
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = chosen.find(key); it != chosen.end()) return it->second;
  Geometry best = geometry<kPerLane>(p, p.group_tokens > 0 ? p.group_tokens : measured_group(p.batch, p.hidden));
  if (p.group_tokens == 0 && waves(p, best) > 1) {
    for (int t = best.group + 1; t <= std::min(largest_group(p.hidden), p.batch); ++t) {
      const Geometry g = geometry<kPerLane>(p, t);
      if (waves(p, g) == 1) {
        best = g;
        break;
      }
    }
  }
  chosen[key] = best;
  return best;
}

template <int kPerLane>
void launch(const RouterParams& p, cudaStream_t stream) {
  const Geometry g = chosen_geometry<kPerLane>(p);
  const unsigned groups = unsigned((p.batch + g.group - 1) / g.group);
  with_group(g.group, [&](auto tokens) {
    const auto kernel = &router_kernel<kPerLane, kWarpsFor<kPerLane>, decltype(tokens)::value>;
    launch_kernel_ex(kernel, dim3(unsigned(g.cluster), groups), dim3(kWarpsFor<kPerLane> * kWarpSize), g.smem,
                     stream, p.programmatic_launch != 0, g.cluster, p);
  });
}

}  // namespace

void check_router(const RouterParams& p) {
  WD_CHECK(p.batch >= 1 && p.batch <= 65535, "router: batch = ", p.batch, " must be in [1, 65535]");
  WD_CHECK(p.hidden > 0 && p.hidden % 8 == 0 && size_t(p.hidden) * 2 <= kMaxStagedBytes, "router: H = ", p.hidden,
           " must be a positive multiple of 8, at most ", kMaxStagedBytes / 2);
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "router: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16 && p.top_k <= p.experts, "router: K = ", p.top_k,
           " must be in [1, min(E, 16)]");
  WD_CHECK(p.group_tokens >= 0 && p.group_tokens <= largest_group(p.hidden), "router: group_tokens = ",
           p.group_tokens, " must be 0 (chosen per call) or at most ", largest_group(p.hidden), " at H = ", p.hidden);
  WD_CHECK(p.router && p.x && p.ids && p.weights, "router: a required pointer is null");
  // x's rows are staged and the router's rows read 16 bytes at a time.
  WD_CHECK((reinterpret_cast<uintptr_t>(p.router) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "router: the router weights and x must be 16-byte aligned");
}

void router(const RouterParams& p, cudaStream_t stream) {
  check_router(p);
  with_topk_width(p.experts, [&](auto width) { launch<decltype(width)::value>(p, stream); });
}

}  // namespace wd::kernels
