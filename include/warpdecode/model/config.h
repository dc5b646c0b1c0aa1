// The Hugging Face config.json of a Qwen3MoeForCausalLM checkpoint.
//
// Every field that changes the math is read; anything we do not implement
// (another architecture, rope scaling other than "default", sliding-window
// attention, attention biases, an activation other than SiLU, a quantization
// other than FP8 128x128-style block scales) is refused by name with a
// wd::FormatError, never ignored. Keys that do not change the forward
// (bos_token_id, use_cache, initializer_range, router_aux_loss_coef, ...) are
// ignored.
//
// Both config dialects are read: transformers 4.x (rope_theta, rope_scaling,
// torch_dtype, num_experts) and 5.x (rope_parameters, dtype,
// num_local_experts).
#pragma once

#include <string>
#include <vector>

#include "warpdecode/layout.h"

namespace wd::model {

// Weight quantization declared by quantization_config.
enum class QuantMethod {
  kNone,
  // quant_method "fp8": weights F8_E4M3 with FP32 `weight_scale_inv`, one
  // scale per block of weight_block_size = [rows, cols] (128x128 in Qwen3
  // FP8 checkpoints); w = e4m3 * scale_inv. Activations dynamic.
  kFp8Block,
};

struct ModelConfig {
  // Shapes (names as in config.json).
  int hidden_size = 0;            // H
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;     // absent from config.json: 4, as in transformers
  int head_dim = 0;               // default hidden_size / num_attention_heads
  int intermediate_size = 0;      // dense MLP layers (0 when every layer is MoE)
  int moe_intermediate_size = 0;  // I
  int num_experts = 0;            // E
  int num_experts_per_tok = 0;    // K
  bool norm_topk_prob = false;    // transformers' default is false
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;  // sorted, no repeats (as read: a set of layer indices)
  int vocab_size = 0;
  bool tie_word_embeddings = false;
  int max_position_embeddings = 32768;

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;

  std::string torch_dtype;        // "bfloat16", "float16", "float32" or "" (informational)
  QuantMethod quant = QuantMethod::kNone;
  int quant_block_rows = 0, quant_block_cols = 0;  // kFp8Block only

  // True if layer l runs the sparse MoE block (transformers' rule: not in
  // mlp_only_layers, num_experts > 0 and (l + 1) % decoder_sparse_step == 0).
  bool is_moe_layer(int layer) const;
  int num_moe_layers() const;
  // The MoE layer shape for warp decode (layout.h), num_layers = MoE layers.
  MoeShape moe_shape() const;
};

// Parses config.json text; `source` names the file in error messages.
// Throws wd::FormatError naming the field and what is allowed.
ModelConfig parse_config(const std::string& json_text, const std::string& source = "config.json");
// Reads and parses `dir`/config.json.
ModelConfig load_config(const std::string& dir);

}  // namespace wd::model
