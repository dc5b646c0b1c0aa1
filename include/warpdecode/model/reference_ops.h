// The pieces of the CPU reference forward (reference_model.h), in FP64,
// each as transformers' Qwen3-MoE computes it (modeling_qwen3_moe.py).
#pragma once

#include <cstdint>
#include <vector>

#include "warpdecode/model/model_weights.h"

namespace wd::model::ops {

// Qwen3MoeRMSNorm: y = w ⊙ x / sqrt(mean(x²) + eps), over n values.
void rms_norm(const double* x, const double* w, int n, double eps, double* y);

// RoPE inverse frequencies inv_freq[i] = 1 / theta^(2i / D), i < D/2,
// computed in FP32 as transformers does (its angles are FP32: matching them
// keeps long positions faithful, where FP32 angle rounding is visible).
std::vector<float> rope_inv_freq(int head_dim, double theta);

// RoPE of one head (D values) at position pos, in place, in transformers'
// rotate_half convention (the two halves of the head are the pair, not
// adjacent values):
//   a_j = fp32(pos · inv_freq[j])                         j < D/2
//   x'[j]       = x[j] cos a_j − x[j + D/2] sin a_j
//   x'[j + D/2] = x[j + D/2] cos a_j + x[j] sin a_j
void apply_rope(double* x, int head_dim, int64_t pos, const std::vector<float>& inv_freq);

// Causal grouped-query attention of one query token over `len` cached
// positions (the token itself is the last): query head h reads KV head
// h / (nq / nkv); scores scaled by D^-1/2, softmax in FP64.
//   q (nq, D), k and v (len, nkv, D), out (nq, D)
void attention(const double* q, const double* k, const double* v, int64_t len, int nq, int nkv,
               int head_dim, double* out);

// y (T, rows) = x (T, cols) · wᵀ, FP64 accumulation, rows decoded once from
// the mapped tensor and shared by the T tokens.
void matmul(const Matrix& w, const double* x, int T, double* y, int threads = 0);

}  // namespace wd::model::ops
