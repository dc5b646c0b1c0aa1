// CPU reference forward of a whole Qwen3-MoE model, with a KV cache.
//
// Per token, in FP64 (weights read exactly as stored):
//   x = embed_tokens[id]
//   per layer:
//     h = rms_norm(x, input_layernorm)
//     q, k, v = h·q_projᵀ, h·k_projᵀ, h·v_projᵀ     (nq·D, nkv·D, nkv·D)
//     q, k per head: rms_norm(·, q_norm / k_norm), then RoPE at the position
//     k, v appended to the layer's cache; causal GQA attention over it
//     x += attn·o_projᵀ
//     h = rms_norm(x, post_attention_layernorm)
//     MoE layer:   x += wd::reference::moe_experts(h in BF16, routing of
//                  wd::reference::router)        (the foundation's FP64 judge)
//     dense layer: x += down(silu(gate·h) ⊙ up·h)
//   logits = rms_norm(x, norm)·lm_headᵀ          (lm_head = embed_tokens if tied)
//
// The MoE block's input is rounded to BF16 because the foundation's MoE
// reference takes BF16 activations, as the warp decode kernels do
// (scripts/make_model_fixture.py records transformers' logits with the same
// rounding, and the unrounded ones for comparison). Everything else is FP64.
//
// The expert stacks are converted (once, at construction, unless
// cache_experts is off) to the format the GPU path would read (bf16: exact
// for a BF16 checkpoint; mxfp8; fp8-block for FP8 checkpoints). The model
// reads every other weight from the mapped checkpoint: the ModelWeights and
// its Checkpoint must outlive the model.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "warpdecode/model/expert_stack.h"
#include "warpdecode/model/model_weights.h"

namespace wd::model {

struct ReferenceOptions {
  // kBF16, kMXFP8, or kFp8Block (FP8 checkpoints with 128x128 blocks: the
  // experts exactly as stored, read through the foundation's dequantization)
  StackFormat moe_format = StackFormat::kBF16;
  MxScaleRule rule = MxScaleRule::kNoSaturate;
  // Convert every MoE layer once, at construction (fast; holds the whole
  // model's experts in host memory), or convert each layer when a forward
  // reaches it and drop it after (one layer at a time: a real checkpoint's
  // reference within a small host, at the cost of speed).
  bool cache_experts = true;
  int threads = 0;                              // <= 0: every hardware thread
  FILE* progress = nullptr;                     // expert conversion progress, if set

  // Called with each MoE block's input before the experts run: h (T, H) in
  // FP64 and x (T, H), its BF16 rounding, for the tokens at positions
  // [first_pos, first_pos + T) of model layer `layer`. It may change x. Tests
  // use it to take transformers' own BF16 rounding where an FP64 value lies
  // on a rounding midpoint to FP32 precision (the two sides' FP32 noise
  // decides those, not the math).
  std::function<void(int layer, int64_t first_pos, int T, const double* h, uint16_t* x)> moe_input_hook;
};

class ReferenceModel {
 public:
  explicit ReferenceModel(const ModelWeights& w, const ReferenceOptions& opt = {});

  // Runs `ids` at the next positions, appending to the KV cache. Returns the
  // logits of every token, (ids.size(), vocab) row-major. A call that throws
  // (a bad token id, a weight the loader refuses, moe_input_hook) leaves the
  // cache and position as they were.
  std::vector<double> forward(const std::vector<int32_t>& ids);

  // Clears the KV cache (the next token is at position 0).
  void reset();
  int64_t position() const { return pos_; }

  // reset(), prefill `prompt`, then decode `new_tokens` tokens greedily (the
  // first maximum wins ties, as torch.argmax). If `logits` is set it gets
  // the (prompt.size() + new_tokens - 1, vocab) logits of every token fed.
  std::vector<int32_t> generate_greedy(const std::vector<int32_t>& prompt, int new_tokens,
                                       std::vector<double>* logits = nullptr);

  const ModelConfig& config() const { return w_.config; }

 private:
  struct Layer {
    std::vector<double> input_norm, post_norm, q_norm, k_norm;
    ExpertStack experts;          // MoE layers
    std::vector<double> k, v;     // KV cache (positions, nkv, D)
  };
  void attention_block(size_t l, const std::vector<double>& h, int T, std::vector<double>& x);
  void mlp_block(size_t l, const std::vector<double>& h, int T, std::vector<double>& x);

  const ModelWeights& w_;
  ReferenceOptions opt_;
  std::vector<Layer> layers_;
  std::vector<double> final_norm_;
  std::vector<float> inv_freq_;
  int64_t pos_ = 0;
};

}  // namespace wd::model
