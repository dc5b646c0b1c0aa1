// config.json: both transformers dialects read, every unsupported feature
// refused by name.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_files.h"
#include "warpdecode/error.h"
#include "warpdecode/model/config.h"

namespace wd::model {
namespace {

using Json = nlohmann::json;

// The public Qwen3-30B-A3B config.json (transformers 4.x dialect).
const char* kQwen3_30B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
  "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
  "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

Json base() { return Json::parse(kQwen3_30B); }

std::string refusal(const Json& j) {
  try {
    parse_config(j.dump(), "config.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Config, ReadsQwen3_30B) {
  const ModelConfig c = parse_config(kQwen3_30B);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 6144);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.decoder_sparse_step, 1);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.quant, QuantMethod::kNone);
  EXPECT_EQ(c.num_moe_layers(), 48);
  const MoeShape s = c.moe_shape();
  EXPECT_EQ(s.hidden, 2048);
  EXPECT_EQ(s.intermediate, 768);
  EXPECT_EQ(s.experts, 128);
  EXPECT_EQ(s.top_k, 8);
  EXPECT_EQ(s.num_layers, 48);
}

TEST(Config, ReadsTransformers5Dialect) {
  Json j = base();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("torch_dtype");
  j.erase("num_experts");
  j.erase("head_dim");
  j["hidden_size"] = 256;
  j["num_attention_heads"] = 4;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  j["dtype"] = "float32";
  j["num_local_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["layer_types"] = Json::array({"full_attention", "full_attention"});
  const ModelConfig c = parse_config(j.dump());
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.head_dim, 64);  // hidden / heads when absent
}

TEST(Config, DefaultsFollowTransformers) {
  Json j = base();
  for (const char* k : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "rms_norm_eps", "rope_theta",
                        "num_key_value_heads", "tie_word_embeddings", "max_position_embeddings"})
    j.erase(k);
  const ModelConfig c = parse_config(j.dump());
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.decoder_sparse_step, 1);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.num_key_value_heads, 4);  // not num_attention_heads (32)
  EXPECT_EQ(c.max_position_embeddings, 32768);
  // transformers' 4 holds for any head count: 6 query heads cannot share 4
  // key/value heads, refused as if the config had said so.
  j["num_attention_heads"] = 6;
  j["head_dim"] = 128;
  EXPECT_EQ(refusal(j), "config.json: num_attention_heads = 6 is not a multiple of num_key_value_heads = 4");
}

TEST(Config, DenseLayersFromMlpOnlyLayersAndSparseStep) {
  Json j = base();
  j["num_hidden_layers"] = 6;
  j["mlp_only_layers"] = {0, 5};
  j["decoder_sparse_step"] = 2;
  const ModelConfig c = parse_config(j.dump());
  // transformers: sparse iff not in mlp_only_layers and (l + 1) % step == 0
  const bool want[6] = {false, true, false, true, false, false};
  for (int l = 0; l < 6; ++l) EXPECT_EQ(c.is_moe_layer(l), want[l]) << "layer " << l;
  EXPECT_EQ(c.num_moe_layers(), 2);
  // A set: unordered and repeated entries read as the layers they name.
  j["mlp_only_layers"] = {5, 0, 5, 0};
  const ModelConfig r = parse_config(j.dump());
  EXPECT_EQ(r.mlp_only_layers, (std::vector<int>{0, 5}));
  for (int l = 0; l < 6; ++l) EXPECT_EQ(r.is_moe_layer(l), want[l]) << "layer " << l;
  j.erase("intermediate_size");
  EXPECT_EQ(refusal(j), "config.json: required field 'intermediate_size' is missing");
}

TEST(Config, ReadsFp8BlockQuantization) {
  Json j = base();
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                              {"weight_block_size", {128, 128}}};
  const ModelConfig c = parse_config(j.dump());
  EXPECT_EQ(c.quant, QuantMethod::kFp8Block);
  EXPECT_EQ(c.quant_block_rows, 128);
  EXPECT_EQ(c.quant_block_cols, 128);
}

struct Case {
  const char* what;
  void (*edit)(Json&);
  const char* message;
};

TEST(Config, RefusesWhatWeDoNotImplementByName) {
  const Case cases[] = {
      {"architecture", [](Json& j) { j["model_type"] = "llama"; },
       "config.json: model_type 'llama' is not supported (supported: qwen3_moe)"},
      {"architectures", [](Json& j) { j["architectures"] = {"Qwen3MoeForSequenceClassification"}; },
       "config.json: architectures [\"Qwen3MoeForSequenceClassification\"] are not supported (supported: Qwen3MoeForCausalLM)"},
      {"yarn", [](Json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
       "config.json: rope_scaling type 'yarn' is not supported (supported: default)"},
      {"legacy type key", [](Json& j) { j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}}; },
       "config.json: rope_scaling type 'dynamic' is not supported (supported: default)"},
      {"v5 linear", [](Json& j) { j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e6}}; },
       "config.json: rope_parameters type 'linear' is not supported (supported: default)"},
      {"sliding window", [](Json& j) { j["use_sliding_window"] = true; j["sliding_window"] = 4096; },
       "config.json: use_sliding_window = true is not supported (full causal attention only)"},
      {"layer types", [](Json& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; },
       "config.json: layer type 'sliding_attention' is not supported (supported: full_attention)"},
      {"bias", [](Json& j) { j["attention_bias"] = true; },
       "config.json: attention_bias = true is not supported (Qwen3 has no biases)"},
      {"activation", [](Json& j) { j["hidden_act"] = "gelu"; },
       "config.json: hidden_act 'gelu' is not supported (supported: silu)"},
      {"partial rotary", [](Json& j) { j["partial_rotary_factor"] = 0.5; },
       "config.json: partial_rotary_factor != 1 is not supported (RoPE on the whole head)"},
      {"awq", [](Json& j) { j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}}; },
       "config.json: quantization_config.quant_method 'awq' is not supported (supported: fp8 with weight_block_size)"},
      {"per-tensor fp8", [](Json& j) { j["quantization_config"] = {{"quant_method", "fp8"}}; },
       "config.json: quantization_config: fp8 without 'weight_block_size' (per-tensor scales) is not supported"},
      {"static activations",
       [](Json& j) {
         j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "static"},
                                     {"weight_block_size", {128, 128}}};
       },
       "config.json: quantization_config.activation_scheme 'static' is not supported (supported: dynamic)"},
      {"e5m2", [](Json& j) { j["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}}; },
       "config.json: quantization_config.fmt 'e5m2' is not supported (supported: e4m3)"},
      {"shared experts", [](Json& j) { j["shared_expert_intermediate_size"] = 512; },
       "config.json: shared experts (shared_expert_intermediate_size > 0) are not supported"},
      {"dense model", [](Json& j) { j["num_experts"] = 0; },
       "config.json: num_experts = 0 (a dense model) is not supported"},
      {"float64", [](Json& j) { j["torch_dtype"] = "float64"; },
       "config.json: torch_dtype 'float64' is not supported (supported: bfloat16, float16, float32)"},
      {"I not a multiple of 32", [](Json& j) { j["moe_intermediate_size"] = 100; },
       "config.json: MoE shape not supported by warp decode: moe intermediate size I = 100 must be a positive multiple of 32 (one MXFP8 block)"},
      {"top-k above 16", [](Json& j) { j["num_experts_per_tok"] = 20; },
       "config.json: MoE shape not supported by warp decode: top-k K = 20 must be in [1, min(E, 16)] with E = 128"},
  };
  for (const auto& c : cases) {
    Json j = base();
    c.edit(j);
    EXPECT_EQ(refusal(j), c.message) << c.what;
  }
}

TEST(Config, MalformedFilesGetOneClearError) {
  const Case cases[] = {
      {"missing", [](Json& j) { j.erase("hidden_size"); }, "config.json: required field 'hidden_size' is missing"},
      {"string", [](Json& j) { j["hidden_size"] = "2048"; },
       "config.json: 'hidden_size' must be an integer, got \"2048\""},
      {"float", [](Json& j) { j["num_hidden_layers"] = 48.5; },
       "config.json: 'num_hidden_layers' must be an integer, got 48.5"},
      {"negative", [](Json& j) { j["vocab_size"] = -1; },
       "config.json: 'vocab_size' = -1 is out of range [1, 16777216]"},
      {"gqa", [](Json& j) { j["num_key_value_heads"] = 5; },
       "config.json: num_attention_heads = 32 is not a multiple of num_key_value_heads = 5"},
      {"odd head", [](Json& j) { j["head_dim"] = 127; }, "config.json: head_dim = 127 must be even (RoPE)"},
      {"layer index", [](Json& j) { j["mlp_only_layers"] = {48}; },
       "config.json: 'mlp_only_layers[]' = 48 is out of range [0, 47]"},
      {"top-k above E", [](Json& j) { j["num_experts_per_tok"] = 129; },
       "config.json: 'num_experts_per_tok' = 129 is out of range [1, 128]"},
      {"eps", [](Json& j) { j["rms_norm_eps"] = 0; }, "config.json: 'rms_norm_eps' = 0 must be > 0"},
      {"bool", [](Json& j) { j["norm_topk_prob"] = 1; },
       "config.json: 'norm_topk_prob' must be true or false, got 1"},
      {"experts disagree", [](Json& j) { j["num_local_experts"] = 64; },
       "config.json: 'num_experts' and 'num_local_experts' disagree"},
  };
  for (const auto& c : cases) {
    Json j = base();
    c.edit(j);
    EXPECT_EQ(refusal(j), c.message) << c.what;
  }
  EXPECT_THROW(parse_config("{\"hidden_size\": 2048,"), FormatError);
  try {
    parse_config("[1, 2]", "x/config.json");
    FAIL() << "accepted an array";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "x/config.json: the top level must be a JSON object");
  }
  try {
    parse_config("{\"hidden_size\": 2048,", "config.json");
    FAIL() << "accepted truncated JSON";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("config.json: invalid JSON: ", 0), 0u) << e.what();
  }
  // A value nested 100 000 deep (200 KB): refused by name where printing it
  // in the type error would recurse a stack frame a level (it crashed).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_config("{\"hidden_size\": " + deep + "}", "config.json");
    FAIL() << "accepted 100 000 levels of nesting";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "config.json: JSON nests deeper than 256 levels");
  }
}

TEST(Config, LoadsFromADirectory) {
  const std::string dir = testing::make_temp_dir("config");
  testing::write_file(dir + "/config.json", kQwen3_30B);
  EXPECT_EQ(load_config(dir).hidden_size, 2048);
  try {
    load_config(dir + "/nope");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '" + dir + "/nope/config.json': No such file or directory (is '" +
                                         dir + "/nope' a Hugging Face model directory?)");
  }
}

}  // namespace
}  // namespace wd::model
