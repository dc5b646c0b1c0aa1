// moe_down: the second warp-decode kernel.
//
//   y[b][d] = residual[b][d] + Σ_k w[b][k] · (W_down[e_k] row d · h[b][k])
//
// Mapping: grid (ceil(B / kTokens), H / (kWarps·kRows)). A block serves a
// tile of up to kTokens consecutive tokens; each warp owns kRows consecutive
// output rows d for every token of the tile and walks the experts those tokens
// are routed to itself, in ascending expert id: an expert's kRows rows are
// loaded once for all tile tokens routed to it, dotted with each one's h, and
// the weighted result is accumulated in FP32 registers. One shfl_xor
// butterfly per (token, row) at the end; the lane that owns it writes y once.
// There are no per-expert partial outputs and no combine step.
//
// Layouts: weights (E, H, I) BF16 or E4M3; scales (E, H, I/32) E8M0;
// h (B, K, I) FP32; ids (B, K) int32; route_w (B, K) FP32;
// y and residual (B, H) BF16 or FP32.
// Invariants: I % 32 == 0, H % (kRows) == 0, 16-byte aligned pointers.
// Bytes: distinct experts × H·I·elem (+ scales) + B·K·I·4 of h (L2-hot) + y.
//
// With programmatic_launch, the block sorts its routing entries and issues
// its first weight loads while moe_gate_up is still running, then waits for
// it (griddepcontrol.wait) before the first read of h.
//
// Batch invariance: a token's accumulation order is fixed by its own routing
// (its slots sorted by expert id, then slot), the chunk-to-lane mapping and
// the butterfly; the tile it shares with other tokens changes nothing.
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
  int tokens_per_tile;     // 1, 8 or 32
  int mx8_int_decode;      // MXFP8 only: 1 integer decoder, 0 hardware convert
  int programmatic_launch; // 1: may start while moe_gate_up finishes (PDL); reads h only after it ends
};

void moe_down(const DownParams& p, WeightFormat format, cudaStream_t stream);

}  // namespace wd::kernels
