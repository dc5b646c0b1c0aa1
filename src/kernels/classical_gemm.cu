// Host side of the classical grouped GEMM: validation and the choice of
// instantiation (see classical_gemm.cuh).
#include "kernels/classical_gemm.cuh"

#include "core/cuda_check.h"
#include "warpdecode/error.h"

namespace wd::kernels {
namespace gemm {
template <WeightFormat F, int kT, bool kWgmma>
void launch(const GroupedGemmParams& p, cudaStream_t stream, bool pdl);
}  // namespace gemm

std::string device_name() {
  // No device is an answer here ("": the default table), not an error; the
  // failed call's error is cleared so that the next checked call does not
  // report it.
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return prop.name;
}

bool wgmma_available() {
#if defined(WD_HAVE_SM90A)
  // Like device_name(): no device reads as "no", and a failed query leaves
  // no error behind for the next launch check to misreport.
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

namespace {
template <WeightFormat F>
void launch_format(const GroupedGemmParams& p, int tile_tokens, GemmKernel kernel, cudaStream_t stream, bool pdl) {
  if (kernel == GemmKernel::kWgmma) {
    switch (tile_tokens) {
      case 64: return gemm::launch<F, 64, true>(p, stream, pdl);
      case 128: return gemm::launch<F, 128, true>(p, stream, pdl);
      default: break;
    }
    throw InvalidArgument(detail::concat("classical GEMM: the wgmma kernel takes tile_tokens 64 or 128, not ",
                                         tile_tokens));
  }
  switch (tile_tokens) {
    case 8: return gemm::launch<F, 8, false>(p, stream, pdl);
    case 16: return gemm::launch<F, 16, false>(p, stream, pdl);
    case 32: return gemm::launch<F, 32, false>(p, stream, pdl);
    case 64: return gemm::launch<F, 64, false>(p, stream, pdl);
    case 128: return gemm::launch<F, 128, false>(p, stream, pdl);
    default: break;
  }
  throw InvalidArgument(detail::concat("classical GEMM: tile_tokens = ", tile_tokens,
                                       " (allowed: 8, 16, 32, 64, 128)"));
}
}  // namespace

void grouped_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, GemmKernel kernel,
                  cudaStream_t stream, bool pdl) {
  WD_CHECK(p.w && p.a && p.out, "classical GEMM: a required pointer is null");
  WD_CHECK(p.n > 0 && p.k > 0 && p.rows > 0 && p.max_blocks > 0, "classical GEMM: N = ", p.n, ", K = ", p.k,
           ", rows = ", p.rows, ", max_blocks = ", p.max_blocks, " must all be positive");
  WD_CHECK(p.k % (format == WeightFormat::kBF16 ? 8 : 16) == 0, "classical GEMM: K = ", p.k,
           " must fill whole 16-byte chunks (a multiple of 8 BF16 / 16 E4M3)");
  WD_CHECK(((reinterpret_cast<uintptr_t>(p.w) | reinterpret_cast<uintptr_t>(p.a) |
             reinterpret_cast<uintptr_t>(p.out)) % 16) == 0,
           "classical GEMM: weights, activations and output must be 16-byte aligned");
  if (format != WeightFormat::kBF16) {
    WD_CHECK(p.k % 128 == 0 && p.n % 128 == 0, "classical GEMM: W8A8 needs N = ", p.n, " and K = ", p.k,
             " to be multiples of 128 (activation groups and FP8 block-128 scale blocks)");
    WD_CHECK(p.a_bf16 || p.a_scales != nullptr, "classical GEMM: W8A8 needs the activation scales");
    WD_CHECK(format == WeightFormat::kMXFP8 ? p.w_mx_scales != nullptr : p.w_block_scales != nullptr,
             "classical GEMM: the ", to_string(format), " weight scales are missing");
  }
  WD_CHECK(!p.fuse_silu || kernel == GemmKernel::kTma, "classical GEMM: only the TMA kernel fuses SiLU·up");
  WD_CHECK(!p.a_rows || kernel == GemmKernel::kTma, "classical GEMM: only the TMA kernel gathers token rows");
  WD_CHECK(!p.w_tiled || kernel == GemmKernel::kTma, "classical GEMM: only the TMA kernel reads tiled weight copies");
  WD_CHECK(!p.a_bf16 || (kernel == GemmKernel::kTma && format == WeightFormat::kMXFP8),
           "classical GEMM: W8A16 (BF16 activations with FP8 weights) takes the TMA kernel and MXFP8 weights, not ",
           to_string(format));
  if (kernel == GemmKernel::kStream) return stream_gemm(p, format, tile_tokens, stream, pdl);
  if (kernel == GemmKernel::kStreamWgmma) {
    WD_CHECK(tile_tokens == 8, "classical GEMM: the stream-wgmma kernel takes tile_tokens 8, not ", tile_tokens);
    return stream_wgmma_gemm(p, format, stream, pdl);
  }
  if (kernel == GemmKernel::kTma) return tma_gemm(p, format, tile_tokens, stream, pdl);
  WD_CHECK(kernel != GemmKernel::kWgmma || wgmma_available(),
           "classical GEMM: the wgmma kernel needs an sm_90 device and an sm_90a build");
  switch (format) {
    case WeightFormat::kBF16: return launch_format<WeightFormat::kBF16>(p, tile_tokens, kernel, stream, pdl);
    case WeightFormat::kFP8Block128: return launch_format<WeightFormat::kFP8Block128>(p, tile_tokens, kernel, stream, pdl);
    case WeightFormat::kMXFP8: return launch_format<WeightFormat::kMXFP8>(p, tile_tokens, kernel, stream, pdl);
  }
  throw InvalidArgument("classical GEMM: unknown weight format");
}

}  // namespace wd::kernels
