// Shared by the GPU tests: skip (visibly) when there is no CUDA device; draw
// inputs whose routing no correct router can get wrong; replay a captured
// CUDA graph into a poisoned output.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "warpdecode/error.h"
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

// Captures record(st) (stream-ordered calls) into a CUDA graph, poisons out
// (every byte 0xFF: NaN for floats), replays the graph once and waits: what
// the caller then reads of out, the replay wrote. st is left empty.
template <typename T, typename Record>
void capture_and_replay(cudaStream_t st, DeviceBuffer<T>& out, Record record) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  WD_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  record(st);
  WD_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  WD_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  out.fill_bytes(0xFF);
  WD_CUDA_CHECK(cudaGraphLaunch(exec, st));
  WD_CUDA_CHECK(cudaStreamSynchronize(st));
  WD_CUDA_CHECK(cudaGraphExecDestroy(exec));
  WD_CUDA_CHECK(cudaGraphDestroy(graph));
}

// What a call does on a stream under capture: the graph nodes it recorded
// (each kernel launch or copy one node) and whether it threw
// wd::InvalidArgument. A refused call must record none: nothing it launched
// could have half-written its outputs. The capture is ended either way.
struct Recorded {
  size_t nodes = 0;
  bool refused = false;
};
template <typename Record>
Recorded record_on_capture(Record record) {
  cudaStream_t st;
  WD_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  WD_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  Recorded r;
  try {
    record(st);
  } catch (const InvalidArgument&) {
    r.refused = true;
  }
  WD_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  WD_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &r.nodes));
  WD_CUDA_CHECK(cudaGraphDestroy(graph));
  WD_CUDA_CHECK(cudaStreamDestroy(st));
  return r;
}

}  // namespace wd::test

#define WD_REQUIRE_GPU()                                                  \
  do {                                                                    \
    const std::string wd_why_ = ::wd::test::gpu_unavailable_reason();     \
    if (!wd_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << wd_why_; \
  } while (0)
