#include "kernels/router.cuh"

#include <cfloat>
#include <climits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/topk.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kMaxPerLane = kMaxExperts / kWarpSize;

__global__ void __launch_bounds__(kThreads) router_kernel(const __grid_constant__ RouterParams p) {
  __shared__ float s_logits[kMaxExperts];
  const int b = blockIdx.x;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, E = p.experts;
  const uint16_t* x = p.x + size_t(b) * H;
  const int chunks = H / 8;

  for (int e = warp; e < E; e += kWarps) {
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

  warp_softmax_topk<kMaxPerLane>(s_logits, E, p.top_k, p.norm_topk_prob != 0,
                                 p.ids + size_t(b) * p.top_k, p.weights + size_t(b) * p.top_k);
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
  router_kernel<<<p.batch, kThreads, 0, stream>>>(p);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace wd::kernels
