// Kernel launch with optional programmatic dependent launch (PDL, sm_90+):
// launch_kernel() serves the classical path's kernels and both moe_down
// kernels of warp decode.
//
// With PDL a kernel may start while its predecessor in the stream is still
// running. Every classical kernel therefore calls wait_for_previous_kernel() before it reads
// anything the predecessor writes (and in every block, also blocks that have
// no work: a kernel's completion must imply its predecessor's, which the next
// kernel relies on), then allow_next_kernel() so that its own successor can be
// scheduled (both in common.cuh). So a kernel starts only once its
// predecessor has passed its wait: everything written two kernels back or
// earlier is complete. Loads of that (the layer's inputs and weights, the
// align stage's tables after the permute stage) are issued before the wait.
//
// Per-device launch set-up (launch.cu): a kernel's dynamic shared-memory limit
// is a function attribute of each device, and resident-block counts depend on
// the device, so both are kept per (kernel, device) — a process that drives
// several GPUs sets them on each (a value computed once for the whole process
// left the second GPU's kernels at the 48 KB default). Cached: after the first
// launch of a kernel on a device, a launch costs a map lookup, not a driver
// call.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda_check.h"
#include "kernels/common.cuh"  // wait_for_previous_kernel, allow_next_kernel

namespace wd::kernels {

// Raises the dynamic shared-memory limit of `kernel` on the current device to
// at least `bytes` (a no-op when already that high on this device).
void ensure_dynamic_smem(const void* kernel, size_t bytes);

// Blocks of `threads` threads and `smem` dynamic bytes that the current
// device holds at once (SMs × blocks per SM, at least 1); raises the kernel's
// shared-memory limit to `smem` first.
long resident_blocks(const void* kernel, int threads, size_t smem);

template <typename... KernelArgs>
void ensure_dynamic_smem(void (*kernel)(KernelArgs...), size_t bytes) {
  ensure_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}
template <typename... KernelArgs>
long resident_blocks(void (*kernel)(KernelArgs...), int threads, size_t smem) {
  return resident_blocks(reinterpret_cast<const void*>(kernel), threads, smem);
}

// Clusters of `cluster` blocks (along x) of `threads` threads and `smem`
// dynamic bytes that the current device holds at once (at least 1). A
// cluster's blocks share one GPC, so this can be less than resident_blocks /
// cluster.
long resident_clusters(const void* kernel, int threads, size_t smem, int cluster);
template <typename... KernelArgs>
long resident_clusters(void (*kernel)(KernelArgs...), int threads, size_t smem, int cluster) {
  return resident_clusters(reinterpret_cast<const void*>(kernel), threads, smem, cluster);
}

// The largest cluster size c <= wanted (along x) for which the current
// device holds at least one cluster of c blocks of `threads` threads and
// `smem` dynamic bytes (1 if none does); sizes above 8, non-portable, are
// allowed on the kernel first.
int largest_cluster(const void* kernel, int threads, size_t smem, int wanted);
template <typename... KernelArgs>
int largest_cluster(void (*kernel)(KernelArgs...), int threads, size_t smem, int wanted) {
  return largest_cluster(reinterpret_cast<const void*>(kernel), threads, smem, wanted);
}

// cluster > 1: thread-block clusters of that many blocks along x (grid.x a
// multiple of it).
template <typename... KernelArgs, typename... Args>
void launch_kernel_ex(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      bool pdl, int cluster, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n++].val.clusterDim = {unsigned(cluster), 1, 1};
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  WD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                   Args&&... args) {
  launch_kernel_ex(kernel, grid, block, smem, stream, pdl, 1, std::forward<Args>(args)...);
}

}  // namespace wd::kernels
