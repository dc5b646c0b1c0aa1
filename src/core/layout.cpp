#include "warpdecode/layout.h"

#include <algorithm>

#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/gate_up_tiling.h"

namespace wd {

const char* to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBF16: return "bf16";
    case WeightFormat::kMXFP8: return "mxfp8";
    case WeightFormat::kFP8Block128: return "fp8-block128";
  }
  return "?";
}

WeightFormat parse_weight_format(const std::string& s) {
  if (s == "bf16") return WeightFormat::kBF16;
  if (s == "mxfp8") return WeightFormat::kMXFP8;
  if (s == "fp8-block128") return WeightFormat::kFP8Block128;
  throw InvalidArgument("unknown weight format '" + s + "' (allowed: bf16, mxfp8, fp8-block128)");
}

void MoeShape::validate() const {
  WD_CHECK(hidden > 0 && hidden % kMxBlock == 0,
           "hidden size H = ", hidden, " must be a positive multiple of 32 (one MXFP8 block)");
  WD_CHECK(intermediate > 0 && intermediate % kMxBlock == 0, "moe intermediate size I = ",
           intermediate, " must be a positive multiple of 32 (one MXFP8 block)");
  WD_CHECK(experts > 0 && experts <= 1024, "number of experts E = ", experts,
           " must be in [1, 1024]");
  WD_CHECK(top_k >= 1 && top_k <= std::min(experts, 16), "top-k K = ", top_k,
           " must be in [1, min(E, 16)] with E = ", experts);
  WD_CHECK(num_layers >= 1, "num_layers = ", num_layers, " must be >= 1");
}

namespace {
struct Preset {
  const char* name;
  MoeShape shape;
};
// Shapes of the public Qwen3-MoE checkpoints (config.json of each), and a
// tiny one for fast tests. Fields: H, I, E, K, norm_topk_prob, layers.
const Preset kPresets[] = {
    {"qwen3-30b-a3b", {2048, 768, 128, 8, true, 48}},
    {"qwen3-235b-a22b", {4096, 1536, 128, 8, true, 94}},
    {"qwen3-coder-480b-a35b", {6144, 2560, 160, 8, true, 62}},
    {"tiny", {256, 128, 16, 4, true, 4}},
};
}  // namespace

MoeShape preset_shape(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return p.shape;
  std::string known;
  for (const auto& p : kPresets) known += std::string(known.empty() ? "" : ", ") + p.name;
  throw InvalidArgument("unknown preset '" + name + "' (known: " + known + ")");
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

size_t expert_bytes(const MoeShape& s, WeightFormat f) {
  const size_t elems = s.expert_elems();
  if (f == WeightFormat::kFP8Block128) {
    const size_t hb = (size_t(s.hidden) + kFp8BlockSize - 1) / kFp8BlockSize;
    const size_t ib = (size_t(s.intermediate) + kFp8BlockSize - 1) / kFp8BlockSize;
    return elems + sizeof(float) * 3 * hb * ib;  // gate, up, down: ceil(I/128)·ceil(H/128) scales each
  }
  return f == WeightFormat::kBF16 ? 2 * elems : elems + elems / kMxBlock;
}

void MoeWeightsView::validate() const {
  shape.validate();
  WD_CHECK(router != nullptr, "MoE weights: router tensor is missing");
  // A canonical tensor (BF16, or MXFP8 codes and scales together) may be left
  // out on the device where its tiled copy is there (checked with the copies
  // below): tiled-only weights.
  const bool tiled_only_ok =
      (format == WeightFormat::kMXFP8 || format == WeightFormat::kBF16) && space == MemorySpace::kDevice;
  auto check_canonical = [&](const void* codes, const uint8_t* scales, const uint8_t* tiled, const char* what) {
    if (tiled_only_ok && tiled != nullptr && codes == nullptr) {
      WD_CHECK(scales == nullptr, "MoE weights: MXFP8 ", what, " scales are set without their weights");
      return;
    }
    WD_CHECK(codes != nullptr, "MoE weights: ", what, " tensor is missing");
    if (format == WeightFormat::kMXFP8)
      WD_CHECK(scales != nullptr, "MoE weights: MXFP8 ", what, " scales are missing");
  };
  check_canonical(gate_up, gate_up_scales, gate_up_tiled, "gate_up");
  check_canonical(down, down_scales, down_tiled, "down");
  if (format == WeightFormat::kFP8Block128) {
    WD_CHECK(gate_up_block_scales != nullptr, "MoE weights: FP8 block-128 gate_up scales are missing");
    WD_CHECK(down_block_scales != nullptr, "MoE weights: FP8 block-128 down scales are missing");
  }
  // The optional tiled copies: MXFP8 (weights and scales together) or BF16
  // (no scales), on a shape the layout takes.
  auto check_tiled = [&](const uint8_t* codes, const uint8_t* scales, const char* what, bool fits,
                         const char* need) {
    if (format == WeightFormat::kBF16) {
      WD_CHECK(scales == nullptr, "MoE weights: BF16 tiled ", what, " weights have no scales");
    } else {
      WD_CHECK((codes == nullptr) == (scales == nullptr), "MoE weights: tiled ", what,
               " weights and their scales must be set together");
    }
    if (codes == nullptr) return;
    WD_CHECK(format == WeightFormat::kMXFP8 || format == WeightFormat::kBF16, "MoE weights: tiled ", what,
             " weights are MXFP8 or BF16, not ", to_string(format));
    WD_CHECK(fits, "MoE weights: tiled ", what, " weights need ", need, " (H = ", shape.hidden, ", I = ",
             shape.intermediate, ")");
  };
  check_tiled(down_tiled, down_tiled_scales, "down", down_tiling_fits(shape), "H % 16 == 0 and I % 64 == 0");
  check_tiled(gate_up_tiled, gate_up_tiled_scales, "gate_up", gate_up_tiling_fits(shape), "H % 64 == 0 and I % 16 == 0");
}

bool MoeWeightsView::has_canonical() const { return gate_up != nullptr && down != nullptr; }

void MoeWeightsView::require_canonical(const char* reader) const {
  WD_CHECK(has_canonical(), reader, " reads the canonical tensors, and these weights keep only their tiled "
           "copies (DeviceWeightsOptions::tiled_only(): canonical_mxfp8 = false or tiled_only_bf16 = true); "
           "upload them with the default options, or run warp decode's tensor-core kernels");
}

}  // namespace wd
