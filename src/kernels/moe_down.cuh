// moe_down: the second warp-decode kernel.
//
//   y[b][d] = residual[b][d] + Σ_k w[b][k] · (W_down[e_k] row d · h[b][k])
//
// Mapping: grid (B, ceil(H / (kWarps·rows_per_warp))). Each warp owns
// rows_per_warp outputs y[b][d..] and walks all K experts token b is routed
// to itself: the K rows W_down[e_k][d]
// (I weights each) are cut into 16-byte chunks and dealt to the 32 lanes as
// one flat list (expert-major, in ascending expert id, then slot), so a warp
// has up to kRound chunks per lane in flight at once instead of one expert's
// row at a time; each lane accumulates w_k · (chunk · h chunk) in FP32
// registers, and one shfl_xor butterfly gives y[b][d]. No per-expert partial
// outputs, no combine step. Consecutive blocks serve consecutive tokens for the
// same rows, so an expert row shared by several tokens is fetched from HBM
// about once and served to the others by L2.
//
// Layouts: weights (E, H, I) BF16 or E4M3; scales (E, H, I/32) E8M0;
// h (B, K, I) FP32; ids (B, K) int32; route_w (B, K) FP32;
// y and residual (B, H) BF16 or FP32.
// Invariants: I % 32 == 0; 16-byte aligned pointers.
// Bytes: distinct experts × H·I·elem (+ scales) + B·K·I·4 of h (L2-hot) + y.
//
// With programmatic_launch, a block sorts its token's routing and issues its
// first round of weight loads (and its L2 prefetches) while moe_gate_up is
// still running — moe_gate_up signals dependents as soon as its blocks start —
// then waits for it (griddepcontrol.wait) before the first read of h.
// With prefetch_experts = P > 0, lane j of a warp asks for the rows_per_warp
// rows (one contiguous block) of the expert of sorted slot j, P slots ahead of
// the loads (prefetch_l2).
//
// With stage_h, a block first copies its token's h (K·I FP32, read by all of
// its warps) into shared memory: one read of h per block instead of one per
// warp, and the dot products' h operands come from shared memory.
//
// Batch invariance: y[b] depends only on token b's routing, h and the fixed
// chunk-to-lane mapping and butterfly: nothing about other tokens.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "warpdecode/layout.h"

namespace wd::kernels {

struct DownParams {
  const void* weights;     // (E, H, I) BF16 or E4M3
  const uint8_t* scales;   // (E, H, I/32) E8M0; MXFP8 only
  const float* h;          // (B, K, I)
  const int32_t* ids;      // (B, K)
  const float* route_w;    // (B, K)
  void* y;                 // (B, H) BF16 or FP32
  const void* residual;    // (B, H) same type as y, or nullptr
  int out_fp32;            // 1: y and residual are FP32; 0: BF16
  int batch;               // B
  int hidden;              // H
  int intermediate;        // I
  int experts;             // E
  int top_k;               // K
  int mx8_int_decode;      // MXFP8 only: 1 integer decoder, 0 hardware convert
  int programmatic_launch; // 1: may start while moe_gate_up finishes (PDL)
  int rows_per_warp;       // 1 or 4 outputs per warp (sharing each h chunk)
  int prefetch_experts;    // >= 0: sorted slots whose rows a warp keeps requested into L2 ahead
  int evict_first;         // 1: streamed weight loads are marked evict-first in L2
  int stage_h;             // 1: each block stages its token's h (K·I FP32) in shared memory
  int tiled;               // moe_down_tc, MXFP8: weights and scales in the tiled layout (warpdecode/down_tiling.h)
  int scales_narrow;       // moe_down_tc, MXFP8: every scale code <= kMxNarrowMaxCode (MoeWeightsView::mx_scales_narrow)
  int pair_warps;          // moe_down_tc: two warps a K slice in the general walk where it takes them (paired_walk())
};

// The most shared memory moe_down stages h in (bytes).
constexpr size_t kMoeDownMaxStagedH = 200 * 1024;

// Dynamic shared memory moe_down needs for these parameters (bytes).
size_t moe_down_smem(const DownParams& p);

// Throws wd::InvalidArgument on parameters the kernel cannot take (what
// moe_down checks first).
void check_moe_down(const DownParams& p, WeightFormat format);
void moe_down(const DownParams& p, WeightFormat format, cudaStream_t stream);

}  // namespace wd::kernels
