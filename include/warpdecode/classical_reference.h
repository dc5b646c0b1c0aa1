// CPU reference of the classical expert-centric path: the FP64 MoE layer
// with every rounding the GPU path makes between its stages, so that tests can
// check the GPU bit-closely, and `accuracy` can show what the classical
// path's intermediate formats cost against the exact FP64 layer
// (reference::moe_experts).
//
// Per entry (token b, slot k, expert e), as the GPU computes it:
//   a   = x[b]                         BF16 path (and W8A16: FP8 weights, BF16 activations)
//       = deq(q8(x[b]))                W8A8: FP8 per group of 128 (quantize_activation_group)
//   g,u = bf16(W_gate[e]·a), bf16(W_up[e]·a)      (FP64 dots, rounded as stored;
//         not rounded with silu_fused: SiLU·up in the gate_up GEMM's epilogue)
//   h   = silu(g)·u, then bf16(h)      BF16 path
//                         or deq(q8(float(h)))    W8A8
//   p   = bf16(W_down[e]·h)            (the unweighted partial, stored BF16)
//   y[b] = Σ_k w[b][k] · p_k           (FP64; the GPU sums in FP32)
// Weights are dequantized exactly (BF16, MXFP8, FP8 block-128).
#pragma once

#include <cstdint>
#include <vector>

#include "warpdecode/layout.h"

namespace wd::reference {

// The GPU's dynamic activation quantization of one group of n <= 128 values:
// s = max(amax, 1e-10) / 448, q_i = e4m3(v_i / s) in FP32 arithmetic (bit-
// identical to the kernels). Returns s.
float quantize_activation_group(const float* v, int n, uint8_t* q);

// Which activation format the classical path uses by default for these
// weights: W8A8 for FP8 weights (block-128 and MXFP8), BF16 otherwise (a
// W8A16 configuration keeps BF16 for MXFP8).
inline bool classical_quantizes_activations(WeightFormat f) { return f != WeightFormat::kBF16; }

// y (B, H) of the classical path with the given routing (ids (B, K),
// weights (B, K)); host weights. threads <= 0 uses every hardware thread.
// silu_fused: the path's configuration fuses SiLU·up into the gate_up GEMM
// (ClassicalConfig::fuse_silu), so g and u are not stored in between.
// bf16_activations: W8A16 (ClassicalConfig::bf16_activations), FP8 weights
// with the BF16 path's activations.
std::vector<double> classical_experts(const MoeWeightsView& w, const uint16_t* x, const int32_t* ids,
                                      const double* weights, int batch, int threads = 0, bool silu_fused = false,
                                      bool bf16_activations = false);

}  // namespace wd::reference
