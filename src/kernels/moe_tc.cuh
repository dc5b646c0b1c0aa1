// Tensor-core variants of the two warp-decode kernels (moe_gate_up_tc.cu,
// moe_down_tc.cu): the same outputs as moe_gate_up / moe_down, the same
// parameters, the dot products on the tensor cores (BF16 mma.sync, FP32
// accumulation; MXFP8 weights decoded exactly to BF16 in registers).
//
// Why: the scalar kernels give one token its own pass over an expert's rows
// (FMA per weight per token, MXFP8 decode per weight per pass). From B ≈ 16
// that arithmetic, not HBM, bounds them. Here one warp streams a weight tile
// once for up to 8 tokens of the expert and the tensor cores do the
// products, so the cost per weight no longer grows with the batch.
//
// moe_gate_up_tc: grid (I/16, B·K, or E when B·K > 2.5E); block 4 warps. Block
//   y owns the expert of routing entry y if that entry is its first
//   occurrence (as moe_gate_up), or, with the grid of E rows, expert y
//   itself (exiting when no entry routes to it);
//   the block computes 16 neurons of it (gate and up rows: two m16 tiles) for
//   its tokens, 8 at a time (one n8 tile; 16, two n8 tiles against one
//   decoded weight fragment, for tiled weights where GateUpParams::two_tiles
//   asks: WarpDecodeConfig::for_batch's rule). Warp s takes the K range
//   [s·H/4, (s+1)·H/4); the four FP32 partials are summed in shared memory in
//   warp order, then h = silu(gate)·up is written, split into BF16 hi + lo
//   (mma.cuh split_bf16): per (token, slot), I BF16 hi then I BF16 lo, the
//   same bytes as the scalar kernels' FP32 (B, K, I).
// moe_down_tc: grid (H/16); block S warps (S = down_tc_slices(H, I)). Block x owns
//   output rows [16x, 16x+16) for every token; warp s owns a K range of I.
//   Per group of up to 64 tokens (128 past 64 where shared memory allows:
//   one walk's weight reads fewer) the block lists the group's distinct experts
//   (ascending id) and, for each, its tokens (ascending); each warp walks all
//   of them: the expert's 16×(its K range) weight tile times the tokens' h
//   (hi and lo, two MMAs) into an FP32 tile, then
//   acc[row][token] += w·tile in shared memory (each warp its own
//   accumulator, each (row, token) owned by one lane at a time; for B <= 16
//   with one K unit a warp (BF16, or MXFP8 with narrow scales) or two, four
//   or ten (MXFP8 with narrow scales), the accumulators are registers: the
//   same FMAs, the same bits). The S accumulators are summed in warp order:
//   y = Σ (+ residual).
//
// Numerics, and batch invariance: y[b] = Σ over the S K ranges in warp order
// of (Σ over b's experts in ascending id of w·tile), tile being the hi-chain
// plus the lo-chain of MMAs over that K range, folded with one FMA; h[b][k] =
// the 4 K ranges' MMA chains summed in warp order. Nothing depends on the
// other tokens: a token's column of an MMA depends only on its own operands,
// and an expert it is not routed to adds nothing. The bits differ from the
// scalar kernels' (another summation order), so the two families are each
// batch invariant, not equal to each other (KernelFamily, warp_decode.h).
//
// Shapes: H % 256 == 0 and I % 64 == 0. The I/64 units are split into the
// most equal K ranges, at most 12, whose grid (H/16 blocks of that many
// warps) an H200 runs in one wave (at most 132 × 12 warps), else the most
// at most 12 (Qwen3-MoE: qwen3-30b-a3b 12 ranges of 1 unit,
// qwen3-235b-a22b 6 of 4, qwen3-coder-480b-a35b 4 of 10; a prime count
// above 12 gets one range, i.e. one warp per block: valid, slow).
// tensor_core_shape_ok() says whether a shape qualifies.
#pragma once

#include <cuda_runtime.h>

#include "kernels/moe_down.cuh"
#include "kernels/moe_gate_up.cuh"
#include "kernels/tc_shape.h"

namespace wd::kernels {

// Warps (K ranges of I) per moe_down_tc block for a shape; 0 if none fits.
int down_tc_slices(int hidden, int intermediate);

// Whether moe_down_tc can take its paired general walk (DownParams::
// pair_warps) at this shape: 1, 4 or 10 units of I a warp, at any batch
// (instead of the register walks too), given MXFP8 weights from the tiled
// copy with narrow scales (which the launch checks).
bool down_tc_pairs_fit(int hidden, int intermediate);

// tensor_core_shape_ok(hidden, intermediate): kernels/tc_shape.h.

// Whether moe_gate_up_tc runs its deep MXFP8 rounds (GateUpParams::deep_loads)
// at this H: rounds of two chunks need H % 512 == 0; elsewhere it runs the
// shallow rounds.
bool gate_up_tc_deep_fits(int hidden);

// Throw wd::InvalidArgument on parameters the kernel cannot take (what the
// launch below checks first).
void check_moe_gate_up_tc(const GateUpParams& p, WeightFormat format);
void check_moe_down_tc(const DownParams& p, WeightFormat format);

void moe_gate_up_tc(const GateUpParams& p, WeightFormat format, cudaStream_t stream);
void moe_down_tc(const DownParams& p, WeightFormat format, cudaStream_t stream);

}  // namespace wd::kernels
