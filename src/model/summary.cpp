// Parameter counts and GPU memory per format. See warpdecode/model/summary.h.
#include "warpdecode/model/summary.h"

#include <algorithm>

#include "warpdecode/down_tiling.h"
#include "warpdecode/formats.h"
#include "warpdecode/gate_up_tiling.h"

namespace wd::model {
namespace {

struct Acc {
  uint64_t params = 0, bf16 = 0, mxfp8 = 0, fp8_block = 0;

  void add(const Matrix& m, bool expert) {
    const uint64_t n = m.numel();
    params += n;
    bf16 += 2 * n;
    mxfp8 += expert ? n + n / kMxBlock : 2 * n;
    fp8_block += m.fp8_block() ? n + m.scale_inv->numel() * 4 : 2 * n;
  }
};

}  // namespace

ModelSummary summarize(const ModelWeights& w, const Checkpoint& ckpt) {
  const ModelConfig& c = w.config;
  ModelSummary s;
  Acc all;
  all.add(w.embed_tokens, false);
  all.add(w.norm, false);
  if (!c.tie_word_embeddings) all.add(w.lm_head, false);
  s.params_embedding = all.params - w.norm.numel();
  uint64_t unused_experts = 0;
  // The upload tiles a copy only where the shape takes its layout.
  const bool down_fits = c.num_moe_layers() > 0 && down_tiling_fits(c.moe_shape());
  const bool gate_up_fits = c.num_moe_layers() > 0 && gate_up_tiling_fits(c.moe_shape());
  for (const LayerWeights& L : w.layers) {
    for (const Matrix* m : {&L.input_layernorm, &L.post_attention_layernorm, &L.attn.q_proj, &L.attn.k_proj,
                            &L.attn.v_proj, &L.attn.o_proj, &L.attn.q_norm, &L.attn.k_norm})
      all.add(*m, false);
    if (!L.moe) {
      for (const Matrix* m : {&L.mlp.gate_proj, &L.mlp.up_proj, &L.mlp.down_proj}) all.add(*m, false);
      continue;
    }
    all.add(L.experts.router, false);
    uint64_t layer_experts = 0;
    for (const auto* v : {&L.experts.gate, &L.experts.up, &L.experts.down})
      for (const Matrix& m : *v) {
        all.add(m, true);
        layer_experts += m.numel();
      }
    if (down_fits)
      for (const Matrix& m : L.experts.down) s.gpu_bytes_mxfp8_tiled_down += m.numel() + m.numel() / kMxBlock;
    if (gate_up_fits)
      for (const auto* v : {&L.experts.gate, &L.experts.up})
        for (const Matrix& m : *v) s.gpu_bytes_mxfp8_tiled_gate_up += m.numel() + m.numel() / kMxBlock;
    if (down_fits && gate_up_fits) {
      s.gpu_bytes_bf16_tiled += 2 * layer_experts;
      s.gpu_bytes_bf16_untile_scratch = std::max(s.gpu_bytes_bf16_untile_scratch, 2 * layer_experts);
      s.gpu_bytes_mxfp8_untile_scratch =
          std::max(s.gpu_bytes_mxfp8_untile_scratch, layer_experts + layer_experts / kMxBlock);
    }
    s.params_experts += layer_experts;
    unused_experts += layer_experts / uint64_t(c.num_experts) * uint64_t(c.num_experts - c.num_experts_per_tok);
  }
  s.params_total = all.params;
  s.params_active = all.params - unused_experts;
  s.gpu_bytes_bf16 = all.bf16;
  s.gpu_bytes_mxfp8 = all.mxfp8;
  s.gpu_bytes_fp8_block = w.fp8_block ? all.fp8_block : 0;
  s.kv_bytes_per_token = uint64_t(c.num_hidden_layers) * 2 * uint64_t(c.num_key_value_heads) *
                         uint64_t(c.head_dim) * 2;
  for (const TensorInfo* t : ckpt.tensors()) {
    DTypeTally& d = s.dtypes[to_string(t->dtype)];
    ++d.tensors;
    d.bytes += t->bytes();
  }
  return s;
}

}  // namespace wd::model
