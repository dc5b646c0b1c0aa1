// Block-level routing bookkeeping done inside the two MoE kernels (there is no
// separate sort/pad/scatter stage): from the routing table ids (B, K), a block
// finds the u-th distinct expert of the batch (ascending id) and the
// (token, slot) entries routed to it, in ascending token-then-slot order.
//
// Cost: every block reads B·K ids (L2-resident, 2 KB at B = 64) and does two
// block barriers. Results depend only on the routing table, never on timing.
#pragma once

#include "kernels/common.cuh"

namespace wd::kernels {

constexpr int kMaxExperts = 1024;  // MoeShape::validate() enforces E <= 1024

// Returns the expert id of the block's distinct-expert index `u`, or -1 when
// the batch has fewer than u+1 distinct experts. `s_present` has
// kMaxExperts/32 words. All threads of the block must call it.
__device__ __forceinline__ int find_distinct_expert(const int32_t* ids, int entries, int experts,
                                                    int u, uint32_t* s_present, int* s_result) {
  const int words = (experts + 31) / 32;
  for (int i = threadIdx.x; i < words; i += blockDim.x) s_present[i] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < entries; i += blockDim.x) {
    const int e = __ldg(ids + i);
    atomicOr(&s_present[e >> 5], 1u << (e & 31));
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    const int lane = threadIdx.x;
    int target = u, found = -1;
    for (int base = 0; base < words; base += kWarpSize) {
      const uint32_t word = base + lane < words ? s_present[base + lane] : 0u;
      const int cnt = __popc(word);
      const int incl = warp_inclusive_sum(cnt, lane);
      const int excl = incl - cnt;
      const unsigned hit = __ballot_sync(kFullMask, target >= excl && target < incl);
      if (hit) {
        const int src = __ffs(hit) - 1;
        if (lane == src) {
          uint32_t rest = word;
          for (int k = 0; k < target - excl; ++k) rest &= rest - 1;  // drop lower set bits
          found = (base + lane) * 32 + __ffs(rest) - 1;
        }
        found = __shfl_sync(kFullMask, found, src);
        break;
      }
      target -= __shfl_sync(kFullMask, incl, kWarpSize - 1);
    }
    if (lane == 0) *s_result = found;
  }
  __syncthreads();
  return *s_result;
}

// Writes the indices i (= token·K + slot) with ids[i] == expert to s_list in
// ascending order; returns their count. s_warp_counts has blockDim/32 ints.
__device__ __forceinline__ int collect_entries(const int32_t* ids, int entries, int expert,
                                               int32_t* s_list, int* s_warp_counts) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  int total = 0;
  for (int base = 0; base < entries; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const bool match = i < entries && __ldg(ids + i) == expert;
    const unsigned ballot = __ballot_sync(kFullMask, match);
    if (lane == 0) s_warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int before = total, chunk_total = 0;
    for (int w = 0; w < warps; ++w) {
      const int c = s_warp_counts[w];
      if (w < warp) before += c;
      chunk_total += c;
    }
    if (match) s_list[before + __popc(ballot & ((1u << lane) - 1u))] = i;
    total += chunk_total;
    __syncthreads();
  }
  return total;
}

}  // namespace wd::kernels
