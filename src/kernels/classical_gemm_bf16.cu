// Instantiations of the classical grouped GEMM for BF16 weights and activations.
#include "kernels/classical_gemm_impl.cuh"

namespace wd::kernels::gemm {
WD_CLASSICAL_GEMM_INSTANCES(WeightFormat::kBF16)
}  // namespace wd::kernels::gemm
