// The data-movement stages of the classical expert-centric MoE path (the
// GEMM stages are in classical_gemm.cuh). Numbering follows docs/CLASSICAL.md:
//
//   2 topk_softmax    logits (B, E) FP32 -> ids (B, K), weights (B, K)
//   3 moe_align       ids -> per-expert counts, padded offsets, the
//                     expert-sorted row of every (token, slot) entry, the
//                     expert of every block of T rows
//   4 permute_rows    x (B, H) BF16 -> A (rows, H): each token's row copied
//                     to its K sorted rows; W8A8: quantized to E4M3 per token
//                     and group of 128 (FP32 scale = amax/448)
//   6 silu_mul        G (rows, 2I) BF16 -> h (rows, I) = silu(gate)·up, BF16,
//                     or W8A8: E4M3 + FP32 scale per row and group of 128
//   8 combine         P (rows, H) BF16 partials -> y[b] = Σ_k w[b][k]·P[row(b,k)]
//
// Entries: entry i = b·K + k is token b's k-th routed slot. The sorted buffer
// holds each expert's entries in ascending i, padded to a multiple of T rows
// (padding rows: entry -1). Every stage is deterministic: no atomics decide an
// order or a floating-point sum (the multi-block align counts with integer
// shared-memory atomics, whose totals do not depend on the order).
//
// pdl: launch with programmatic dependent launch (launch.cuh). permute_rows,
// silu_mul and combine read before their PDL wait what was complete when
// they started (x; the align tables; the routing weights), so that only the
// predecessor's output costs a round trip after it.
//
// Activation quantization (both W8A8 points): for a group v of 128 values
// s = max(amax(v), 1e-10) / 448, q_i = e4m3(v_i / s) (round to nearest even,
// saturating), so v_i ≈ e4m3_to_float(q_i)·s; the CPU reference
// (classical_reference.h) computes the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace wd::kernels {

constexpr int kActGroup = 128;  // activation quantization group (elements)

struct TopKParams {
  const float* logits;  // (B, E)
  int32_t* ids;         // (B, K)
  float* weights;       // (B, K)
  int batch;            // B
  int experts;          // E <= 1024
  int top_k;            // K <= 16
  int norm_topk_prob;
};
void topk_softmax(const TopKParams& p, cudaStream_t stream, bool pdl = false);

struct AlignParams {
  const int32_t* ids;       // (B·K) expert of each entry
  int entries;              // B·K
  int experts;              // E
  int tile_tokens;          // T: each expert's rows are padded to a multiple of T
  int32_t* counts;          // (E) entries per expert
  int32_t* offsets;         // (E+1) first padded row of each expert; offsets[E] = rows in use
  int32_t* sorted_entries;  // (max rows) entry of each row, -1 for padding
  int32_t* block_expert;    // (max blocks) expert of each block of T rows
  int32_t* entry_row;       // (B·K) sorted row of each entry
  int32_t* meta;            // [0] blocks in use, [1] rows in use
  int32_t* chunk_counts;    // (ceil(B·K / 1024), E) scratch of the multi-block align; nullptr: one block
  // Nonzero: each expert's rows padded to a multiple of 2T (blocks still of
  // T rows), so that blocks 2i and 2i + 1 always belong to one expert and
  // the blocks in use are even: the TMA GEMM's weight-sharing clusters
  // (GroupedGemmParams::share_weights) take them in pairs.
  int pair_blocks;
};
// One block of up to 1024 threads; shared memory E·warps ints (≤ 32 KB).
void moe_align(const AlignParams& p, cudaStream_t stream, bool pdl = false);

struct PermuteParams {
  const uint16_t* x;         // (B, H) BF16
  const int32_t* entry_row;  // (B·K)
  void* a;                   // (rows, H) BF16, or E4M3 when quantize
  float* a_scales;           // (rows, H/128) when quantize
  int batch;                 // B
  int hidden;                // H (multiple of 8; of 128 when quantize)
  int top_k;                 // K
  int quantize;
  int a16_order;             // BF16 rows in a16_k_position order (W8A16; H % 16 == 0)
};
void permute_rows(const PermuteParams& p, cudaStream_t stream, bool pdl = false);

struct SiluMulParams {
  const uint16_t* gate_up;        // (rows, 2I) BF16: gate in [0, I), up in [I, 2I)
  const int32_t* sorted_entries;  // (rows): padding rows (-1) are skipped
  const int32_t* meta;            // meta[1] = rows in use
  void* h;                        // (rows, I) BF16, or E4M3 when quantize
  float* h_scales;                // (rows, I/128) when quantize
  int max_rows;
  int intermediate;               // I (multiple of 8; of 128 when quantize)
  int quantize;
  int a16_order;                  // BF16 h in a16_k_position order (W8A16; I % 16 == 0)
};
void silu_mul(const SiluMulParams& p, cudaStream_t stream, bool pdl = false);

struct CombineParams {
  const uint16_t* partials;  // (rows, H) BF16
  const int32_t* entry_row;  // (B·K)
  const float* route_w;      // (B, K)
  void* y;                   // (B, H) BF16 or FP32
  const void* residual;      // (B, H) same type, or nullptr
  int out_fp32;
  int batch;                 // B
  int hidden;                // H (multiple of 8)
  int top_k;                 // K
};
void combine(const CombineParams& p, cudaStream_t stream, bool pdl = false);

// Device FP8 block-128 quantization of `matrices` row-major (rows, cols)
// BF16 matrices stored back to back: q E4M3 in the same layout, scales
// (matrices, ceil(rows/128), ceil(cols/128)); bit-identical to
// wd::quantize_fp8_block128 on the host.
void quantize_fp8_block128(const uint16_t* in, size_t matrices, size_t rows, size_t cols, uint8_t* q,
                           float* scales, cudaStream_t stream);

}  // namespace wd::kernels
