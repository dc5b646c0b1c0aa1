// Softmax + top-K of one token's router logits by one warp, shared by the
// warp-decode router and the classical path's stage 2 so both pick the same
// experts with the same weights.
//
// Lane l holds logits l, l+32, ... (kPerLane of them; E <= 32·kPerLane), in a
// fixed order, so sums are deterministic. K rounds of a warp arg-max pick the
// experts (ties -> the lower index, like the reference); lane k keeps the
// k-th pick in registers. A round is two warp reductions (redux.sync): the
// largest key (order_key, formats.h: the float order as unsigned
// integers), then the lowest expert holding it; it was five dependent pairs
// of shuffles. Same picks: equal floats have equal keys (-0 is keyed as
// +0), NaN logits are never picked (key 0, as their failed comparisons
// did). Probabilities are softmax over all E in FP32, renormalised over the
// K picks when norm_topk_prob. All 32 lanes must call.
#pragma once

#include <cfloat>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/common.cuh"
#include "warpdecode/formats.h"  // order_key

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

  // Keys of the lane's logits; 0: past E, NaN or already picked.
  uint32_t key[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) key[j] = j * kWarpSize + lane < experts ? order_key(v[j]) : 0u;
  float my_p = 0.0f;
  int my_e = 0;
  // Rolled since the per-token router, whose unrolled rounds spilled
  // registers (not re-measured in the kernels that use it now).
#pragma unroll 1
  for (int k = 0; k < top_k; ++k) {
    // Lane-local best (lowest index on ties: j ascending is e ascending).
    uint32_t best = 0;
    int best_j = 0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (key[j] > best) best = key[j], best_j = j;
    const uint32_t top = __reduce_max_sync(kFullMask, best);
    const int e = __reduce_min_sync(kFullMask, best == top ? best_j * kWarpSize + lane : INT_MAX);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j * kWarpSize + lane == e) key[j] = 0;  // picked
    if (lane == k) {
      my_e = e;
      my_p = expf(order_key_value(top) - mx) / sum;
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
