// config.json of Qwen3MoeForCausalLM. See warpdecode/model/config.h.
#include "warpdecode/model/config.h"

#include <algorithm>

#include "core/json_read.h"
#include "core/read_file.h"

namespace wd::model {
namespace {

using json_read::Json;

constexpr int64_t kMaxDim = 1 << 20;      // any hidden/intermediate size of a real model fits
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxVocab = 1 << 24;

using json_read::Object;

// rope_scaling (4.x) or rope_parameters (5.x): only the unscaled "default"
// RoPE is implemented; rope_theta may live inside rope_parameters.
void read_rope(const Object& r, ModelConfig& c) {
  if (r.has("rope_theta")) c.rope_theta = r.positive_number(r.at("rope_theta"), "rope_theta");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!r.has(key)) continue;
    const Json& rope = r.at(key);
    if (!rope.is_object()) r.refuse(std::string("'") + key + "' must be an object or null");
    const char* type_key = rope.contains("rope_type") ? "rope_type" : (rope.contains("type") ? "type" : nullptr);
    if (!type_key) {
      if (std::string(key) == "rope_parameters" && !rope.empty() && rope.begin()->is_object())
        r.refuse("per-layer-type 'rope_parameters' are not supported (one RoPE for every layer)");
      if (std::string(key) == "rope_scaling")
        r.refuse("'rope_scaling' has no 'rope_type': cannot tell which scaling it is");
    } else {
      const std::string type = json_read::string(rope.at(type_key), r.source(), std::string(key) + "." + type_key);
      if (type != "default")
        r.refuse(std::string(key) + " type '" + type + "' is not supported (supported: default)");
    }
    if (rope.contains("rope_theta") && !rope.at("rope_theta").is_null())
      c.rope_theta = r.positive_number(rope.at("rope_theta"), std::string(key) + ".rope_theta");
    if (rope.contains("partial_rotary_factor") &&
        json_read::number(rope.at("partial_rotary_factor"), r.source(), "partial_rotary_factor") != 1.0)
      r.refuse("partial_rotary_factor != 1 is not supported (RoPE on the whole head)");
  }
  if (r.has("partial_rotary_factor") &&
      json_read::number(r.at("partial_rotary_factor"), r.source(), "partial_rotary_factor") != 1.0)
    r.refuse("partial_rotary_factor != 1 is not supported (RoPE on the whole head)");
}

void read_quantization(const Object& r, ModelConfig& c) {
  if (!r.has("quantization_config")) return;
  const Json& q = r.at("quantization_config");
  const std::string& src = r.source();
  if (!q.is_object()) r.refuse("'quantization_config' must be an object or null");
  if (!q.contains("quant_method")) r.refuse("quantization_config has no 'quant_method'");
  const std::string method = json_read::string(q.at("quant_method"), src, "quantization_config.quant_method");
  if (method != "fp8")
    r.refuse("quantization_config.quant_method '" + method +
             "' is not supported (supported: fp8 with weight_block_size)");
  if (q.contains("fmt") && !q.at("fmt").is_null()) {
    const std::string fmt = json_read::string(q.at("fmt"), src, "quantization_config.fmt");
    if (fmt != "e4m3") r.refuse("quantization_config.fmt '" + fmt + "' is not supported (supported: e4m3)");
  }
  if (q.contains("activation_scheme") && !q.at("activation_scheme").is_null()) {
    const std::string a = json_read::string(q.at("activation_scheme"), src, "quantization_config.activation_scheme");
    if (a != "dynamic")
      r.refuse("quantization_config.activation_scheme '" + a + "' is not supported (supported: dynamic)");
  }
  if (!q.contains("weight_block_size") || q.at("weight_block_size").is_null())
    r.refuse("quantization_config: fp8 without 'weight_block_size' (per-tensor scales) is not supported");
  const Json& b = q.at("weight_block_size");
  if (!b.is_array() || b.size() != 2)
    r.refuse("quantization_config.weight_block_size must be [rows, cols], got " + json_read::shown(b));
  c.quant = QuantMethod::kFp8Block;
  c.quant_block_rows = int(json_read::integer(b[0], src, "weight_block_size[0]", 1, kMaxDim));
  c.quant_block_cols = int(json_read::integer(b[1], src, "weight_block_size[1]", 1, kMaxDim));
}

void read_attention_kind(const Object& r) {
  if (r.boolean_or("attention_bias", false)) r.refuse("attention_bias = true is not supported (Qwen3 has no biases)");
  if (r.boolean_or("use_sliding_window", false))
    r.refuse("use_sliding_window = true is not supported (full causal attention only)");
  if (r.has("layer_types")) {
    const Json& t = r.at("layer_types");
    if (!t.is_array()) r.refuse("'layer_types' must be an array");
    for (const auto& v : t) {
      const std::string s = json_read::string(v, r.source(), "layer_types[]");
      if (s != "full_attention")
        r.refuse("layer type '" + s + "' is not supported (supported: full_attention)");
    }
  }
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") r.refuse("hidden_act '" + act + "' is not supported (supported: silu)");
  if (r.integer_or("shared_expert_intermediate_size", 0, 0, kMaxDim) != 0)
    r.refuse("shared experts (shared_expert_intermediate_size > 0) are not supported");
}

}  // namespace

bool ModelConfig::is_moe_layer(int layer) const {
  // mlp_only_layers is sorted and without repeats (parse_config), so a
  // config listing millions of entries costs a log each.
  if (std::binary_search(mlp_only_layers.begin(), mlp_only_layers.end(), layer)) return false;
  return num_experts > 0 && (layer + 1) % decoder_sparse_step == 0;
}

int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (int l = 0; l < num_hidden_layers; ++l) n += is_moe_layer(l);
  return n;
}

MoeShape ModelConfig::moe_shape() const {
  MoeShape s;
  s.hidden = hidden_size;
  s.intermediate = moe_intermediate_size;
  s.experts = num_experts;
  s.top_k = num_experts_per_tok;
  s.norm_topk_prob = norm_topk_prob;
  s.num_layers = std::max(1, num_moe_layers());
  return s;
}

ModelConfig parse_config(const std::string& json_text, const std::string& source) {
  const Json root = json_read::parse(json_text, source);
  if (!root.is_object()) throw FormatError(source + ": the top level must be a JSON object");
  const Object r(root, source);
  ModelConfig c;

  const std::string type = r.string_or("model_type", "qwen3_moe");
  if (type != "qwen3_moe") r.refuse("model_type '" + type + "' is not supported (supported: qwen3_moe)");
  if (r.has("architectures")) {
    const Json& a = r.at("architectures");
    if (!a.is_array()) r.refuse("'architectures' must be an array");
    bool found = false;
    for (const auto& v : a) found |= json_read::string(v, source, "architectures[]") == "Qwen3MoeForCausalLM";
    if (!found)
      r.refuse("architectures " + json_read::shown(a) + " are not supported (supported: Qwen3MoeForCausalLM)");
  }

  c.hidden_size = int(r.integer("hidden_size", 1, kMaxDim));
  c.num_hidden_layers = int(r.integer("num_hidden_layers", 1, kMaxLayers));
  c.num_attention_heads = int(r.integer("num_attention_heads", 1, 4096));
  // Absent: 4, transformers' Qwen3MoeConfig default whatever num_attention_heads
  // is (checked on transformers 5.17.0, which also refuses null here).
  c.num_key_value_heads = int(r.integer_or("num_key_value_heads", 4, 1, 4096));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.refuse("num_attention_heads = " + std::to_string(c.num_attention_heads) +
             " is not a multiple of num_key_value_heads = " + std::to_string(c.num_key_value_heads));
  if (r.has("head_dim")) {
    c.head_dim = int(r.integer("head_dim", 1, 4096));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.refuse("no 'head_dim' and hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) r.refuse("head_dim = " + std::to_string(c.head_dim) + " must be even (RoPE)");

  if (r.has("num_experts") && r.has("num_local_experts") &&
      r.at("num_experts") != r.at("num_local_experts"))
    r.refuse("'num_experts' and 'num_local_experts' disagree");
  const char* experts_key = r.has("num_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = int(r.integer(experts_key, 0, 1 << 16));
  if (c.num_experts == 0) r.refuse(std::string(experts_key) + " = 0 (a dense model) is not supported");
  c.num_experts_per_tok = int(r.integer("num_experts_per_tok", 1, c.num_experts));
  c.moe_intermediate_size = int(r.integer("moe_intermediate_size", 1, kMaxDim));
  c.norm_topk_prob = r.boolean_or("norm_topk_prob", false);
  c.decoder_sparse_step = int(r.integer_or("decoder_sparse_step", 1, 1, kMaxLayers));
  if (r.has("mlp_only_layers")) {
    const Json& m = r.at("mlp_only_layers");
    if (!m.is_array()) r.refuse("'mlp_only_layers' must be an array of layer indices");
    for (const auto& v : m)
      c.mlp_only_layers.push_back(int(json_read::integer(v, source, "mlp_only_layers[]", 0, c.num_hidden_layers - 1)));
    // A set of layers (transformers tests membership): sorted, repeats dropped.
    std::sort(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
    c.mlp_only_layers.erase(std::unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end()),
                            c.mlp_only_layers.end());
  }
  bool any_dense = false;
  for (int l = 0; l < c.num_hidden_layers; ++l) any_dense |= !c.is_moe_layer(l);
  c.intermediate_size = any_dense ? int(r.integer("intermediate_size", 1, kMaxDim))
                                  : int(r.integer_or("intermediate_size", 0, 0, kMaxDim));
  c.vocab_size = int(r.integer("vocab_size", 1, kMaxVocab));
  c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
  c.max_position_embeddings = int(r.integer_or("max_position_embeddings", 32768, 1, int64_t(1) << 30));
  if (r.has("rms_norm_eps")) c.rms_norm_eps = r.positive_number(r.at("rms_norm_eps"), "rms_norm_eps");

  read_rope(r, c);
  read_attention_kind(r);
  read_quantization(r, c);

  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!r.has(key)) continue;
    c.torch_dtype = json_read::string(r.at(key), source, key);
    if (c.torch_dtype != "bfloat16" && c.torch_dtype != "float16" && c.torch_dtype != "float32")
      r.refuse(std::string(key) + " '" + c.torch_dtype + "' is not supported (supported: bfloat16, float16, float32)");
    break;
  }

  try {
    c.moe_shape().validate();
  } catch (const InvalidArgument& e) {
    r.refuse(std::string("MoE shape not supported by warp decode: ") + e.what());
  }
  return c;
}

ModelConfig load_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::string text;
  try {
    text = read_file(path);
  } catch (const FormatError& e) {
    throw FormatError(std::string(e.what()) + " (is '" + dir + "' a Hugging Face model directory?)");
  }
  return parse_config(text, path);
}

}  // namespace wd::model
