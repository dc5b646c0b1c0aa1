// Instantiations of the classical grouped GEMM for W8A8 with FP8 block-128 weights.
#include "kernels/classical_gemm_impl.cuh"

namespace wd::kernels::gemm {
WD_CLASSICAL_GEMM_INSTANCES(WeightFormat::kFP8Block128)
}  // namespace wd::kernels::gemm
