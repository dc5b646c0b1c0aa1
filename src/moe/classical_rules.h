// The classical path's tile and shape rules that its configuration choice
// (classical_config.cpp) and its host class (classical_moe.cpp) both apply.
#pragma once

#include <algorithm>
#include <iterator>

#include "kernels/classical_fits.h"
#include "warpdecode/classical_config.h"

namespace wd::classical_rules {

// The token tiles (T) the GEMM kernels are built for (80: the TMA tile only;
// 144: the TMA tile with BF16 activations only: BF16 weights or W8A16).
inline constexpr int kTiles[] = {8, 16, 32, 64, 80, 128, 144};
inline bool tile_allowed(int t) { return std::find(std::begin(kTiles), std::end(kTiles), t) != std::end(kTiles); }
// W8A8 quantizes activations per 128 elements (and FP8 block-128 weights come
// in 128 × 128 blocks): H and I must be multiples of 128.
inline bool w8a8_shape_ok(const MoeShape& s) { return s.hidden % 128 == 0 && s.intermediate % 128 == 0; }
// SiLU·up fused into the gate_up GEMM (ClassicalConfig::fuse_silu): the TMA
// tile's epilogue, where a tile is gate and up rows of the same neurons.
// BF16 activations (BF16 weights or W8A16) at every T; W8A8 at T = 64 and
// 80 and FP8 block-128 at 128, whose 256-row tiles hold 128 neurons: one
// activation group, which the epilogue quantizes too.
inline bool silu_fuses(const MoeShape& s, WeightFormat format, bool bf16_activations, int tile_tokens) {
  const bool w8a8 = format != WeightFormat::kBF16 && !bf16_activations;
  return s.intermediate % 128 == 0 && (!w8a8 || kernels::tma_w8a8_fuses_silu(format, tile_tokens));
}
// W8A16 (ClassicalConfig::bf16_activations): the TMA tile, MXFP8 weights.
inline bool w8a16_ok(const ClassicalConfig& c, WeightFormat format) {
  return !c.bf16_activations || (format == WeightFormat::kMXFP8 && c.gemm == ClassicalGemm::kTma);
}

}  // namespace wd::classical_rules
