// Kernel launch with optional programmatic dependent launch (PDL, sm_90+):
// launch_kernel() serves the classical path's kernels and both moe_down
// kernels of warp decode.
//
// With PDL a kernel may start while its predecessor in the stream is still
// running. Every classical kernel therefore calls wait_for_previous_kernel() before it reads
// anything the predecessor writes (and in every block, also blocks that have
// no work: a kernel's completion must imply its predecessor's, which the next
// kernel relies on), then allow_next_kernel() so that its own successor can be
// scheduled (both in common.cuh). Work that depends only on inputs of the
// layer (the GEMMs' weight loads) is issued before the wait.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda_check.h"
#include "kernels/common.cuh"  // wait_for_previous_kernel, allow_next_kernel

namespace wd::kernels {

template <typename... KernelArgs, typename... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                   Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  WD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace wd::kernels
