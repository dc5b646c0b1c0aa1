// Hugging Face tensor names -> the model's weights, resolved and checked.
//
//   model.embed_tokens.weight                        (V, H)
//   model.norm.weight                                (H)
//   lm_head.weight                                   (V, H)   absent when tied
//   model.layers.L.input_layernorm.weight            (H)
//   model.layers.L.post_attention_layernorm.weight   (H)
//   model.layers.L.self_attn.q_proj.weight           (nq*D, H)
//   model.layers.L.self_attn.k_proj.weight           (nkv*D, H)   v_proj the same
//   model.layers.L.self_attn.o_proj.weight           (H, nq*D)
//   model.layers.L.self_attn.q_norm.weight           (D)          k_norm the same
//   dense layers:
//   model.layers.L.mlp.{gate,up}_proj.weight         (intermediate_size, H)
//   model.layers.L.mlp.down_proj.weight              (H, intermediate_size)
//   MoE layers:
//   model.layers.L.mlp.gate.weight                   (E, H)       the router
//   model.layers.L.mlp.experts.X.{gate,up}_proj.weight  (I, H)    per expert X, or
//   model.layers.L.mlp.experts.gate_up_proj          (E, 2I, H)   fused (transformers 5
//   model.layers.L.mlp.experts.down_proj             (E, H, I)     save_original_format=False)
//   FP8 block checkpoints: every F8_E4M3 `X.weight` comes with
//   `X.weight_scale_inv` (ceil(rows/br), ceil(cols/bc)), F32 or BF16.
//
// Our MoE layout (layout.h) is gate_up (E, 2I, H) with gate rows [0, I) and up
// rows [I, 2I) of each expert, down (E, H, I): the fused HF tensors are that
// layout already; per-expert tensors are stacked in it (expert_stack.h).
//
// Every tensor is checked (present, shape, decodable dtype, FP8 scales) when
// the map is built, and a checkpoint tensor that maps to nothing is refused by
// name (`rotary_emb.inv_freq` buffers, and lm_head.weight of a tied model,
// are ignored). The map points into the Checkpoint, which must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "warpdecode/model/checkpoint.h"
#include "warpdecode/model/config.h"

namespace wd::model {

// A (rows, cols) row-major weight matrix (a vector is rows = 1) stored in a
// checkpoint tensor, possibly as a slice of a fused expert stack, possibly
// FP8 with block scales.
struct Matrix {
  const TensorInfo* weight = nullptr;
  uint64_t offset = 0;                   // first element inside `weight`
  int64_t rows = 0, cols = 0;
  const TensorInfo* scale_inv = nullptr; // FP8 only: (ceil(rows/block_rows), ceil(cols/block_cols))
  int block_rows = 0, block_cols = 0;

  DType dtype() const { return weight->dtype; }
  bool fp8_block() const { return scale_inv != nullptr; }
  uint64_t numel() const { return uint64_t(rows) * uint64_t(cols); }
  // Rows [r0, r0 + n) dequantized to out (n, cols): exact for BF16, F16,
  // F32; FP8 is e4m3 * scale_inv, exact in FP64 and rounded once in FP32.
  void read_rows(int64_t r0, int64_t n, float* out) const;
  void read_rows(int64_t r0, int64_t n, double* out) const;
  // FP8 only: every block scale, (ceil(rows/block_rows), ceil(cols/block_cols))
  // row-major, as FP32. A scale that is NaN or infinite is refused by name
  // (wd::FormatError), here and in read_rows: it would turn its whole block
  // into NaN on every path.
  void read_block_scales(float* out) const;
};

struct AttentionWeights {
  Matrix q_proj, k_proj, v_proj, o_proj;
  Matrix q_norm, k_norm;                 // (1, D)
};

struct DenseMlpWeights {
  Matrix gate_proj, up_proj, down_proj;
};

struct MoeLayerWeights {
  Matrix router;                         // (E, H)
  std::vector<Matrix> gate, up, down;    // per expert: (I, H), (I, H), (H, I)
  bool fused = false;                    // from gate_up_proj / down_proj stacks
};

struct LayerWeights {
  Matrix input_layernorm, post_attention_layernorm;  // (1, H)
  AttentionWeights attn;
  bool moe = false;
  DenseMlpWeights mlp;                   // dense layers
  MoeLayerWeights experts;               // MoE layers
};

struct ModelWeights {
  ModelConfig config;
  Matrix embed_tokens;                   // (V, H)
  Matrix norm;                           // (1, H)
  Matrix lm_head;                        // (V, H); the embedding when tied
  std::vector<LayerWeights> layers;
  bool fp8_block = false;                // some weights are FP8 with block scales
  std::vector<const TensorInfo*> ignored; // tensors present but unused (named above)

  // Resolves every tensor; throws wd::FormatError naming the first tensor
  // that is missing, has the wrong shape or dtype, or maps to nothing.
  static ModelWeights map(const ModelConfig& config, const Checkpoint& ckpt);
};

}  // namespace wd::model
