// The epilogue both moe_down kernels share: y[o] = v (+ residual[o]), stored
// in the output type (FP32, or BF16 rounded to nearest even). Device code:
// include from .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/moe_down.cuh"
#include "warpdecode/formats.h"

namespace wd::kernels {

__device__ __forceinline__ void store_down_output(const DownParams& p, size_t o, float v) {
  if (p.out_fp32) {
    if (p.residual) v += static_cast<const float*>(p.residual)[o];
    static_cast<float*>(p.y)[o] = v;
  } else {
    if (p.residual) v += bf16_to_float(static_cast<const uint16_t*>(p.residual)[o]);
    static_cast<uint16_t*>(p.y)[o] = float_to_bf16(v);
  }
}

}  // namespace wd::kernels
