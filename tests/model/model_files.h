// Test helpers: safetensors files and tiny Qwen3-MoE checkpoints written by
// the tests themselves (seeded values, every weight exactly representable in
// BF16 so that any source dtype holds the same numbers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wd::model::testing {

// A fresh empty directory under the test temp dir.
std::string make_temp_dir(const std::string& tag);
void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

struct RawTensor {
  std::string name;
  std::string dtype;              // safetensors spelling
  std::vector<uint64_t> shape;
  std::string bytes;              // row-major little-endian data
};

// The bytes of a safetensors file holding `tensors` in order; the header is
// padded with spaces to a multiple of 8 unless `pad` is false.
std::string safetensors_bytes(const std::vector<RawTensor>& tensors, bool pad = true,
                              const std::string& metadata_json = "");
// A header made of `json` verbatim followed by `data_bytes` zero bytes.
std::string raw_safetensors(const std::string& json, size_t data_bytes);

enum class SourceDType { kBF16, kF16, kF32, kFp8Block };

struct TinyModelSpec {
  int hidden = 64, layers = 3, heads = 4, kv_heads = 2, head_dim = 16;
  int moe_intermediate = 32, intermediate = 96, experts = 8, top_k = 2, vocab = 128;
  std::vector<int> mlp_only_layers = {1};
  bool tie = false;
  bool fused_experts = false;     // gate_up_proj / down_proj stacks instead of per-expert tensors
  int shards = 1;                 // 1: model.safetensors; 2: index + two shards
  SourceDType dtype = SourceDType::kBF16;
  int block = 24;                 // FP8 block size (does not divide 32 or 64: ragged blocks)
  uint64_t seed = 7;
  double rope_theta = 10000.0;
  // FP8 only: the last block scale of this tensor is written as bad_scale.
  std::string bad_scale_tensor;
  float bad_scale = 0.0f;
};

// Writes config.json and the safetensors files of a random Qwen3-MoE model.
// Returns the tensors written (by name, as logical FP32 values for tests).
void write_tiny_model(const std::string& dir, const TinyModelSpec& spec);
// A fresh directory named after `tag` holding the tiny model of `spec`.
std::string tiny_model_dir(const std::string& tag, const TinyModelSpec& spec);
std::string tiny_config_json(const TinyModelSpec& spec);

// The value write_tiny_model stores for element i of tensor `name` (before
// the dtype conversion; BF16-exact; FP8 checkpoints quantize it).
float tiny_value(const TinyModelSpec& spec, const std::string& name, uint64_t i);

}  // namespace wd::model::testing
