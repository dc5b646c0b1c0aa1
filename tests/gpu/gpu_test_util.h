// Shared by the GPU tests: skip (visibly) when there is no CUDA device.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

namespace wd::test {

// Empty when a device is usable; otherwise why not.
inline std::string gpu_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no CUDA device on this machine";
  return "";
}

}  // namespace wd::test

#define WD_REQUIRE_GPU()                                                  \
  do {                                                                    \
    const std::string wd_why_ = ::wd::test::gpu_unavailable_reason();     \
    if (!wd_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << wd_why_; \
  } while (0)
