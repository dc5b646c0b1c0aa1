// Synthetic tensors generated on the device, bit-identical to the host
// generator (src/core/synthetic_rng.h): benchmarks fill gigabytes of weights
// in milliseconds, and tests can regenerate the same values on the host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "warpdecode/weights.h"

namespace wd::kernels {

// out[i] = bf16(weight(seed, tensor, i)) for i in [0, n).
void synthetic_bf16(uint16_t* out, size_t n, const SyntheticSpec& spec, SyntheticTensor tensor,
                    cudaStream_t stream);

}  // namespace wd::kernels
