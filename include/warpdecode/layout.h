// The weights of one MoE layer: shapes, formats and memory layout.
//
// Dimension names follow the Hugging Face Qwen3-MoE config (docs/DESIGN.md):
//   H  hidden_size            I  moe_intermediate_size
//   E  num_experts            K  num_experts_per_tok (top-k)
//
// Canonical layout (row-major, the reduction dimension contiguous):
//   router    (E, H)        BF16                      logits = router · x
//   gate_up   (E, 2I, H)    BF16 or E4M3              rows [0, I) gate, [I, 2I) up
//   down      (E, H, I)     BF16 or E4M3
//   For MXFP8 each weight tensor has a parallel E8M0 scale tensor, one byte per
//   32 consecutive elements of a row:
//   gate_up_scales (E, 2I, H/32)   down_scales (E, H, I/32)
//   For FP8 block-128 (the official Qwen3 FP8 checkpoints' format) elements are
//   E4M3 and each 128x128 block of a projection has one FP32 `weight_scale_inv`
//   (w = e4m3 · scale); gate and up are blocked separately, gate's block rows
//   first, so a block never spans the gate/up boundary:
//   gate_up_block_scales (E, 2·ceil(I/128), ceil(H/128))
//   down_block_scales    (E, ceil(H/128), ceil(I/128))
//
// Views never own memory and never copy it: they describe host or device
// buffers owned by someone else (MoeWeights below, a checkpoint, an engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wd {

enum class WeightFormat { kBF16, kMXFP8, kFP8Block128 };
inline constexpr WeightFormat kWeightFormats[] = {WeightFormat::kBF16, WeightFormat::kMXFP8, WeightFormat::kFP8Block128};
const char* to_string(WeightFormat f);
// "bf16" | "mxfp8" | "fp8-block128"; throws otherwise
WeightFormat parse_weight_format(const std::string& s);

constexpr int kFp8BlockSize = 128;  // rows and columns of one FP8 block-128 scale block

enum class MemorySpace { kHost, kDevice };

struct MoeShape {
  int hidden = 0;        // H
  int intermediate = 0;  // I
  int experts = 0;       // E
  int top_k = 0;         // K
  bool norm_topk_prob = true;
  int num_layers = 1;    // of the model the preset comes from (for drift studies)

  // Throws wd::InvalidArgument naming the bad dimension unless the shape is
  // one every implementation takes: H, I > 0 and multiples of 32 (one MXFP8
  // block; also what the kernels' 16-byte loads need), 1 <= K <= min(E, 16),
  // E <= 1024.
  void validate() const;

  // H, I, E and K equal: what a layer's weights must share with the layer
  // object that runs them (norm_topk_prob and num_layers are the model's).
  bool same_dims(const MoeShape& o) const {
    return hidden == o.hidden && intermediate == o.intermediate && experts == o.experts && top_k == o.top_k;
  }

  size_t gate_up_rows() const { return size_t(2) * intermediate; }
  // Elements of one expert's weights (gate_up + down).
  size_t expert_elems() const { return size_t(3) * intermediate * hidden; }
};

// The largest batch a warp-decode layer takes (WarpDecodeMoe::kMaxBatch;
// here for the host logic that needs it without CUDA: dispatch_rules.h).
constexpr int kWarpDecodeMaxBatch = 4096;

// Named shapes (docs/DESIGN.md): qwen3-30b-a3b, qwen3-235b-a22b,
// qwen3-coder-480b-a35b and tiny. Unknown names throw, listing the known ones.
MoeShape preset_shape(const std::string& name);
std::vector<std::string> preset_names();

// Bytes one expert occupies in a format (weights + scales; router excluded).
size_t expert_bytes(const MoeShape& s, WeightFormat f);

struct MoeWeightsView {
  MoeShape shape;
  WeightFormat format = WeightFormat::kBF16;
  MemorySpace space = MemorySpace::kHost;
  const uint16_t* router = nullptr;       // (E, H) BF16
  const void* gate_up = nullptr;          // (E, 2I, H) BF16 (uint16_t) or E4M3 (uint8_t)
  const uint8_t* gate_up_scales = nullptr;  // (E, 2I, H/32) E8M0, MXFP8 only
  const void* down = nullptr;             // (E, H, I)
  const uint8_t* down_scales = nullptr;   // (E, H, I/32), MXFP8 only
  const float* gate_up_block_scales = nullptr;  // (E, 2·ceil(I/128), ceil(H/128)), FP8 block-128 only
  const float* down_block_scales = nullptr;     // (E, ceil(H/128), ceil(I/128)), FP8 block-128 only
  // Optional, on the device (MXFP8; BF16 only in tiled-only weights, without
  // scales): the down weights in the tensor-core tiled layout
  // (warpdecode/down_tiling.h); moe_down_tc reads these instead
  // of down / down_scales when asked (WarpDecodeConfig::tc_tiled_down) or
  // when those are absent (tiled-only weights). Same values, so the same
  // bits; MXFP8 codes packed a word at a time (warpdecode/packed_e4m3.h), as
  // tile_mxfp8_down / tile_mxfp8_gate_up (host or device) write them.
  const uint8_t* down_tiled = nullptr;
  const uint8_t* down_tiled_scales = nullptr;
  // Optional, on the device (as above): gate_up in the tiled layout of
  // warpdecode/gate_up_tiling.h, read by moe_gate_up_tc when asked to
  // (tc_tiled_gate_up) or when gate_up is absent (tiled-only weights).
  const uint8_t* gate_up_tiled = nullptr;
  const uint8_t* gate_up_tiled_scales = nullptr;
  // MXFP8 on the device: every E8M0 code of gate_up and down is at most
  // kMxNarrowMaxCode (scales up to 2^7), so the tensor-core kernels skip
  // their per-item scale check. Set by DeviceMoeWeights, which measures it;
  // a view assembled by hand leaves it false (always safe). Setting it for
  // weights with a wider code gives wrong outputs.
  bool mx_scales_narrow = false;

  // Throws unless every pointer the format needs is set and the shape is valid.
  // BF16 and MXFP8 weights on the device may lack a canonical tensor (MXFP8:
  // codes and scales both null) where they have its tiled copy: tiled-only
  // weights (DeviceWeightsOptions::tiled_only()).
  void validate() const;
  // Whether the canonical gate_up and down tensors (and scales) are present:
  // always for host views and the default device upload.
  bool has_canonical() const;
  // Throws wd::InvalidArgument naming `reader` unless has_canonical(): for
  // the kernels that read only the canonical layout (warp decode's scalar
  // family; the classical path checks ClassicalConfig::reads_tiled instead).
  void require_canonical(const char* reader) const;
};

// Routing of B tokens: ids (B, K) int32 in [0, E), weights (B, K) FP32.
// The kernels take both on trust; validate_routing (routing_check.h) checks
// a routing from outside the library's router.
struct RoutingView {
  int batch = 0;
  int top_k = 0;
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
};

}  // namespace wd
