// CPU reference of one MoE layer: the judge every kernel is checked against.
//
//   logits[b][e] = Σ_h router[e][h] · x[b][h]           (FP64 from BF16 inputs)
//   p = softmax(logits[b]);  ids = top-K of p (ties -> lower expert index)
//   w_k = p[ids_k] / Σ_j p[ids_j]   if norm_topk_prob, else p[ids_k]
//   y[b] = Σ_k w_k · down[e_k] · (silu(gate[e_k]·x[b]) ⊙ (up[e_k]·x[b]))
//
// Weights are read as stored: BF16 exactly, MXFP8 dequantized exactly
// (E4M3 · 2^(s-127) is exact in FP64). Accumulation is FP64 for the judge
// (Precision::kFP64) or FP32 for the CPU path that `warpdecode check` tests
// (Precision::kFP32). Precision::kFP32SplitH is FP32 with each h value
// replaced by hi + lo, hi = bf16(h), lo = bf16(h − hi): the h that warp
// decode's tensor-core kernels multiply (moe_gate_up_tc stores h split so,
// moe_down_tc runs one BF16 MMA on each half; |h − hi − lo| ≤ 2^-17 |h|),
// for the accuracy harness's CPU model of that family. Work is split over
// tokens and output rows on a thread pool; results do not depend on the
// thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "warpdecode/layout.h"

namespace wd::reference {

enum class Precision { kFP64, kFP32, kFP32SplitH };

struct Routing {
  int batch = 0;
  int top_k = 0;
  std::vector<int32_t> ids;      // (B, K)
  std::vector<double> weights;   // (B, K)
  std::vector<double> logits;    // (B, E), FP64 router logits (router() only)
  RoutingView view(std::vector<float>& weights_f32) const;  // FP32 copy for kernels
};

// Router on B tokens x (B, H) BF16. Throws on non-finite inputs.
Routing router(const MoeWeightsView& w, const uint16_t* x, int batch);

// The router's second half for one token: softmax over its E logits, the
// top-K experts by probability (ties -> the lower index) into ids[0, K), and
// their probabilities (renormalised over the K when norm_topk_prob) into
// weights[0, K).
void softmax_topk(const double* logits, int experts, int top_k, bool norm_topk_prob, int32_t* ids,
                  double* weights);

// The smallest gap between the K-th and (K+1)-th logit over the batch: inputs
// for tests are redrawn until this is comfortably above FP32 rounding, so
// that no near-tie decides the routing.
double min_topk_gap(const Routing& r, int experts);

// Expert MLP and weighted sum with the given routing. y is (B, H).
// threads <= 0 uses every hardware thread.
std::vector<double> moe_experts(const MoeWeightsView& w, const uint16_t* x, const int32_t* ids,
                                const double* weights, int batch, Precision p, int threads = 0);

// Router + experts.
std::vector<double> moe_layer(const MoeWeightsView& w, const uint16_t* x, int batch, Precision p,
                              Routing* routing_out = nullptr, int threads = 0);

// Error statistics of out against ref (same length): ‖out−ref‖₂/‖ref‖₂ and
// max_i |out_i−ref_i| / max_i |ref_i|. NaN in out yields NaN errors.
struct ErrorStats {
  double rel_l2 = 0;
  double max_rel = 0;
  size_t non_finite = 0;  // outputs that are NaN or Inf
};
ErrorStats compare(const double* ref, const double* out, size_t n);

}  // namespace wd::reference
