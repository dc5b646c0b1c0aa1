// Block-level routing bookkeeping done inside the two MoE kernels (there is no
// separate sort/pad/scatter stage): from the routing table ids (B, K), a block
// finds the (token, slot) entries routed to its expert, in ascending
// token-then-slot order.
//
// Cost: every block reads B·K ids (L2-resident, 2 KB at B = 64) and does two
// block barriers. Results depend only on the routing table, never on timing.
#pragma once

#include "kernels/common.cuh"

namespace wd::kernels {

constexpr int kMaxExperts = 1024;  // MoeShape::validate() enforces E <= 1024

// Whether any of ids[0, n) equals expert, for every thread of the block (one
// pass, one barrier; n may be 0: false).
__device__ __forceinline__ bool block_has_id(const int32_t* ids, int n, int expert) {
  bool hit = false;
  for (int i = threadIdx.x; i < n; i += blockDim.x) hit |= __ldg(ids + i) == expert;
  return __syncthreads_or(hit);
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
