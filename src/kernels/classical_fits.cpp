// The classical GEMMs' shape rules (kernels/classical_fits.h).
#include "kernels/classical_fits.h"

namespace wd::kernels {

bool stream_gemm_fits(WeightFormat format, int n, int k) {
  if (n <= 0 || k <= 0 || n % kStreamGemmRows != 0) return false;
  return k % (format == WeightFormat::kBF16 ? kStreamGemmBf16RoundElems : kStreamGemmGroup) == 0;
}

bool stream_wgmma_gemm_fits(WeightFormat format, int n, int k) {
  return format == WeightFormat::kFP8Block128 && n > 0 && k > 0 && n % kStreamWgmmaRows == 0 &&
         k % kStreamWgmmaGroup == 0;
}

bool tma_gemm_fits(WeightFormat format, int n, int k) {
  if (n <= 0 || k <= 0 || n % 8 != 0) return false;
  if (format == WeightFormat::kBF16) return k % 8 == 0;
  return n % 128 == 0 && k % 128 == 0;  // W8A8 (FP8 block-128 or MXFP8), W8A16 (MXFP8)
}

bool tma_gemm_reads_tiled(WeightFormat format, int n, int k, bool fuse_silu, bool a_bf16) {
  // BF16 weights and activations, or W8A16 (MXFP8 codes and scales tiled).
  const bool bf16 = format == WeightFormat::kBF16 && !a_bf16, w8a16 = format == WeightFormat::kMXFP8 && a_bf16;
  if (!(bf16 || w8a16) || !tma_gemm_fits(format, n, k) || k % 64 != 0) return false;
  return fuse_silu ? n % 256 == 0 : n % 16 == 0;
}

TableCard device_table_card() { return table_card(device_name()); }

#if !defined(WD_HAVE_CUDA)
bool wgmma_available() { return false; }
std::string device_name() { return ""; }
#endif

}  // namespace wd::kernels
