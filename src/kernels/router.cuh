// router: logits, softmax and top-k for B tokens in one launch.
//
//   logits[b][e] = router[e]·x[b]   (BF16 in, FP32 accumulate)
//   ids[b] = top-K experts by logit (ties -> lower index), weights = softmax
//   probabilities of those experts, renormalised over the K when
//   norm_topk_prob (Qwen3 sets it).
//
// Mapping: one block of kWarps warps per token. Warp w computes the logits of
// experts w, w+kWarps, ... (lane l takes 16-byte chunks l, l+32, ... of the
// row; shfl_xor butterfly), into shared memory; warp 0 then runs the softmax
// and K rounds of a warp-wide arg-max. Layouts: router (E, H) BF16; x (B, H)
// BF16; ids (B, K) int32; weights (B, K) FP32. Invariants: H % 8 == 0,
// E <= 1024, K <= 16. Bytes: B reads of the E·H·2 router (L2-resident after
// the first), B·H·2 of x.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace wd::kernels {

struct RouterParams {
  const uint16_t* router;  // (E, H) BF16
  const uint16_t* x;       // (B, H) BF16
  int32_t* ids;            // (B, K)
  float* weights;          // (B, K)
  int batch;               // B
  int hidden;              // H
  int experts;             // E
  int top_k;               // K
  int norm_topk_prob;      // 1: renormalise the K probabilities
};

void router(const RouterParams& p, cudaStream_t stream);

}  // namespace wd::kernels
