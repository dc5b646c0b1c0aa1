// validate_routing (warpdecode/routing_check.h): one pass over the B·K
// routing entries, token-major (entry i is token i / K, slot i % K).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "warpdecode/routing_check.h"

namespace wd {
namespace {

// result[0]: the lowest bad entry index (INT_MAX when none), result[1]: how
// many entries are bad. atomicMin makes "first" independent of the order the
// threads run in.
__global__ void find_bad_routing_kernel(const int32_t* ids, const float* weights, int entries, int experts,
                                        int* result) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < entries; i += gridDim.x * blockDim.x) {
    const int32_t id = ids[i];
    if (id < 0 || id >= experts || !isfinite(weights[i])) {
      atomicMin(&result[0], i);
      atomicAdd(&result[1], 1);
    }
  }
}

}  // namespace

void validate_routing(const RoutingView& r, int experts, cudaStream_t stream) {
  WD_CHECK(r.batch >= 1 && r.top_k >= 1, "validate_routing: batch = ", r.batch, ", top_k = ", r.top_k,
           " must both be >= 1");
  WD_CHECK(experts >= 1, "validate_routing: experts = ", experts, " must be >= 1");
  WD_CHECK(r.ids && r.weights, "validate_routing: ids and weights must be device pointers, not null");
  WD_CHECK(long(r.batch) * r.top_k <= INT_MAX, "validate_routing: ", r.batch, " × ", r.top_k,
           " entries are too many to index");
  const int entries = r.batch * r.top_k;
  DeviceBuffer<int> result(2);
  const int init[2] = {INT_MAX, 0};
  WD_CUDA_CHECK(cudaMemcpyAsync(result.data(), init, sizeof(init), cudaMemcpyHostToDevice, stream));
  const int threads = 256;
  const int blocks = int(std::min<long>((long(entries) + threads - 1) / threads, 1024));
  find_bad_routing_kernel<<<blocks, threads, 0, stream>>>(r.ids, r.weights, entries, experts, result.data());
  WD_CUDA_CHECK_LAUNCH();
  int found[2];
  WD_CUDA_CHECK(cudaMemcpyAsync(found, result.data(), sizeof(found), cudaMemcpyDeviceToHost, stream));
  WD_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (found[1] == 0) return;
  const int i = found[0];
  int32_t id = 0;
  float weight = 0;
  WD_CUDA_CHECK(cudaMemcpy(&id, r.ids + i, sizeof(id), cudaMemcpyDeviceToHost));
  WD_CUDA_CHECK(cudaMemcpy(&weight, r.weights + i, sizeof(weight), cudaMemcpyDeviceToHost));
  throw InvalidArgument(detail::concat("routing: ", found[1], " of ", entries, " entries are bad (an expert id outside [0, ",
                                       experts, ") or a weight that is not finite); the first is token ", i / r.top_k,
                                       ", slot ", i % r.top_k, ": id ", id, ", weight ", weight));
}

void maybe_validate_routing(const RoutingView& r, int experts, cudaStream_t stream) {
  if (!routing_checks_enabled()) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(stream, &capture);
  if (e == cudaErrorStreamCaptureImplicit) {
    // The legacy stream while another stream captures: skipped like a
    // capturing stream (a check would sync inside that capture).
    (void)cudaGetLastError();
    return;
  }
  WD_CUDA_CHECK(e);
  if (capture != cudaStreamCaptureStatusNone) return;
  // The check allocates and synchronises: relaxed for its duration, so that
  // another thread's global-mode capture is not invalidated by it.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  WD_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  try {
    validate_routing(r, experts, stream);
  } catch (...) {
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    throw;
  }
  WD_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
}

}  // namespace wd
