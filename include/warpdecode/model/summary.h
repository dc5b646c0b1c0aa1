// What a checkpoint holds and what it will need on the GPU, per weight
// format (`warpdecode inspect`).
//
// GPU weight bytes per format (KV cache and activations not included):
//   bf16       every weight in BF16: 2 bytes per parameter
//   mxfp8      expert weights in MXFP8 (1 byte + 1/32 byte of E8M0 scale per
//              parameter), everything else (attention, router, norms,
//              embeddings, lm_head) BF16
//   fp8-block  FP8 checkpoints only: FP8 tensors as stored (1 byte per
//              parameter + 4 bytes per scale block), the rest BF16
// The KV cache is reported per token in BF16: layers × 2 × nkv × D × 2 bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "warpdecode/model/model_weights.h"

namespace wd::model {

struct DTypeTally {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

struct ModelSummary {
  uint64_t params_total = 0;       // weights only (block scales excluded)
  uint64_t params_experts = 0;     // routed expert weights (gate, up, down)
  uint64_t params_active = 0;      // per token: all but the (E - K) unused experts of each layer
  uint64_t params_embedding = 0;   // embed_tokens (+ lm_head if untied)
  std::map<std::string, DTypeTally> dtypes;  // by safetensors dtype, over the checkpoint's tensors
  uint64_t gpu_bytes_bf16 = 0;
  uint64_t gpu_bytes_mxfp8 = 0;
  // DeviceMoeWeights' tiled copies (warpdecode/down_tiling.h,
  // gate_up_tiling.h), each only where the MoE shape takes its layout (0
  // elsewhere, as the upload then makes none):
  uint64_t gpu_bytes_mxfp8_tiled_down = 0;  // the MXFP8 down experts (on by default)
  uint64_t gpu_bytes_mxfp8_tiled_gate_up = 0;  // the MXFP8 gate and up experts (off by default)
  uint64_t gpu_bytes_bf16_tiled = 0;  // BF16: all three projections, where the shape takes both layouts (tiled_bf16)
  // MoeDispatch::untile_tiled_only's scratch (UntiledWeights): one MoE
  // layer's experts in canonical form (the largest layer), where the shape
  // takes both layouts.
  uint64_t gpu_bytes_bf16_untile_scratch = 0;
  uint64_t gpu_bytes_mxfp8_untile_scratch = 0;
  uint64_t gpu_bytes_fp8_block = 0;  // 0 unless the checkpoint is FP8 block-quantized
  uint64_t kv_bytes_per_token = 0;   // BF16 K and V of every layer
};

ModelSummary summarize(const ModelWeights& w, const Checkpoint& ckpt);

}  // namespace wd::model
