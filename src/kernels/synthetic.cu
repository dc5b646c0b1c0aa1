#include "kernels/synthetic.cuh"

#include "core/cuda_check.h"
#include "core/synthetic_rng.h"

namespace wd::kernels {
namespace {

__global__ void synthetic_bf16_kernel(uint16_t* out, size_t n, SyntheticSpec spec, uint32_t tensor) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = float_to_bf16(
        rng::weight(spec.seed, tensor, i, spec.stddev, spec.outlier_fraction, spec.outlier_scale));
}

}  // namespace

void synthetic_bf16(uint16_t* out, size_t n, const SyntheticSpec& spec, SyntheticTensor tensor,
                    cudaStream_t stream) {
  if (n == 0) return;
  synthetic_bf16_kernel<<<4096, 256, 0, stream>>>(out, n, spec, uint32_t(tensor));
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace wd::kernels
