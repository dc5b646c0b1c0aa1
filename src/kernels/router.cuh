// router: logits, softmax and top-k for B tokens in one launch.
//
//   logits[b][e] = router[e]·x[b]   (BF16 in, FP32 accumulate)
//   ids[b] = top-K experts by logit (ties -> lower index), weights = softmax
//   probabilities of those experts, renormalised over the K when
//   norm_topk_prob (Qwen3 sets it).
//
// Two kernels that sum every logit in the same order (the bits do not
// depend on which runs). Spread, wherever a group's activations fit in
// shared memory (8·H·2 bytes <= 160 KB: every Qwen3-MoE shape): grid
// (ceil(E / 8), ceil(B / kRouterTokens)); block 8 warps. The block stages
// its group's activations in shared memory (cp.async, all copies in flight);
// warp w of block (x, y) computes the logits of expert 8x + w for the up to
// kRouterTokens tokens of group y (lane l takes 16-byte chunks l, l+32, ...
// of the row, loaded once for the group, 8 per lane in flight; shfl_xor
// butterfly) into `logits`. The group's last block to finish
// (an atomic counter per group, which that block resets) runs the softmax
// and K rounds of a warp-wide arg-max, one warp per token. The E·H router is
// read once per group of 8 tokens by E/8 blocks in parallel. Otherwise one
// block of 16 warps per token, which reads the whole router per token (13 µs
// at B = 1 on qwen3-30b-a3b, 20 µs at B = 64; 40-85 µs from B = 4 on the
// larger presets: docs/PERF_LOG.md v9). Softmax and top-K are instantiated
// for the smallest of 4 / 8 / 16 / 32 logits per lane that holds E (topk.cuh
// with_topk_width).
// Layouts: router (E, H) BF16; x (B, H) BF16; logits (B, E) FP32 (scratch);
// counters (ceil(B / kRouterTokens)) uint32, zero before the first call and
// left zero; ids (B, K) int32; weights (B, K) FP32. Invariants: H % 8 == 0,
// E <= 1024, K <= 16. A token's logits and picks depend only on its own x.
// Calls that share logits and counters must be stream-ordered.
// Bytes: ceil(B / kRouterTokens) reads of the E·H·2 router, B·H·2 of x
// (L2-resident for every block after the first), B·E·8 of logits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace wd::kernels {

// Tokens per group (per grid row).
constexpr int kRouterTokens = 8;
constexpr int router_groups(int batch) { return (batch + kRouterTokens - 1) / kRouterTokens; }

struct RouterParams {
  const uint16_t* router;  // (E, H) BF16
  const uint16_t* x;       // (B, H) BF16
  int32_t* ids;            // (B, K)
  float* weights;          // (B, K)
  float* logits;           // (B, E) scratch
  uint32_t* counters;      // (router_groups(B)) zero between calls
  int batch;               // B
  int hidden;              // H
  int experts;             // E
  int top_k;               // K
  int norm_topk_prob;      // 1: renormalise the K probabilities
};

void router(const RouterParams& p, cudaStream_t stream);

}  // namespace wd::kernels
