// router: logits, softmax and top-k for B tokens in one launch.
//
//   logits[b][e] = router[e]·x[b]   (BF16 in, FP32 accumulate)
//   ids[b] = top-K experts by logit (ties -> lower index), weights = softmax
//   probabilities of those experts, renormalised over the K when
//   norm_topk_prob (Qwen3 sets it).
//
// One kernel: one thread-block cluster of up to 16 blocks of 8 warps per
// group of up to 8 tokens (the n8 of an m16n8k16 tile). The logits are
// split into items of 16 experts × one K slice (the split depends on E and H
// only); a warp runs an item as a chain of BF16 mma.sync tiles, the router
// rows as A and the tokens as B, 16 bytes a lane from global memory, and
// stores its FP32 partial sums into block 0's shared memory; after one
// cluster barrier block 0 adds each logit's partial sums in slice order and
// runs the softmax and K rounds of a warp-wide arg-max, one warp per token.
// Softmax and top-K are instantiated for the smallest of 4 / 8 / 16 / 32
// logits per lane that holds E (topk.cuh with_topk_width).
// Layouts: router (E, H) BF16; x (B, H) BF16; ids (B, K) int32; weights
// (B, K) FP32. Invariants: H % 8 == 0, H <= 81920, E <= 1024, K <= 16,
// B <= 8 · 65535. A token's logits and picks depend only on its own x (the
// same tiles and the same order of partial sums whatever the group, its
// column in the tile or the cluster size). No global scratch: calls need no
// ordering between them. sm_90+ (clusters). With programmatic_launch the
// router's first rows stream while the previous kernel (which writes x)
// finishes.
// Bytes: one read of the E·H·2 router per group (from L2 after the first),
// B·H·2 of x (once per expert tile, from L2 after the first).
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
  // 1: launched with PDL (launch.cuh): the first router rows stream before
  // the wait for the previous kernel, which writes x.
  int programmatic_launch;
};

void router(const RouterParams& p, cudaStream_t stream);

}  // namespace wd::kernels
