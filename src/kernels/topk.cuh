// Softmax + top-K of one token's router logits by one warp, shared by the
// warp-decode router and the classical path's stage 2 so both pick the same
// experts with the same weights.
//
// Lane l holds logits l, l+32, ... (kPerLane of them; E <= 32·kPerLane), in a
// fixed order, so sums are deterministic. K rounds of a warp arg-max pick the
// experts (ties -> the lower index, like the reference); lane k keeps the
// k-th pick in registers. Probabilities are softmax over all E in FP32,
// renormalised over the K picks when norm_topk_prob. All 32 lanes must call.
#pragma once

#include <cfloat>
#include <climits>
#include <type_traits>

#include "kernels/common.cuh"

namespace wd::kernels {

template <int kPerLane>
__device__ __forceinline__ void warp_softmax_topk(const float* logits, int experts, int top_k,
                                                  bool norm_topk_prob, int32_t* ids, float* weights) {
  const int lane = threadIdx.x % kWarpSize;
  float v[kPerLane];
  float mx = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = j * kWarpSize + lane;
    v[j] = e < experts ? logits[e] : -FLT_MAX;
    mx = fmaxf(mx, v[j]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, o));
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)
    if (j * kWarpSize + lane < experts) sum += expf(v[j] - mx);
  sum = warp_sum(sum);

  float my_p = 0.0f;
  int my_e = 0;
  for (int k = 0; k < top_k; ++k) {
    // Lane-local best (lowest index on ties), then a warp arg-max.
    float best = -INFINITY;
    int best_e = INT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = j * kWarpSize + lane;
      if (e < experts && v[j] > best) {
        best = v[j];
        best_e = e;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(kFullMask, best, o);
      const int oe = __shfl_xor_sync(kFullMask, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j * kWarpSize + lane == best_e) v[j] = -INFINITY;  // taken
    if (lane == k) {
      my_e = best_e;
      my_p = expf(best - mx) / sum;
    }
  }
  const float top_sum = warp_sum(lane < top_k ? my_p : 0.0f);
  if (lane < top_k) {
    ids[lane] = my_e;
    weights[lane] = norm_topk_prob ? my_p / top_sum : my_p;
  }
}

// Calls f(std::integral_constant<int, P>{}) with the smallest P of 4, 8, 16,
// 32 logits per lane that holds `experts` (<= 1024): the kernel instance to
// launch. The picks and weights do not depend on P (logits past E are never
// read or compared), only the work: K rounds over P values per lane.
template <typename F>
void with_topk_width(int experts, F&& f) {
  if (experts <= 4 * 32) f(std::integral_constant<int, 4>{});
  else if (experts <= 8 * 32) f(std::integral_constant<int, 8>{});
  else if (experts <= 16 * 32) f(std::integral_constant<int, 16>{});
  else f(std::integral_constant<int, 32>{});
}

}  // namespace wd::kernels
