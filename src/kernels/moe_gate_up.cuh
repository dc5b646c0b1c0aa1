// moe_gate_up: the first warp-decode kernel.
//
//   h[b][k][i] = silu(W_gate[e]·x[b]) · (W_up[e]·x[b]),   e = ids[b][k]
//
// Mapping: grid (ceil(I / (kWarps·2·neurons_per_warp)), B·K). Block y owns the
// expert of routing entry y if that entry is the expert's first occurrence in
// the table (else it exits at once), and lists the (token, slot) entries
// routed to it. Each warp owns two neurons i, i+1 of the expert at a time
// (neurons_per_warp pairs in turn) and computes them for all of the
// expert's tokens, kTokens at a time: its four rows (gate and up of both
// neurons) are streamed once per kTokens tokens with 16-byte loads, decoded
// to FP32 in registers, dotted with the tokens' activations (staged once per
// block in shared memory as FP32, an exact copy of the BF16 input), and
// reduced across the warp with shfl_xor butterflies. Shared memory holds only
// inputs; no atomics touch outputs, nothing is padded: h is written once per
// (token, slot, i).
//
// Layouts: weights (E, 2I, H) BF16 or E4M3 (gate rows, then up rows);
// scales (E, 2I, H/32) E8M0; x (B, H) BF16; ids (B, K) int32; h (B, K, I) FP32.
// Invariants: H % 32 == 0 (16-byte chunks never straddle a row or a scale
// block), I even; pointers 16-byte aligned.
// Bytes: distinct experts × 2I·H·elem (+ scales), plus B·H·2 of x.
//
// Latency: a warp's registers hold two rounds of loads, too few bytes in
// flight for HBM at these sizes; with prefetch_pairs > 0, lane 0 of each warp
// also asks the TMA unit to bring the rows of its next neuron pairs into L2
// (prefetch_l2), so the register loads mostly hit L2. Every block signals
// programmatic dependents (allow_next_kernel) once its first loads are out, so a
// PDL-launched moe_down can start its own weight prefetch while this kernel
// runs. (moe_gate_up itself launched with PDL after the router measured
// slower: docs/PERF_LOG.md v10.)
//
// Batch invariance: a token's h depends only on its own row data, the fixed
// chunk-to-lane mapping and the fixed butterfly order, never on kTokens, on
// the other tokens of the expert or on the block schedule.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "warpdecode/layout.h"

namespace wd::kernels {

struct GateUpParams {
  const void* weights;     // (E, 2I, H) BF16 or E4M3
  const uint8_t* scales;   // (E, 2I, H/32) E8M0; MXFP8 only
  const uint16_t* x;       // (B, H) BF16
  const int32_t* ids;      // (B, K)
  float* h;                // (B, K, I)
  int batch;               // B
  int hidden;              // H
  int intermediate;        // I
  int experts;             // E
  int top_k;               // K
  int tokens_per_pass;     // 1 or 4: tokens sharing one load of the rows
  int neurons_per_warp;    // >= 1: neuron pairs each warp computes in turn
  int mx8_int_decode;      // MXFP8 only: 1 integer decoder, 0 hardware convert
  int prefetch_pairs;      // >= 0: neuron pairs a warp keeps requested into L2 ahead of its loads
  int evict_first;         // 1: streamed weight loads are marked evict-first in L2
  int narrow_rounds;       // tokens_per_pass 1 only: 1 chunk per lane and row per round
  int deep_loads;          // tensor-core kernel, MXFP8: rounds of two chunks (twice the bytes in flight)
                           // (80 registers, 24 warps per SM) instead of 2 (16 warps)
  int tiled;               // tensor-core kernel, MXFP8: weights and scales in the tiled layout
                           // (warpdecode/gate_up_tiling.h)
  int scales_narrow;       // tensor-core kernel, MXFP8: every scale code <= kMxNarrowMaxCode
                           // (MoeWeightsView::mx_scales_narrow): no per-round scale check
  int two_tiles;           // tensor-core kernel, tiled weights without deep loads: passes of two n8
                           // tiles (16 of an expert's tokens); elsewhere ignored; the same bits
};

// The most dynamic shared memory a moe_gate_up block may take (bytes).
constexpr size_t kMoeGateUpMaxSmem = 200 * 1024;

// Dynamic shared memory moe_gate_up needs for these parameters (bytes): its
// routing list (B·K entries) and tokens_per_pass staged FP32 tokens.
size_t moe_gate_up_smem(const GateUpParams& p);
size_t moe_gate_up_smem_for(int entries, int tokens_per_pass, int hidden);

// Throws wd::InvalidArgument on parameters the kernel cannot take (what
// moe_gate_up checks first; callers that launch several kernels check each
// one before launching any).
void check_moe_gate_up(const GateUpParams& p, WeightFormat format);

// Validates and launches on `stream`. Throws wd::InvalidArgument on shapes the
// kernel cannot take and wd::CudaError on launch failure.
void moe_gate_up(const GateUpParams& p, WeightFormat format, cudaStream_t stream);

}  // namespace wd::kernels
