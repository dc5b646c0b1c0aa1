// The weight operands of the classical path's grouped GEMMs (host; kept
// apart from ClassicalMoe::run_stage so that a CPU test checks them).
#pragma once

#include "kernels/classical_gemm.cuh"
#include "warpdecode/layout.h"

namespace wd {

// The gate_up (up) or down GEMM's weights and scales in p: the canonical
// tensors with their MXFP8 or FP8 block-128 scales, or, for tiled-only
// weights (read as they are: ClassicalConfig::reads_tiled), the tiled copy,
// MXFP8 with its tiled scales (p.w_tiled set).
void set_weight_operands(kernels::GroupedGemmParams& p, const MoeWeightsView& w, bool up);

}  // namespace wd
