// HF tensor names -> ModelWeights. See warpdecode/model/model_weights.h.
#include "warpdecode/model/model_weights.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <vector>

#include "warpdecode/error.h"
#include "warpdecode/model/tensor_data.h"

namespace wd::model {
namespace {

std::string shape_str(const std::vector<uint64_t>& s) {
  TensorInfo t;
  t.shape = s;
  return t.shape_string();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Resolves names against the checkpoint and records which tensors were used.
class Mapper {
 public:
  Mapper(const ModelConfig& c, const Checkpoint& ckpt) : c_(c), ckpt_(ckpt) {}

  const TensorInfo& tensor(const std::string& name, const std::vector<uint64_t>& shape) {
    const TensorInfo& t = ckpt_.at(name);
    if (t.shape != shape)
      throw FormatError(ckpt_.dir() + ": tensor '" + name + "' has shape " + t.shape_string() +
                        ", expected " + shape_str(shape) + " from config.json");
    if (!dtype_decodable(t.dtype))
      throw FormatError(ckpt_.dir() + ": tensor '" + name + "' has dtype " + to_string(t.dtype) +
                        " (supported: BF16, F16, F32, F8_E4M3)");
    used_.insert(name);
    return t;
  }

  // A weight matrix `name` (rows, cols); vectors have rows = 1 and a 1-D
  // shape. FP8 weights need `<name>_scale_inv` and a block quantization_config.
  Matrix matrix(const std::string& name, int64_t rows, int64_t cols, bool vector = false) {
    Matrix m;
    m.weight = &tensor(name, vector ? std::vector<uint64_t>{uint64_t(cols)}
                                    : std::vector<uint64_t>{uint64_t(rows), uint64_t(cols)});
    m.rows = rows;
    m.cols = cols;
    if (m.weight->dtype == DType::kF8E4M3) {
      if (vector) throw FormatError(ckpt_.dir() + ": tensor '" + name + "' is F8_E4M3; norms must be floating point");
      if (c_.quant != QuantMethod::kFp8Block)
        throw FormatError(ckpt_.dir() + ": tensor '" + name +
                          "' is F8_E4M3 but config.json has no fp8 quantization_config with weight_block_size");
      m.block_rows = c_.quant_block_rows;
      m.block_cols = c_.quant_block_cols;
      const std::string sname = name + "_scale_inv";
      if (!ckpt_.find(sname))
        throw FormatError(ckpt_.dir() + ": FP8 tensor '" + name + "' has no block scales '" + sname + "'");
      m.scale_inv = &tensor(sname, {uint64_t(ceil_div(rows, m.block_rows)), uint64_t(ceil_div(cols, m.block_cols))});
      if (m.scale_inv->dtype != DType::kF32 && m.scale_inv->dtype != DType::kBF16)
        throw FormatError(ckpt_.dir() + ": block scales '" + sname + "' are " + to_string(m.scale_inv->dtype) +
                          " (supported: F32, BF16)");
      fp8_ = true;
    }
    return m;
  }

  bool has(const std::string& name) const { return ckpt_.find(name) != nullptr; }
  bool fp8() const { return fp8_; }

  // Every checkpoint tensor must have been used or be on the ignore list.
  std::vector<const TensorInfo*> check_all_used() const {
    std::vector<const TensorInfo*> ignored;
    for (const TensorInfo* t : ckpt_.tensors()) {
      if (used_.count(t->name)) continue;
      static const std::string kInvFreq = "rotary_emb.inv_freq";
      const bool inv_freq = t->name.size() >= kInvFreq.size() &&
                            t->name.compare(t->name.size() - kInvFreq.size(), kInvFreq.size(), kInvFreq) == 0;
      if (inv_freq || (c_.tie_word_embeddings && t->name == "lm_head.weight")) {
        ignored.push_back(t);
        continue;
      }
      throw FormatError(ckpt_.dir() + ": unexpected tensor '" + t->name + "' " + t->shape_string() +
                        " (not part of a Qwen3MoeForCausalLM with this config.json)");
    }
    return ignored;
  }

 private:
  const ModelConfig& c_;
  const Checkpoint& ckpt_;
  std::set<std::string> used_;
  bool fp8_ = false;
};

MoeLayerWeights map_experts(Mapper& m, const ModelConfig& c, const std::string& p) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, E = c.num_experts;
  MoeLayerWeights x;
  x.router = m.matrix(p + "gate.weight", E, H);
  const std::string gu = p + "experts.gate_up_proj", dn = p + "experts.down_proj";
  x.fused = m.has(gu) || m.has(dn);
  const TensorInfo* g = nullptr;
  const TensorInfo* d = nullptr;
  if (x.fused) {
    g = &m.tensor(gu, {uint64_t(E), uint64_t(2 * I), uint64_t(H)});
    d = &m.tensor(dn, {uint64_t(E), uint64_t(H), uint64_t(I)});
    if (g->dtype == DType::kF8E4M3 || d->dtype == DType::kF8E4M3)
      throw FormatError(g->file + ": fused FP8 expert tensors ('" + gu + "') are not supported");
  }
  for (int64_t e = 0; e < E; ++e) {
    if (x.fused) {
      x.gate.push_back(Matrix{g, uint64_t(e * 2 * I * H), I, H, nullptr, 0, 0});
      x.up.push_back(Matrix{g, uint64_t(e * 2 * I * H + I * H), I, H, nullptr, 0, 0});
      x.down.push_back(Matrix{d, uint64_t(e * H * I), H, I, nullptr, 0, 0});
    } else {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      x.gate.push_back(m.matrix(q + "gate_proj.weight", I, H));
      x.up.push_back(m.matrix(q + "up_proj.weight", I, H));
      x.down.push_back(m.matrix(q + "down_proj.weight", H, I));
    }
  }
  return x;
}

// Block scales [first, first + n) of m, decoded: refuses one that is not
// finite, or so large that its block's values could overflow FP32 (past
// FLT_MAX / 448, 448 the largest E4M3 value; a checkpoint's scales are
// amax / 448), naming its block.
template <typename T>
void check_scales(const Matrix& m, uint64_t first, uint64_t n, const T* s) {
  constexpr double kLargest = double(std::numeric_limits<float>::max()) / 448.0;
  for (uint64_t i = 0; i < n; ++i) {
    if (std::isfinite(s[i]) && std::fabs(double(s[i])) <= kLargest) continue;
    const uint64_t cols = m.scale_inv->shape.size() == 2 ? m.scale_inv->shape[1] : 1;
    const uint64_t b = first + i;
    char value[32];
    std::snprintf(value, sizeof value, "%.6g", double(s[i]));
    const std::string what = std::isnan(s[i])   ? "NaN"
                             : std::isinf(s[i]) ? "an infinite value"
                                                : std::string(value) + ", past FLT_MAX / 448,";
    throw FormatError(m.scale_inv->file + ": block scales '" + m.scale_inv->name + "' hold " + what + " at block (" +
                      std::to_string(b / cols) + ", " + std::to_string(b % cols) + ")");
  }
}

template <typename OutT>
void read_rows_impl(const Matrix& m, int64_t r0, int64_t n, OutT* out) {
  WD_CHECK(r0 >= 0 && n >= 0 && r0 + n <= m.rows, "rows [", r0, ", ", r0 + n, ") outside a matrix of ",
           m.rows, " rows");
  decode(*m.weight, m.offset + uint64_t(r0) * m.cols, uint64_t(n) * m.cols, out);
  if (!m.scale_inv) return;
  // w[r][c] = e4m3 * scale_inv[r / block_rows][c / block_cols]
  const int64_t scale_cols = (m.cols + m.block_cols - 1) / m.block_cols;
  std::vector<OutT> scales(static_cast<size_t>(scale_cols));
  int64_t loaded = -1;
  for (int64_t r = r0; r < r0 + n; ++r) {
    const int64_t br = r / m.block_rows;
    if (br != loaded) {
      decode(*m.scale_inv, uint64_t(br * scale_cols), uint64_t(scale_cols), scales.data());
      check_scales(m, uint64_t(br * scale_cols), uint64_t(scale_cols), scales.data());
      loaded = br;
    }
    OutT* row = out + (r - r0) * m.cols;
    for (int64_t col = 0; col < m.cols; ++col) row[col] *= scales[size_t(col / m.block_cols)];
  }
}

}  // namespace

void Matrix::read_rows(int64_t r0, int64_t n, float* out) const { read_rows_impl(*this, r0, n, out); }
void Matrix::read_rows(int64_t r0, int64_t n, double* out) const { read_rows_impl(*this, r0, n, out); }

void Matrix::read_block_scales(float* out) const {
  WD_CHECK(scale_inv != nullptr, "read_block_scales on a matrix without block scales");
  decode(*scale_inv, 0, scale_inv->numel(), out);
  check_scales(*this, 0, scale_inv->numel(), out);
}

ModelWeights ModelWeights::map(const ModelConfig& c, const Checkpoint& ckpt) {
  Mapper m(c, ckpt);
  ModelWeights w;
  w.config = c;
  const int64_t H = c.hidden_size, D = c.head_dim, V = c.vocab_size;
  const int64_t nq = c.num_attention_heads, nkv = c.num_key_value_heads;
  w.embed_tokens = m.matrix("model.embed_tokens.weight", V, H);
  w.norm = m.matrix("model.norm.weight", 1, H, true);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : m.matrix("lm_head.weight", V, H);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.input_layernorm = m.matrix(p + "input_layernorm.weight", 1, H, true);
    L.post_attention_layernorm = m.matrix(p + "post_attention_layernorm.weight", 1, H, true);
    L.attn.q_proj = m.matrix(p + "self_attn.q_proj.weight", nq * D, H);
    L.attn.k_proj = m.matrix(p + "self_attn.k_proj.weight", nkv * D, H);
    L.attn.v_proj = m.matrix(p + "self_attn.v_proj.weight", nkv * D, H);
    L.attn.o_proj = m.matrix(p + "self_attn.o_proj.weight", H, nq * D);
    L.attn.q_norm = m.matrix(p + "self_attn.q_norm.weight", 1, D, true);
    L.attn.k_norm = m.matrix(p + "self_attn.k_norm.weight", 1, D, true);
    L.moe = c.is_moe_layer(l);
    if (L.moe) {
      L.experts = map_experts(m, c, p + "mlp.");
    } else {
      const int64_t F = c.intermediate_size;
      L.mlp.gate_proj = m.matrix(p + "mlp.gate_proj.weight", F, H);
      L.mlp.up_proj = m.matrix(p + "mlp.up_proj.weight", F, H);
      L.mlp.down_proj = m.matrix(p + "mlp.down_proj.weight", H, F);
    }
    w.layers.push_back(std::move(L));
  }
  w.ignored = m.check_all_used();
  w.fp8_block = m.fp8();
  return w;
}

}  // namespace wd::model
