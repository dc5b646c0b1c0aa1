// Instantiations of the classical grouped GEMM for W8A8 with MXFP8 weights.
#include "kernels/classical_gemm_impl.cuh"

namespace wd::kernels::gemm {
WD_CLASSICAL_GEMM_INSTANCES(WeightFormat::kMXFP8)
}  // namespace wd::kernels::gemm
