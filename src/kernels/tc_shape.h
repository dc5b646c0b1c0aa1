// The layer shapes warp decode's tensor-core kernels take (moe_tc.cuh): H a
// multiple of 256 (moe_gate_up_tc's four warps a block each take a quarter
// of H in 64-element steps) and I a multiple of 64 (moe_down_tc's K units).
// Every Qwen3-MoE shape fits. Pure C++, so that host code without the CUDA
// kernels (the accuracy harness's CPU model of warp decode) knows which
// family the GPU runs; the kernels' own constants are tied to these by
// static_asserts in moe_gate_up_tc.cu and moe_down_tc.cu.
#pragma once

namespace wd::kernels {

inline constexpr int kTcHiddenMultiple = 256;
inline constexpr int kTcIntermediateMultiple = 64;

inline bool tensor_core_shape_ok(int hidden, int intermediate) {
  return hidden > 0 && intermediate > 0 && hidden % kTcHiddenMultiple == 0 &&
         intermediate % kTcIntermediateMultiple == 0;
}

}  // namespace wd::kernels
