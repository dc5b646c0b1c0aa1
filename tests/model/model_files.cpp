// Test checkpoints written in C++. See model_files.h.
#include "model_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "warpdecode/formats.h"
#include "warpdecode/weights.h"

namespace wd::model::testing {
namespace {

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (const unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

template <typename T>
void append(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

uint16_t float_to_f16(float f) {
  // Test data is BF16-exact and inside F16's normal range (tiny_value), so
  // the conversion only drops zero mantissa bits.
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  if ((u & 0x7FFFFFFFu) == 0) return uint16_t(sign);
  const int exp = int((u >> 23) & 0xFF) - 127 + 15;
  if (exp <= 0 || exp >= 31) throw std::runtime_error("test value outside F16 normal range");
  return uint16_t(sign | (uint32_t(exp) << 10) | ((u >> 13) & 0x3FFu));
}

struct Logical {
  std::string name;
  std::vector<uint64_t> shape;
  bool quantizable;  // an FP8 checkpoint stores it as F8_E4M3 + block scales
};

std::vector<Logical> logical_tensors(const TinyModelSpec& s) {
  const uint64_t H = s.hidden, D = s.head_dim, V = s.vocab, I = s.moe_intermediate, F = s.intermediate;
  std::vector<Logical> t;
  t.push_back({"model.embed_tokens.weight", {V, H}, false});
  t.push_back({"model.norm.weight", {H}, false});
  if (!s.tie) t.push_back({"lm_head.weight", {V, H}, false});
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, false});
    t.push_back({p + "post_attention_layernorm.weight", {H}, false});
    t.push_back({p + "self_attn.q_proj.weight", {uint64_t(s.heads) * D, H}, true});
    t.push_back({p + "self_attn.k_proj.weight", {uint64_t(s.kv_heads) * D, H}, true});
    t.push_back({p + "self_attn.v_proj.weight", {uint64_t(s.kv_heads) * D, H}, true});
    t.push_back({p + "self_attn.o_proj.weight", {H, uint64_t(s.heads) * D}, true});
    t.push_back({p + "self_attn.q_norm.weight", {D}, false});
    t.push_back({p + "self_attn.k_norm.weight", {D}, false});
    bool dense = false;
    for (int d : s.mlp_only_layers) dense |= d == l;
    if (dense) {
      t.push_back({p + "mlp.gate_proj.weight", {F, H}, true});
      t.push_back({p + "mlp.up_proj.weight", {F, H}, true});
      t.push_back({p + "mlp.down_proj.weight", {H, F}, true});
    } else {
      t.push_back({p + "mlp.gate.weight", {uint64_t(s.experts), H}, false});
      for (int e = 0; e < s.experts; ++e) {
        const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
        t.push_back({q + "gate_proj.weight", {I, H}, true});
        t.push_back({q + "up_proj.weight", {I, H}, true});
        t.push_back({q + "down_proj.weight", {H, I}, true});
      }
    }
  }
  return t;
}

std::string encode(const std::vector<float>& v, SourceDType d) {
  std::string out;
  for (const float x : v) {
    switch (d) {
      case SourceDType::kF32: append(out, x); break;
      case SourceDType::kF16: append(out, float_to_f16(x)); break;
      default: append(out, float_to_bf16(x)); break;
    }
  }
  return out;
}

std::vector<float> values(const TinyModelSpec& s, const Logical& t) {
  uint64_t n = 1;
  for (auto d : t.shape) n *= d;
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = tiny_value(s, t.name, i);
  return v;
}

// FP8 block quantization as FP8 checkpoints store it: per (b, b) block
// scale_inv = amax / 448, q = e4m3(w / scale_inv).
void quantize_fp8_block(const std::vector<float>& w, uint64_t rows, uint64_t cols, int b, std::string& q,
                        std::string& scales) {
  const uint64_t sr = (rows + b - 1) / b, sc = (cols + b - 1) / b;
  std::vector<float> s(sr * sc, 0.0f);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      float& a = s[(r / b) * sc + c / b];
      a = std::max(a, std::fabs(w[r * cols + c]));
    }
  for (auto& x : s) x = x > 0 ? x / 448.0f : 1.0f;
  q.clear();
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      q += char(float_to_e4m3(w[r * cols + c] / s[(r / b) * sc + c / b]));
  scales.clear();
  for (const float x : s) append(scales, x);
}

}  // namespace

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = ::testing::TempDir() + "wd_model_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return std::string(buf.data());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string safetensors_bytes(const std::vector<RawTensor>& tensors, bool pad,
                              const std::string& metadata_json) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_json.empty()) h["__metadata__"] = nlohmann::ordered_json::parse(metadata_json);
  uint64_t off = 0;
  std::string data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
    data += t.bytes;
  }
  std::string header = h.dump();
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  append(out, uint64_t(header.size()));
  return out + header + data;
}

std::string raw_safetensors(const std::string& json, size_t data_bytes) {
  std::string out;
  append(out, uint64_t(json.size()));
  return out + json + std::string(data_bytes, '\0');
}

float tiny_value(const TinyModelSpec& s, const std::string& name, uint64_t i) {
  const float n = synthetic_normal(s.seed, fnv1a(name), i);
  float v;
  if (name.find("norm.weight") != std::string::npos) {
    v = 1.0f + 0.1f * n;
  } else if (name.find("embed_tokens") != std::string::npos) {
    v = n;
  } else {
    // Linear weights N(0, 1/fan_in): fan_in is the row length.
    uint64_t fan_in = uint64_t(s.hidden);
    if (name.find("o_proj") != std::string::npos) fan_in = uint64_t(s.heads) * s.head_dim;
    if (name.find("experts.") != std::string::npos && name.find("down_proj") != std::string::npos)
      fan_in = uint64_t(s.moe_intermediate);
    else if (name.find("down_proj") != std::string::npos)
      fan_in = uint64_t(s.intermediate);
    v = n / std::sqrt(float(fan_in));
  }
  // Magnitudes below 2^-12 are raised to it: every value is then exact in
  // BF16 and in F16 (normal from 2^-14), so every source dtype holds the
  // same numbers.
  if (std::fabs(v) < 0x1p-12f) v = std::copysign(0x1p-12f, v);
  return bf16_to_float(float_to_bf16(v));
}

std::string tiny_config_json(const TinyModelSpec& s) {
  nlohmann::ordered_json c = {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"model_type", "qwen3_moe"},
      {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", s.head_dim},
      {"moe_intermediate_size", s.moe_intermediate},
      {"intermediate_size", s.intermediate},
      {"num_experts", s.experts},
      {"num_experts_per_tok", s.top_k},
      {"norm_topk_prob", true},
      {"decoder_sparse_step", 1},
      {"mlp_only_layers", s.mlp_only_layers},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", s.rope_theta},
      {"rope_scaling", nullptr},
      {"vocab_size", s.vocab},
      {"tie_word_embeddings", s.tie},
      {"max_position_embeddings", 4096},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"use_sliding_window", false},
      {"sliding_window", nullptr},
      {"torch_dtype", s.dtype == SourceDType::kF32 ? "float32" : s.dtype == SourceDType::kF16 ? "float16" : "bfloat16"},
  };
  if (s.dtype == SourceDType::kFp8Block)
    c["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {s.block, s.block}}};
  return c.dump(2);
}

std::string tiny_model_dir(const std::string& tag, const TinyModelSpec& spec) {
  const std::string dir = make_temp_dir(tag);
  write_tiny_model(dir, spec);
  return dir;
}

void write_tiny_model(const std::string& dir, const TinyModelSpec& s) {
  write_file(dir + "/config.json", tiny_config_json(s));
  std::vector<RawTensor> raw;
  const std::vector<Logical> logical = logical_tensors(s);
  const uint64_t H = s.hidden, I = s.moe_intermediate, E = s.experts;
  for (size_t k = 0; k < logical.size(); ++k) {
    const Logical& t = logical[k];
    const size_t pos = t.name.find("mlp.experts.0.gate_proj.weight");
    if (s.fused_experts && pos != std::string::npos) {
      // One layer's experts as gate_up_proj (E, 2I, H) and down_proj (E, H, I).
      const std::string p = t.name.substr(0, pos) + "mlp.experts.";
      std::vector<float> gu, dn;
      for (uint64_t e = 0; e < E; ++e) {
        for (const char* m : {"gate_proj", "up_proj"}) {
          const auto v = values(s, {p + std::to_string(e) + "." + m + ".weight", {I, H}, true});
          gu.insert(gu.end(), v.begin(), v.end());
        }
        const auto v = values(s, {p + std::to_string(e) + ".down_proj.weight", {H, I}, true});
        dn.insert(dn.end(), v.begin(), v.end());
      }
      const SourceDType d = s.dtype == SourceDType::kFp8Block ? SourceDType::kBF16 : s.dtype;
      const char* dt = d == SourceDType::kF32 ? "F32" : d == SourceDType::kF16 ? "F16" : "BF16";
      raw.push_back({p + "gate_up_proj", dt, {E, 2 * I, H}, encode(gu, d)});
      raw.push_back({p + "down_proj", dt, {E, H, I}, encode(dn, d)});
      k += size_t(3 * E) - 1;  // skip the per-expert tensors of this layer
      continue;
    }
    const std::vector<float> v = values(s, t);
    if (s.dtype == SourceDType::kFp8Block && t.quantizable) {
      std::string q, sc;
      quantize_fp8_block(v, t.shape[0], t.shape[1], s.block, q, sc);
      if (t.name == s.bad_scale_tensor) std::memcpy(&sc[sc.size() - 4], &s.bad_scale, 4);
      raw.push_back({t.name, "F8_E4M3", t.shape, q});
      raw.push_back({t.name + "_scale_inv", "F32",
                     {(t.shape[0] + s.block - 1) / s.block, (t.shape[1] + s.block - 1) / s.block}, sc});
      continue;
    }
    const SourceDType d = s.dtype == SourceDType::kFp8Block ? SourceDType::kBF16 : s.dtype;
    raw.push_back({t.name, d == SourceDType::kF32 ? "F32" : d == SourceDType::kF16 ? "F16" : "BF16", t.shape,
                   encode(v, d)});
  }
  if (s.shards == 1) {
    write_file(dir + "/model.safetensors", safetensors_bytes(raw));
    return;
  }
  // Two shards split at the middle tensor, and the index.
  const size_t half = raw.size() / 2;
  const std::vector<RawTensor> a(raw.begin(), raw.begin() + long(half)), b(raw.begin() + long(half), raw.end());
  const std::string fa = "model-00001-of-00002.safetensors", fb = "model-00002-of-00002.safetensors";
  write_file(dir + "/" + fa, safetensors_bytes(a, true, R"({"format": "pt"})"));
  write_file(dir + "/" + fb, safetensors_bytes(b, true, R"({"format": "pt"})"));
  nlohmann::ordered_json index;
  uint64_t total = 0;
  for (const auto& t : raw) total += t.bytes.size();
  index["metadata"] = {{"total_size", total}};
  for (size_t i = 0; i < raw.size(); ++i) index["weight_map"][raw[i].name] = i < half ? fa : fb;
  write_file(dir + "/model.safetensors.index.json", index.dump(2));
}

}  // namespace wd::model::testing
