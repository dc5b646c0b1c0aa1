// router: logits, softmax and top-k for B tokens in one launch.
//
//   logits[b][e] = router[e]·x[b]   (BF16 in, FP32 accumulate)
//   ids[b] = top-K experts by logit (ties -> lower index), weights = softmax
//   probabilities of those experts, renormalised over the K when
//   norm_topk_prob (Qwen3 sets it).
//
// One kernel: one thread-block cluster of C blocks per group of up to 8
// tokens (1 at B = 1, 2 up to B = 16, 4 up to 128, 8 above; a larger group
// where that brings every cluster into one wave on the device, e.g. 5 at B =
// 64 on an H200; C = ceil(E / 8) up to 16, 8 warps a block, at most 128 experts: one expert a warp; 16 warps a
// block above). The blocks stage the group's activations in shared memory; a
// warp computes its experts' logits for the group's tokens (lane l takes
// 16-byte chunks l, l+32, ... of the row, loaded once for the group, 8 per
// lane in flight; shfl_xor butterfly) and stores them into block 0's shared
// memory; after one cluster barrier block 0 runs the softmax and K rounds of
// a warp-wide arg-max, one warp per token. Softmax and top-K are
// instantiated for the smallest of 4 / 8 / 16 / 32 logits per lane that
// holds E (topk.cuh with_topk_width).
// Layouts: router (E, H) BF16; x (B, H) BF16; ids (B, K) int32; weights
// (B, K) FP32. Invariants: H % 8 == 0, H <= 81920, E <= 1024, K <= 16,
// B <= 65535. A token's logits and picks depend only on its own x (the same
// FMAs in the same order whatever the group). No global scratch: calls need
// no ordering between them. sm_90+ (clusters). With programmatic_launch the
// router's first rows stream while the previous kernel (which writes x)
// finishes.
// Bytes: one read of the E·H·2 router per group (from L2 after the first),
// B·H·2 of x (C times, from L2 after the first).
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
  // Tokens a cluster: 0 (the default) chosen per call from the batch and the
  // device (router.cu, chosen_geometry); 1 to min(8, 81920 / H) forces it
  // (tests: the bits must not depend on it).
  int group_tokens = 0;
};

// Throws wd::InvalidArgument on parameters the router cannot take (what
// router() checks first).
void check_router(const RouterParams& p);
void router(const RouterParams& p, cudaStream_t stream);

}  // namespace wd::kernels
