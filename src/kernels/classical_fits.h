// Which GEMMs the classical path's kernels take: shape rules only, host and
// device C++ without CUDA headers, so that the configuration choice
// (warpdecode/classical_config.h) builds and is tested in builds without
// CUDA too. Defined in classical_fits.cpp; the kernels' files static_assert
// that their tile constants are the ones below.
#pragma once

#include <string>

#include "warpdecode/card.h"
#include "warpdecode/formats.h"  // WD_HD
#include "warpdecode/layout.h"

namespace wd::kernels {

// The stream kernel (classical_stream_gemm.cu): weight rows a block, K
// elements a BF16 round (two 64-byte chunks), elements a W8A8 scale group.
constexpr int kStreamGemmRows = 32, kStreamGemmBf16RoundElems = 64, kStreamGemmGroup = 128;
// The stream-wgmma kernel (classical_stream_wgmma.cu): one m64 tile a block.
constexpr int kStreamWgmmaRows = 64, kStreamWgmmaGroup = 128;

// W8A16 on the TMA tile (GroupedGemmParams::row_entries): the token rows a
// tile's wgmmas issue when `used` of its T rows are in use. T = 144 issues
// 128 where they fit (at 2048 tokens on E = 128, K = 8 an expert's one tile
// holds 128 ± 11 rows; at 4096 its second 112 ± 16); every other T, and
// more rows, all T. One narrower width only: each width is its own copy of
// the kernel's slot loop, and with a third (or at T = 80 with a second)
// ptxas serialises the wgmmas for want of registers (docs/CLASSICAL.md,
// session 35).
WD_HD constexpr int tma_a16_issue_rows(int tile, int used) { return tile == 144 && used <= 128 ? 128 : tile; }

// W8A8 on the TMA tile: the token tiles whose two consumer warpgroups split
// the tokens (64 each against all 256 weight rows) and skip a half of all
// padding rows when given row_entries: FP8 block-128 at T = 128.
WD_HD constexpr bool tma_w8a8_splits_tokens(WeightFormat format, int tile) {
  return tile == 128 && format == WeightFormat::kFP8Block128;
}

// W8A8 (FP8 activations) on the TMA tile: the token tiles whose gate_up
// epilogue can fuse SiLU·up and h's per-token quantization, those whose
// 256 weight rows are 128 neurons, one activation group: T = 64 and 80
// (FP8 block-128 and MXFP8), and the token-split tile.
WD_HD constexpr bool tma_w8a8_fuses_silu(WeightFormat format, int tile) {
  return tile == 64 || tile == 80 || tma_w8a8_splits_tokens(format, tile);
}

// Whether the stream kernel takes an (N, K) GEMM of this format: N % 32 == 0
// and K % 64 == 0 (BF16) or K % 128 == 0 (W8A8).
bool stream_gemm_fits(WeightFormat format, int n, int k);
// Whether the stream-wgmma kernel takes it: FP8 block-128, N % 64 == 0,
// K % 128 == 0 (and, at launch, an sm_90a device).
bool stream_wgmma_gemm_fits(WeightFormat format, int n, int k);
// Whether the TMA kernel takes it: BF16 with N % 8 == 0 and K % 8 == 0, or
// W8A8 (FP8 block-128, MXFP8) or W8A16 (MXFP8) with N, K multiples of 128
// (and, at launch, an sm_90a device and p.experts set; fuse_silu: BF16 or
// W8A16, or W8A8 at tile_tokens 64 with out_scales, and N % 256 == 0).
bool tma_gemm_fits(WeightFormat format, int n, int k);
// Whether the TMA kernel takes a tiled copy (GroupedGemmParams::w_tiled) for
// this GEMM: BF16 weights and activations or W8A16 (MXFP8 codes and their
// tiled scales), K % 64 == 0, and gate_up with SiLU·up fused (N = 2I a
// multiple of 256) or down (N % 16 == 0).
bool tma_gemm_reads_tiled(WeightFormat format, int n, int k, bool fuse_silu, bool a_bf16);

// True when the current device runs the sm_90a kernels (wgmma, TMA):
// compute capability 9.0 and this build has sm_90a code (classical_gemm.cu);
// false in a build without CUDA.
bool wgmma_available();
// The current device's name (cudaDeviceProp::name), "" when there is none
// and in a build without CUDA: which built-in crossover table serves it
// (wd::table_card).
std::string device_name();
// The measured card the current device takes: table_card(device_name()).
TableCard device_table_card();

}  // namespace wd::kernels
