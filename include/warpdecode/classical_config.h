// The classical path's per-call configuration (ClassicalConfig): which
// grouped-GEMM kernel, token tile and fusions a call runs, and the choice
// of them per batch measured on the H200 (docs/CLASSICAL.md "Choosing the
// configuration"). Host logic only, no CUDA: it builds and is tested in
// builds without CUDA too (the accuracy harness's CPU models ask it what
// the H200 runs); warpdecode/classical.h runs it.
#pragma once

#include <string>
#include <vector>

#include "warpdecode/formats.h"  // WD_HD
#include "warpdecode/layout.h"

namespace wd {

// Per-call tuning. for_batch() picks T from the expected tokens per expert
// m = B·K/E and the kernel from the format, as measured on the H200
// (docs/CLASSICAL.md "Choosing the configuration").
// The grouped GEMM kernel of stages 5 and 7:
//   kMmaSync  cp.async → shared memory → ldmatrix → mma.sync (any T)
//   kWgmma    the same pipeline into sm_90a warpgroup MMAs (T = 64, 128)
//   kStream   the decode tile (T = 8): weights loaded straight into MMA
//             fragments in registers, no shared-memory staging; needs H
//             and I multiples of 64 (W8A8 already needs 128): stream_fits
//   kStreamWgmma  the same for FP8 block-128 on sm_90a: the weights are
//             native E4M3 register operands of wgmma, no decode (measured
//             slower than kStream on the H200: not the default)
//   kTma      the TMA tile (any T; sm_90a; BF16, W8A8 and W8A16): one
//             producer warp streams both operands by TMA into a ring of
//             shared-memory slots, two warpgroups multiply (wgmma)
enum class ClassicalGemm { kMmaSync, kWgmma, kStream, kStreamWgmma, kTma };
const char* to_string(ClassicalGemm g);  // "mma", "wgmma", "stream", "stream-wgmma", "tma"

struct ClassicalConfig {
  int tile_tokens = 16;  // T: 8, 16, 32, 64, 80 (TMA), 128 or 144 (TMA, BF16 activations): the padding unit and GEMM token tile
  ClassicalGemm gemm = ClassicalGemm::kMmaSync;
  bool pdl = false;      // programmatic dependent launch between the stages (sm_90+)
  // Stage 6 (SiLU·up) in the epilogue of the gate_up GEMM, from its FP32
  // accumulators: the TMA GEMM, I % 128 == 0, with BF16 activations (BF16
  // weights or W8A16) at every T, or W8A8 at T = 64 or 80, whose epilogue also
  // quantizes h per token and group of 128 (a tile's 128 neurons). kSiluMul
  // is then a stage with nothing to do.
  bool fuse_silu = false;
  // W8A16: MXFP8 weights with BF16 activations (the TMA GEMM decodes the
  // weights to BF16, exactly, on their way into the MMAs): no activation
  // quantization, so the path keeps warp decode's precision. Off: FP8
  // weights run W8A8, as the engines do. MXFP8 weights only (supports()).
  bool bf16_activations = false;
  // The TMA GEMMs of BF16 at T = 144 and of FP8 block-128 W8A8 at T = 64
  // and 80 (prefill, about two token tiles an expert): align pads each
  // expert to an even number of token tiles, and the two blocks of a
  // cluster take an expert's two tiles against one weight tile, each
  // loading half of it and multicasting it to both, so that a weight tile
  // leaves L2 once a pair (label "/wmc"). Off: BF16's clusters share the
  // token tile between two weight tiles; W8A8's blocks run alone
  // (docs/CLASSICAL.md, sessions 19, 20 and 22).
  bool share_weights = false;
  // For this machine's device (kernels::wgmma_available(); none in a build
  // without CUDA).
  static ClassicalConfig for_batch(const MoeShape& shape, int batch, WeightFormat format = WeightFormat::kBF16);
  // The same choice for a device with (sm90a) or without the sm_90a kernels
  // (wgmma, TMA), whatever this machine has.
  static ClassicalConfig for_batch(const MoeShape& shape, int batch, WeightFormat format, bool sm90a);
  // bf16_activations: the W8A16 choice for MXFP8 weights (the TMA tile, T
  // from the tokens per expert, SiLU·up fused where I % 128 == 0) where this
  // device and shape run it; elsewhere, and for other formats, the same as
  // above (the result's bf16_activations then says false).
  static ClassicalConfig for_batch(const MoeShape& shape, int batch, WeightFormat format, bool sm90a,
                                   bool bf16_activations);
  std::string label() const;  // e.g. "t16", "t128/wgmma/pdl", "t8/stream/pdl", "t128/tma/silu/pdl", "t8/tma/a16/silu"
  // Whether the kStream GEMM takes both GEMMs of this shape and format.
  static bool stream_fits(const MoeShape& shape, WeightFormat format);
  // Whether the kTma GEMM takes both GEMMs of this shape and format (the
  // device aside: supports() adds it).
  static bool tma_fits(const MoeShape& shape, WeightFormat format);
  // Whether this configuration runs that shape and format on this device
  // (tile and kernel allowed, shape divisible as the kernel needs).
  bool supports(const MoeShape& shape, WeightFormat format) const;
  // The same on a device with (sm90a) or without the sm_90a kernels.
  bool supports(const MoeShape& shape, WeightFormat format, bool sm90a) const;
  // The configuration for tiled-only weights (DeviceWeightsOptions::
  // tiled_only()), which only the TMA GEMM reads: BF16, for_batch's TMA
  // choice, where for_batch would take the stream GEMM (qwen3-30b-a3b-sized
  // experts at 1/8 < m <= 2), the same as for_batch everywhere else; MXFP8,
  // W8A16 (the W8A8 tile reads E4M3 codes straight into wgmma, not packed
  // words): for_batch's bf16_activations choice.
  static ClassicalConfig for_tiled_copies(const MoeShape& shape, int batch, bool sm90a, WeightFormat format);
  // Whether this configuration reads tiled-only weights (on an sm_90a
  // device; supports() says whether this one runs it): the TMA GEMM with
  // BF16 activations (BF16 weights, or MXFP8 in W8A16), SiLU·up fused, the
  // shape's tiled copies readable through TMA maps
  // (kernels::tma_gemm_reads_tiled). The TMA GEMM then loads each weight
  // box straight from the tiled copy, as two 64-byte-swizzled K halves
  // (MXFP8: packed words, and the tiled scales): the same products in the
  // same order, so the bits of the canonical tensors.
  bool reads_tiled(const MoeShape& shape, WeightFormat format) const;
  // Whether its gate_up GEMM gathers the token rows from x itself (the TMA
  // GEMM, BF16 weights, T <= 128): stage 4 (kPermute) then has nothing to do
  // and the workspace's `a` is not written.
  bool gathers_rows(WeightFormat format) const;
  // Every tile height of every GEMM kernel (the TMA one also with SiLU·up
  // fused, and W8A16 with and without it), PDL off then on (not filtered:
  // supports() says which run a given shape here). bench-moe's sweep and the
  // tests walk this list.
  static std::vector<ClassicalConfig> candidates();
};

// W8A16 (ClassicalConfig::bf16_activations): both GEMMs' BF16 activations
// (stage 4's rows `a` and stage 6's `h`) are stored with K permuted within
// each group of 16: element 16g + 4t + 2j + e (t < 4; j, e < 2) at position
// 16g + 8j + 2t + e. The TMA tile then finds the four E4M3 weight codes a
// thread's wgmma A fragment takes from one k16 step (the activations'
// positions 2t, 2t + 1, 2t + 8, 2t + 9) in four contiguous bytes, k = 4t ..
// 4t + 3: one ldmatrix reads two rows × two steps of them, where it took
// eight 2-byte loads (classical_tma_gemm.cu). Needs K % 16 == 0 (W8A16 needs
// 128).
WD_HD constexpr int a16_k_position(int k) { return (k & ~15) | ((k & 2) << 2) | ((k >> 1) & 6) | (k & 1); }

}  // namespace wd
