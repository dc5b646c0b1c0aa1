// classical_gemm: the grouped expert GEMM of the classical path (stages 5
// and 7), and the router GEMM (stage 1) as its one-expert case.
//
//   out[r][n] = Σ_k W[e(r)][n][k] · A[r][k]          (FP32 accumulation)
//   W8A8:     = Σ_kb sw(e, n, kb) · sa(r, kb) · Σ_{k in kb} q_W · q_A
//
// A holds the token rows sorted by expert and padded so that every block of
// tile_tokens consecutive rows belongs to one expert (stage 3/4 output):
// block b is rows [b·T, b·T+T) of expert block_expert[b].
//
// Mapping: grid (max_blocks, ceil(N / BW)); a block computes the BW weight
// rows [n0, n0+BW) for the T token rows of one expert block ("swap AB": the
// weights are the MMA's M side, so decode's 1-16 tokens per expert fill the
// N=8 side of m16n8 instead of wasting 15/16 of an M=16 tile). Blocks past the
// device-side count exit at once, so the grid is fixed and graph-capturable.
// Each stage of the cp.async pipeline brings 128 bytes of K per row (64 BF16
// or 128 E4M3: one scale block of FP8 block-128) of W and A into shared
// memory, 128-byte rows XOR-swizzled by 16-byte chunk (the wgmma SW128 K-major
// layout, so the mma.sync and wgmma kernels share loads and layout).
//   mma.sync kernel: warps tile (BW × T); m16n8k16 BF16 or m16n8k32 E4M3.
//   wgmma kernel (sm_90a): 2 warpgroups × 64 weight rows, m64nTk16/k32.
// FP8: MMA partial sums over one 128-K block (FP8 block-128) or one 32-K
// block (MXFP8, per-row E8M0 scales) are promoted into the FP32 accumulator
// with their scales (DeepGEMM-style), never accumulated across scale blocks.
//
// Layouts: W (E, N, K) row-major BF16 or E4M3; w_block_scales (E, N/128,
// K/128); w_mx_scales (E, N, K/32); A (rows, K); a_scales (rows, K/128);
// out (rows, N) BF16 or FP32.
// Invariants: K % 8 == 0 (BF16), K % 128 == 0 and N % 128 == 0 (FP8, one
// scale block per 128 rows of N); 16-byte aligned pointers.
// Bytes: distinct experts × N·K·elem (+ scales) + rows·K·elem of A + rows·N
// of out.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/classical_fits.h"
#include "warpdecode/layout.h"

namespace wd::kernels {

struct GroupedGemmParams {
  const void* w;                // (E, N, K) BF16 or E4M3
  const float* w_block_scales;  // (E, N/128, K/128) FP32; FP8 block-128 only
  const uint8_t* w_mx_scales;   // (E, N, K/32) E8M0; MXFP8 only
  const void* a;                // (rows, K) BF16 (BF16 weights, W8A16) or E4M3 (W8A8)
  const float* a_scales;        // (rows, K/128) FP32; W8A8 only
  const int32_t* block_expert;  // (max_blocks) expert of each block; nullptr: expert 0
  const int32_t* num_blocks;    // device scalar, blocks in use; nullptr: all max_blocks
  void* out;                    // (rows, N) BF16, or FP32 when out_fp32
  int out_fp32;
  int rows;                     // rows of A and out (loads and stores stop there)
  int n;                        // N
  int k;                        // K
  int max_blocks;               // blocks launched along x
  int experts;                  // E: the weights' extent (the TMA kernel's tensor map); 0 = not given
  // TMA kernel, BF16 or W8A16: W is gate_up (E, 2I, K), gate rows [0, I),
  // up rows [I, 2I); out = (rows, I) BF16 silu(gate)·up (stage 6 in the
  // epilogue). W8A8 (T = 64): out = (rows, I) E4M3 h quantized per token and
  // group of 128 (stage 6's quantization too), its scales in out_scales.
  int fuse_silu;
  // W8A16 (TMA kernel, MXFP8 weights): A stays BF16 and the weights are
  // decoded to BF16 (exactly, scale included) on their way into the MMAs:
  // no activation quantization, a_scales unused.
  int a_bf16;
  // TMA kernel, BF16 weights: when set, A is the tokens' own (tokens, K)
  // matrix x and the kernel gathers the sorted rows itself (stage 4 folded
  // into the GEMM's loads): sorted row r is x row a_rows[r] / a_rows_div,
  // or zeros where a_rows[r] < 0 (padding). a_rows holds every row of the
  // blocks in use (the align stage's sorted_entries, a_rows_div = K).
  const int32_t* a_rows;
  int a_rows_div;
  // TMA kernel, W8A16 and FP8 block-128 W8A8 at T = 128: when set, the
  // align stage's sorted_entries (row -> entry, -1 for padding; an expert's
  // rows in use come first in its blocks). W8A16: each token tile's wgmmas
  // issue tma_a16_issue_rows(T, rows in use) rows instead of T; the outputs
  // of the rows past them are zeros. FP8 block-128 at T = 128: a consumer
  // warpgroup whose 64 rows are all padding skips its MMAs and stores (those
  // rows' outputs are left as they were). nullptr: all T.
  const int32_t* row_entries;
  // W8A8 with fuse_silu: (rows, I/128) FP32 scales of the quantized h.
  float* out_scales;
  // TMA kernel, BF16 at T = 144 or FP8 block-128 W8A8 at T = 64 and 80: the
  // blocks come in pairs of one expert (AlignParams::pair_blocks), and the
  // two blocks of a cluster take the pair's two token tiles against one
  // weight tile, each loading half of that tile's rows and multicasting it
  // to both (instead of sharing the token tile between two weight tiles).
  int share_weights;
  // TMA kernel, BF16 weights and activations: w is the tiled BF16 copy
  // (core/tiled_box_map.h) of gate_up when fuse_silu (warpdecode/
  // gate_up_tiling.h), of down otherwise (down_tiling.h), read through
  // maps of that layout into 64-byte-swizzled K halves: the same products
  // in the same order, so the same bits as from the canonical tensor
  // (tma_gemm_reads_tiled says which GEMMs take it).
  int w_tiled;
};

// kMmaSync, kWgmma: the shared-memory pipeline above. kStream: the decode
// tile (T = 8 or 16) with the weights streamed straight into MMA fragments in
// registers, no shared-memory staging (classical_stream_gemm.cu).
// kStreamWgmma: the same for FP8 block-128 on sm_90a, the weights as native
// E4M3 A operands of wgmma (classical_stream_wgmma.cu). kTma: the prefill
// tile (and its smaller-T forms), warp-specialised, TMA loads into a ring of
// shared-memory slots (classical_tma_gemm.cu).
enum class GemmKernel { kMmaSync, kWgmma, kStream, kStreamWgmma, kTma };

// tile_tokens T: 8, 16, 32, 64 or 128 (mma.sync); 64 or 128 (wgmma, sm_90a
// only); 8 or 16 (stream), 8 (stream-wgmma), 8, 16, 32, 64, 128 or (BF16)
// 144 (TMA, sm_90a only), where they fit.
// Throws wd::InvalidArgument for a combination the kernels do not take.
// pdl: programmatic dependent launch (launch.cuh); the first stages'
// weights stream before the wait for the previous kernel.
void grouped_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, GemmKernel kernel,
                  cudaStream_t stream, bool pdl = false);

void stream_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, cudaStream_t stream, bool pdl);
void stream_wgmma_gemm(const GroupedGemmParams& p, WeightFormat format, cudaStream_t stream, bool pdl);

void tma_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, cudaStream_t stream, bool pdl);

}  // namespace wd::kernels
