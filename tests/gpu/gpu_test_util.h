// Shared by the GPU tests: skip (visibly) when there is no CUDA device; draw
// inputs whose routing no correct router can get wrong.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

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

// Gaussian activations of `batch` tokens whose FP64 routing has no near-tie
// deciding the top-K (every gap > 1e-4), with that routing: a correct router
// must then reproduce it exactly. Fresh random inputs on every call.
struct RoutedInputs {
  std::vector<uint16_t> x;     // (batch, H) BF16
  reference::Routing routing;  // FP64 router on x
};
inline RoutedInputs unambiguous_inputs(const MoeWeightsView& host, int batch, uint64_t (*seed)()) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    RoutedInputs in;
    in.x = synthetic_input(batch, host.shape.hidden, seed(), InputKind::kGaussian);
    in.routing = reference::router(host, in.x.data(), batch);
    if (reference::min_topk_gap(in.routing, host.shape.experts) > 1e-4) return in;
  }
  throw std::runtime_error("unambiguous_inputs: 50 draws in a row had a near-tie in the top-K");
}

}  // namespace wd::test

#define WD_REQUIRE_GPU()                                                  \
  do {                                                                    \
    const std::string wd_why_ = ::wd::test::gpu_unavailable_reason();     \
    if (!wd_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << wd_why_; \
  } while (0)
