// CPU reference forward of Qwen3-MoE. See warpdecode/model/reference_model.h.
#include "warpdecode/model/reference_model.h"

#include <cmath>

#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/model/reference_ops.h"
#include "warpdecode/reference.h"

namespace wd::model {
namespace {

std::vector<double> vector_of(const Matrix& m) {
  std::vector<double> v(static_cast<size_t>(m.cols));
  m.read_rows(0, 1, v.data());
  return v;
}

}  // namespace

ReferenceModel::ReferenceModel(const ModelWeights& w, const ReferenceOptions& opt) : w_(w), opt_(opt) {
  const ModelConfig& c = w.config;
  inv_freq_ = ops::rope_inv_freq(c.head_dim, c.rope_theta);
  final_norm_ = vector_of(w.norm);
  layers_.resize(w.layers.size());
  uint64_t expert_bytes = 0;
  for (size_t l = 0; l < w.layers.size(); ++l)
    if (w.layers[l].moe) expert_bytes += moe_layer_checkpoint_bytes(w, int(l));
  Progress progress("reference experts -> " + std::string(to_string(opt.moe_format)), expert_bytes,
                    opt.progress, opt.progress ? Progress::Mode::kAuto : Progress::Mode::kQuiet);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    Layer& R = layers_[l];
    R.input_norm = vector_of(L.input_layernorm);
    R.post_norm = vector_of(L.post_attention_layernorm);
    R.q_norm = vector_of(L.attn.q_norm);
    R.k_norm = vector_of(L.attn.k_norm);
    // A format the MoE reference cannot read fails here, not mid-forward.
    if (L.moe && opt.cache_experts) {
      R.experts = load_expert_stack(w, int(l), opt.moe_format, opt.rule, &progress);
      R.experts.view().validate();
    } else if (L.moe && opt.moe_format == StackFormat::kFp8Block) {
      // Converted per forward: what load_expert_stack and view() would
      // refuse, checked now (bf16 and mxfp8 read any decodable weights).
      for (const auto* v : {&L.experts.gate, &L.experts.up, &L.experts.down})
        for (const Matrix& m : *v)
          WD_CHECK(m.fp8_block() && m.block_rows == kFp8BlockSize && m.block_cols == kFp8BlockSize, "layer ", l,
                   ": the fp8-block MoE reference needs FP8 experts with 128x128 block scales; '", m.weight->name,
                   "' is ", to_string(m.dtype()),
                   m.fp8_block() ? " with " + std::to_string(m.block_rows) + "x" + std::to_string(m.block_cols) +
                                       " blocks"
                                 : std::string(" without block scales"));
    }
  }
  progress.finish();
}

void ReferenceModel::reset() {
  pos_ = 0;
  for (auto& L : layers_) {
    L.k.clear();
    L.v.clear();
  }
}

void ReferenceModel::attention_block(size_t l, const std::vector<double>& h, int T,
                                     std::vector<double>& x) {
  const ModelConfig& c = w_.config;
  const AttentionWeights& A = w_.layers[l].attn;
  Layer& R = layers_[l];
  const int D = c.head_dim, nq = c.num_attention_heads, nkv = c.num_key_value_heads, H = c.hidden_size;
  std::vector<double> q(size_t(T) * nq * D), k(size_t(T) * nkv * D), v(size_t(T) * nkv * D);
  ops::matmul(A.q_proj, h.data(), T, q.data(), opt_.threads);
  ops::matmul(A.k_proj, h.data(), T, k.data(), opt_.threads);
  ops::matmul(A.v_proj, h.data(), T, v.data(), opt_.threads);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < nq; ++j) {
      double* qh = &q[(size_t(t) * nq + j) * D];
      ops::rms_norm(qh, R.q_norm.data(), D, c.rms_norm_eps, qh);
      ops::apply_rope(qh, D, pos_ + t, inv_freq_);
    }
    for (int j = 0; j < nkv; ++j) {
      double* kh = &k[(size_t(t) * nkv + j) * D];
      ops::rms_norm(kh, R.k_norm.data(), D, c.rms_norm_eps, kh);
      ops::apply_rope(kh, D, pos_ + t, inv_freq_);
    }
  }
  R.k.insert(R.k.end(), k.begin(), k.end());
  R.v.insert(R.v.end(), v.begin(), v.end());
  std::vector<double> att(size_t(T) * nq * D), o(size_t(T) * H);
  for (int t = 0; t < T; ++t)
    ops::attention(&q[size_t(t) * nq * D], R.k.data(), R.v.data(), pos_ + t + 1, nq, nkv, D,
                   &att[size_t(t) * nq * D]);
  ops::matmul(A.o_proj, att.data(), T, o.data(), opt_.threads);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
}

void ReferenceModel::mlp_block(size_t l, const std::vector<double>& h, int T, std::vector<double>& x) {
  const LayerWeights& L = w_.layers[l];
  if (L.moe) {
    // The foundation's MoE reference: BF16 activations in, FP64 math.
    std::vector<uint16_t> hb(h.size());
    for (size_t i = 0; i < h.size(); ++i) hb[i] = float_to_bf16(float(h[i]));
    if (opt_.moe_input_hook) opt_.moe_input_hook(int(l), pos_, T, h.data(), hb.data());
    ExpertStack converted;
    if (!opt_.cache_experts) converted = load_expert_stack(w_, int(l), opt_.moe_format, opt_.rule);
    const MoeWeightsView view = (opt_.cache_experts ? layers_[l].experts : converted).view();
    const reference::Routing r = reference::router(view, hb.data(), T);
    const std::vector<double> y = reference::moe_experts(view, hb.data(), r.ids.data(), r.weights.data(), T,
                                                         reference::Precision::kFP64, opt_.threads);
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    return;
  }
  const int64_t F = L.mlp.gate_proj.rows;
  std::vector<double> g(size_t(T * F)), u(size_t(T * F)), y(x.size());
  ops::matmul(L.mlp.gate_proj, h.data(), T, g.data(), opt_.threads);
  ops::matmul(L.mlp.up_proj, h.data(), T, u.data(), opt_.threads);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  ops::matmul(L.mlp.down_proj, g.data(), T, y.data(), opt_.threads);
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

std::vector<double> ReferenceModel::forward(const std::vector<int32_t>& ids) {
  const ModelConfig& c = w_.config;
  const int T = int(ids.size()), H = c.hidden_size;
  WD_CHECK(T >= 1, "forward needs at least one token");
  for (const int32_t id : ids)
    WD_CHECK(id >= 0 && id < c.vocab_size, "token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  std::vector<double> x(size_t(T) * H), h(size_t(T) * H);
  for (int t = 0; t < T; ++t) w_.embed_tokens.read_rows(ids[size_t(t)], 1, &x[size_t(t) * H]);
  try {
    for (size_t l = 0; l < layers_.size(); ++l) {
      for (int t = 0; t < T; ++t)
        ops::rms_norm(&x[size_t(t) * H], layers_[l].input_norm.data(), H, c.rms_norm_eps, &h[size_t(t) * H]);
      attention_block(l, h, T, x);
      for (int t = 0; t < T; ++t)
        ops::rms_norm(&x[size_t(t) * H], layers_[l].post_norm.data(), H, c.rms_norm_eps, &h[size_t(t) * H]);
      mlp_block(l, h, T, x);
    }
  } catch (...) {
    // The layers before the one that threw appended this call's keys and
    // values: dropped, so that the cache holds the pos_ positions it did
    // (the next call attends over pos_ + t + 1 entries).
    const size_t kv = size_t(pos_) * c.num_key_value_heads * c.head_dim;
    for (auto& L : layers_) {
      L.k.resize(kv);
      L.v.resize(kv);
    }
    throw;
  }
  pos_ += T;
  for (int t = 0; t < T; ++t)
    ops::rms_norm(&x[size_t(t) * H], final_norm_.data(), H, c.rms_norm_eps, &h[size_t(t) * H]);
  std::vector<double> logits(size_t(T) * c.vocab_size);
  ops::matmul(w_.lm_head, h.data(), T, logits.data(), opt_.threads);
  return logits;
}

std::vector<int32_t> ReferenceModel::generate_greedy(const std::vector<int32_t>& prompt, int new_tokens,
                                                     std::vector<double>* logits) {
  WD_CHECK(!prompt.empty(), "generate_greedy needs a prompt of at least one token");
  WD_CHECK(new_tokens >= 1, "new_tokens = ", new_tokens, " must be >= 1");
  reset();
  const size_t V = size_t(w_.config.vocab_size);
  if (logits) logits->clear();
  std::vector<int32_t> out;
  std::vector<double> step = forward(prompt);
  for (int i = 0;; ++i) {
    if (logits) logits->insert(logits->end(), step.begin(), step.end());
    const double* last = &step[step.size() - V];
    size_t best = 0;
    for (size_t j = 1; j < V; ++j)
      if (last[j] > last[best]) best = j;
    out.push_back(int32_t(best));
    if (i + 1 == new_tokens) break;
    step = forward({int32_t(best)});
  }
  return out;
}

}  // namespace wd::model
