// The TMA tile of the classical grouped GEMM (GemmKernel::kTma,
// classical_gemm.cuh): T = 8, 16, 32, 64, 80, 128 or (BF16) 144 token
// rows, BF16, W8A8 (FP8 block-128 or MXFP8 weights) or W8A16 (MXFP8
// weights decoded to BF16 by the consumers, BF16 activations;
// GroupedGemmParams::a_bf16), sm_90a. Built for prefill (T = 128); with T
// sized to the tokens per expert it is the default at decode batches too
// (ClassicalConfig::for_batch): there the producer warp keeps 100-200 KB of
// weights in flight per SM with two TMA instructions a slot, which the
// register-streaming tiles cannot (docs/CLASSICAL.md, session 11).
//
// Why: the shared-memory wgmma tile (classical_gemm_impl.cuh) has every
// thread issue cp.async copies between its MMAs and two block barriers per
// 128-byte K step, with 3-5 stages: 28-45 % of the tensor-core or bandwidth
// floor at 1024-4096 tokens. Here the copies are TMA's: one lane moves a
// whole slot (weight tile + token tile) into a ring of kStages shared-memory
// slots, and the hand-offs are shared-memory barriers (tma.cuh): a slot is
// "full" when its bytes have landed and "empty" when every thread's MMAs on
// it are done, so no thread waits on a block barrier and the loads run
// kStages slots ahead across tile boundaries (warp specialisation: one
// producer warp, two consumer warpgroups).
//
// Mapping: persistent blocks (one per SM), tile t = blockIdx.x + j·gridDim.x
// of the nb·ntn tiles, t = expert block · ntn + weight tile (with clusters of
// two, gridDim.x is even, so the two blocks of a cluster take tiles t and
// t + 1 of one expert block at every j). Consumer warpgroup c computes
// weight rows [n0 + c·kRows/W, n0 + (c+1)·kRows/W) of W consumer warpgroups
// (Warps) for the block's T token rows with wgmma m64nT (k16 BF16, k32
// E4M3), operands from shared memory (W8A16: the weights from registers,
// decoded from shared memory); BF16 tiles are 256 weight rows, W8A8 128, or
// 256 at T = 64, W8A16 128 at T = 8 and 256 above (Tile below).
//
// Shared memory (1024-byte aligned base), per slot s of kStages:
//   W tile  kRows weight rows × 128 B (64 BF16 / 128 E4M3 of K)   TMA, 128-byte swizzle
//   A tile  T token rows × 128 B                                   TMA, 128-byte swizzle
//   W8A8:   the T rows' activation scales of this 128-K block (cp.async),
//           the weight tile's block-128 scale or, MXFP8, each weight row's
//           four E8M0 codes (cp.async)
//   W8A16:  the A tile is two halves of T rows × 128 B (64 BF16 each: the
//           slot's 128 K), and each weight row's four E8M0 codes
//   a "full" and an "empty" barrier
// The weights are read as one (E·N, K) matrix: a tile at n0 + kRows > N reads
// the next expert's first rows, which are computed and not stored; past E·N,
// and past K, TMA fills zeros.
//
// Clusters (kCluster = 2: BF16 at T >= 64 and the swapped FP8 block-128
// tile's fused gate_up, an even number of weight tiles per expert block):
// tiles 2j and 2j + 1 — two weight tiles of one expert block — go to the
// two blocks of a cluster, which share the token tile: each
// block's producer loads half of its rows and multicasts it into both
// blocks' slot. Why: the GEMMs were bound by L2 throughput at prefill (ncu,
// session 12 run 7), and the token tile re-read by every weight tile of its
// expert block was about a third of the L2 reads (qwen3-30b-a3b BF16
// gate_up at 1024 tokens: 393 of 1198 MB). Each slot's "empty" barrier then
// counts the consumer warps of both blocks (a producer writes into both),
// and the two blocks walk the same slots in lock step. Measured (session 13):
// 1.5-5 % faster layers (launch_tma); ncu still shows the gate_up GEMM at
// 91 % of L2 throughput, so the token tile was not the whole L2 load.
//
// Weight-sharing clusters (kShareW: BF16 at T = 144 and FP8 block-128 W8A8
// at T = 64 and 80, GroupedGemmParams::share_weights): align pads each
// expert to an even number of token tiles
// (AlignParams::pair_blocks), and the two blocks of a cluster take one
// expert's two token tiles against the same weight tile, each loading half
// of it and multicasting it into both, and its own token tile. Why: at 4096
// tokens the T = 144 GEMMs were L2-bound (ncu, session 19 run 5: L2
// throughput 89-91 %, most of it the weight tile re-read by every token
// tile of its expert). Measured (session 20 runs 1-2, layer µs): 4096
// tokens qwen3-30b-a3b 722.0 -> 691.3 (gate_up 407.2 -> 378.5, down 231.9
// -> 221.9), qwen3-235b-a22b 2487.7 -> 2328.6; at 2048 tokens, where most
// experts have one tile and pairing doubles it, 475.3 -> 737.1
// (ClassicalConfig::for_batch takes them only where pairing pads at most 5 %
// more rows). Gathering each block's token rows from x instead (run 2) saved
// the permute stage (43 µs) but made gate_up 36 % slower (378.5 -> 514.5
// µs; not profiled: likely the 1152 16-byte cp.async a slot the producer
// warpgroup issues where one TMA box does it). Nor does one TMA box a row
// (session 16, 2.2-3.2× slower; session 22 run 3 again: 144 one-row boxes
// a slot, the swizzle right, gate_up 373.5 -> 1666.6 µs: about 60 cycles a
// box, the TMA issue rate). FP8
// block-128 W8A8 (session 22 run 1, against the same tile unpaired, µs,
// qwen3-30b-a3b / qwen3-235b-a22b): T = 80 at 2048 tokens, where pairing
// pads no rows, 336.7 -> 329.7 / 1121.0 -> 1060.8 (the for_batch default
// there); T = 64 at 4096, where it pads 11 % more, 563.6 -> 606.0 / 1865.0
// -> 1957.7 (down +14 %: these GEMMs were not bound by L2 as the BF16 ones
// are). Each block loads its own scales; its producer multicasts half the
// weight tile (swapped: consumer rank's two 64-row boxes), and each slot's
// empty barrier counts this block's consumer threads and the other's
// consumer warps. Pairing without padding (session 23 run 5: each expert's
// blocks two by two, then the experts' odd last blocks two by two, a pair of
// two experts' blocks each loading its whole weight tile) was slower than
// the padded pairs wherever these clusters are the default (FP8 T = 80 at
// 2048 tokens +2.7 / +1.3 %, BF16 T = 144 at 4096 +1.3 / +0.5 %), and at T
// = 64, 4096 tokens, slower than no clusters: a pair that shares nothing
// costs more than a padded pair that shares its weight tile.
//
// Gathered token rows (kGather: GroupedGemmParams::a_rows; BF16 weights,
// T <= 128): the token tile comes straight from the tokens' matrix x, not
// from the permute stage's sorted copy. The whole producer warpgroup copies
// it: thread i copies 16-byte chunk i % 8 of every 16th row, by cp.async
// (zero-filled for padding rows), into the 128-byte-swizzled place a TMA
// box would put it (chunk c of row r at (c ^ (r % 8))·16 in the row: every
// slot is 1024-byte aligned), and
// arrives on the slot's full barrier when its copies land
// (cp.async.mbarrier.arrive); lane 0 of warp 0 still loads the weight tile
// by TMA. The consumers fence the generic-proxy writes before their wgmmas
// (async proxy) read them. No clusters then (a gathered tile cannot be
// multicast). Why: the permute stage wrote and the GEMM re-read K copies of
// every token row, padding rows included, where x itself stays in L2
// (session 17 run 1: qwen3-30b-a3b BF16 at 1024 tokens 438.8 -> 423.3 µs,
// B = 1 31.0 -> 30.3). Where it loses (ClassicalConfig::gathers_rows): T =
// 144 (4096 tokens: gate_up 400 -> 497 µs; its clusters halved the token
// tile's L2 reads, and L2 bounds the GEMM there) and W8A16. A template
// parameter, not a runtime flag: with the gathering code compiled in and
// unused, ptxas scheduled other kernels differently (W8A16 T = 8 5-7 %
// slower, run 2), so every other kernel compiles from exactly the code it
// had before.
//
// Tiled BF16 weights (kTiledW: GroupedGemmParams::w_tiled, the tiled-only
// upload): the weight box comes from the tiled copy (warpdecode/
// down_tiling.h, gate_up_tiling.h) through a rank-4 (down) or rank-5
// (gate_up) map, core/tiled_box_map.h, as its two K halves one after the
// other, box rows × 64 bytes each under the 64-byte swizzle; the consumers
// read them with 64-byte-swizzle descriptors (k16 steps 2 and 3 in the
// second half). Same MMAs on the same values in the same order: the
// canonical upload's bits. Why not the canonical slot layout: under the
// 128-byte swizzle TMA gives each 64-byte inner box row a 128-byte line of
// its own (bench/tma_tiled_probe, session 51 run 1), and a tiled item's rows
// are 64 bytes. Measured (session 51 run 3): 1-6.5 % slower than the
// canonical upload (qwen3-30b-a3b BF16 2048 tokens 466 -> 478 µs), against
// 2.2× for un-tiling first (1036).
// MXFP8 in W8A16 reads its tiled copies the same way (kTiledW with kA16):
// the packed E4M3 words through the same maps over bytes, each row's tiled
// scales by 16-byte cp.async chunks, the consumers' ldmatrix addresses over
// the 64-byte halves (core/tiled_box_map.h: w8a16_tiled_chunk_offset and
// the scale functions beside it). Not yet measured on a device.
//
// Swapped operands (kSwapAB: FP8 block-128 W8A8 at T = 64, both GEMMs,
// at 257-512 tokens on E = 128, K = 8; until session 36 above 2048 too):
// the token tile is the wgmma A operand (M = 64 tokens) and
// each consumer warpgroup's 128 weight rows the B operand (m64n128k32), so
// that a thread's accumulators are two tokens × 32 weight rows: its scale
// products per slot are two activation scales times one block scale (fused:
// the gate and the up block's, the consumer's slot rows being gate rows
// 64c.. then their up rows, four 64-row TMA boxes), and each k32 step reads
// the token tile once per warpgroup instead of once per m64 block. Why:
// the promotions took a fifth to a third of these GEMMs (session 19), and
// each m64n64k32 of the unswapped tile read as many shared-memory bytes as
// its MMA takes cycles. Measured (session 21 run 5, against the unswapped
// tile in one call, µs, qwen3-30b-a3b / qwen3-235b-a22b): fused gate_up at
// 4096 tokens 321.0 -> 288.6 / 1188.7 -> 1065.5 (layer −2.1 % each, with
// down swapped too), 2048 −7.0 / −2.2 %, 1024 −5.1 / +1.3 %, 512 −0.1 / −1.2
// %; but the down GEMM and the unfused gate_up swapped lost 8-18 % with
// 4-byte stores of a thread's column pairs (run 6: the fused gate_up alone,
// 4096 tokens, layer 594.9 -> 565.7 / 1993.8 -> 1871.9 µs). Session 22 run
// 4: down swapped again, the quad's four lanes transposing their packed
// pairs (quad_transpose) so that each stores 16 bytes of one token: down
// 204.9 -> 141.7 / 652.7 -> 510.2 µs at 4096 tokens (−31 / −22 %; layer
// −11.6 / −8.2 %), −5.2 / −2.7 % at 512. Run 6: the fused gate_up's E4M3 h
// stored the same way (16 bytes a lane where it stored 2 bytes an n8
// group): gate_up −4.3 / −2.0 % at 4096 tokens, −7.8 / −3.3 % at 512.
// MXFP8 keeps the weights as A (its scales are per weight row
// and 32 K: 32 rows a thread would need 32 scales).
//
// Token-split swapped tile (kTokSplit: FP8 block-128 W8A8 at T = 128, both
// GEMMs, from 2048 tokens on E = 128, K = 8): still tokens as A, but the
// two consumer warpgroups split the tile's 128 token rows (64 each) and
// share its 256 weight rows, which each takes as two m64n128 halves through
// one partial-sum set (128 accumulators + 64 partial sums a thread; a
// 256-wide set would not fit). A slot is 48 KB from L2 for 128 × 256
// outputs against the T = 64 tile's 40 KB (36 with its shared token tile)
// for 64 × 256, and the wgmmas read 80 KB of shared memory against 96 KB
// for the same MACs. Fused gate_up: half 0 is the tile's 128 gate rows,
// half 1 their up rows, so a token's 128 neurons (one activation group)
// sit in one lane quad and h's scale needs no shared memory. A consumer
// whose 64 rows are all padding (row_entries) skips its MMAs and stores, so
// an expert's last tile costs the MMAs of T = 64's padding, not T = 128's.
// Measured (session 36 run 3, against the defaults in one binary, µs,
// qwen3-30b-a3b / qwen3-235b-a22b): 2048 tokens 323.5 -> 293.7 / 1044.3 ->
// 979.4 (T = 80 with weight-sharing clusters before), 4096 472.1 -> 465.3 /
// 1650.3 -> 1594.1 (gate_up −7.5 / −9.7 %, down +2.6 % / level); 1024
// +1.6 / +2.2 % (T = 80 stays there).
//
// Numerics: FP32 accumulation. W8A8: a slot's four k32 wgmmas (MXFP8: each
// k32 wgmma, one scale block) sum into a fresh register set, promoted with
// sw · sa into the accumulator (as every classical FP8 tile). W8A16: the
// decoded weights carry their scales (exact BF16), so the register-A BF16
// wgmmas accumulate straight into the FP32 accumulators. The K order is
// fixed: deterministic.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <algorithm>

#include "kernels/classical_fits.h"
#include "kernels/classical_gemm.cuh"
#include "warpdecode/formats.h"

namespace wd::kernels {

namespace tma_tile {

constexpr int kRowBytes = 128;   // K bytes of a row per slot (the swizzle span)

// Warpgroup 0 loads (one warp of it works; gathering, all four),
// warpgroups 1.. multiply. BF16 and W8A8: two consumer warpgroups; 384
// threads leave 168 registers a thread at entry, and setmaxnreg moves them
// from the producer warpgroup to the consumers (56 + 2 × 224 = 3 × 168 per
// SM sub-partition), which hold up to 128 accumulators. W8A16 (session 14
// runs 2-4, Tile::kRows): four at T = 16, 32 and 128, one m64 block each, so
// that more warps hide the decode's chains of dependent instructions (−2 to
// −7 % against two; 640 threads leave 96 registers at entry, 40 + 4 × 104
// <= 5 × 96); two at T = 64 (two m64 blocks each: its accumulators and two
// groups of fragments need the registers), at T = 144 (two m64 blocks of 72
// accumulators each: four warpgroups' 96 registers at entry cannot compile
// an m64n144 wgmma; session 24) and at T = 8 (128-row tiles, one m64 block
// each). T = 144 (144 accumulators; BF16 spilled at 224) and the W8A8
// token-split tile (kTokSplit: 128 accumulators and 64 partial sums held
// through the epilogue, where the next tile's first slot runs; 224 spilled
// a register): 40 + 2 × 232.
// (W8A8 at T = 96, 96 accumulators and 96 partial sums with SiLU·up fused,
// spilled at 224 and at 232: not built, session 21.)
template <bool kA16, int kT, bool kTokSplit = false>
struct Warps {
  static constexpr int kConsumerWGs = kA16 && kT != 8 && kT != 64 && kT != 144 ? 4 : 2;
  static constexpr int kConsumerThreads = 128 * kConsumerWGs;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kProducerRegs = kConsumerWGs == 4 || kT == 144 || kTokSplit ? 40 : 56;
  static constexpr int kConsumerRegs = kConsumerWGs == 4 ? 104 : kT == 144 || kTokSplit ? 232 : 224;
  static_assert(kProducerRegs + kConsumerWGs * kConsumerRegs <= (1 + kConsumerWGs) * (65536 / kThreads / 8 * 8),
                "the registers of one SM sub-partition");
};

// BF16: 256 weight rows a tile, each consumer warpgroup 128 (two m64nT
// accumulators: 128 floats at T = 128); a tile reads 0.75 × the L2 bytes per
// MMA of a 128-row one (session 10 run 3: 4-11 % faster at 4096 tokens,
// level at 256-1024). W8A8: 128 weight rows (one m64nT each, T/2
// accumulators and T/2 partial sums), 256 at T = 64 and 80, and FP8
// block-128's 256 at T = 128 (below). As many slots as fit one block per SM,
// up to 8: 4 of 48 KB for BF16 at T = 128 (and FP8 block-128's 4 of 49 KB),
// 6 of 33 KB for W8A8; the smaller
// T keep more weight bytes in flight (BF16 T = 8: 6 × 32 KB). Up to 12 slots
// measured slower for W8A8 at decode batches, and 128-row BF16 tiles at
// T <= 32 slower from one token per expert on (session 11 run 5).
template <WeightFormat F, int kT, bool kA16 = false>
struct Tile {
  static_assert(kT == 8 || kT == 16 || kT == 32 || kT == 64 || kT == 80 || kT == 128 || kT == 144,
                "token tiles: 8 to 144");
  static_assert(!kA16 || F == WeightFormat::kMXFP8, "W8A16: MXFP8 weights");
  // T = 144, BF16 activations only (BF16 weights or W8A16; prefill,
  // ClassicalConfig::for_batch): two 144-row tiles hold an expert's 256 ± 2σ
  // tokens where 128-row ones take three for half the experts (one 144-row
  // tile 128 ± 2σ, where 128-row ones take two); 144 accumulators a
  // consumer thread. W8A16 (session 24 run 2, against T = 128, µs,
  // qwen3-30b-a3b / qwen3-235b-a22b): 2048 tokens 536.4 -> 474.8 / 1913.8 ->
  // 1525.9, 4096 886.7 -> 799.8 / 3169.4 -> 2792.0; with weight-sharing
  // clusters slower (4096: 914.0 / 3138.5), so it runs without.
  static_assert(kT != 144 || F == WeightFormat::kBF16 || kA16, "T = 144: BF16 activations (BF16 weights or W8A16)");
  // T = 80, BF16, W8A8 and W8A16 (prefill near 64 tokens an expert,
  // ClassicalConfig::for_batch): 1024 tokens on E = 128, K = 8 give an expert
  // 64 ± 8 tokens: W8A8's 64-row tiles take two for half the experts (94 rows
  // an expert on average, each weight tile read by 1.5 token tiles) and
  // BF16's 128-row ones pad to 128, where one 80-row tile holds 64 + 2σ (82
  // rows, 1.02 reads). 256-row tiles: W8A8 2 × (40 + 40) accumulators and
  // partial sums a consumer thread; W8A16 four consumer warpgroups (Warps).
  static constexpr bool kFp8 = F != WeightFormat::kBF16;  // 1-byte weights
  static constexpr bool kMx = F == WeightFormat::kMXFP8;
  static constexpr bool kW8A8 = kFp8 && !kA16;  // FP8 activations, FP8 MMAs, promotions
  // W8A8 at T = 64 takes 256 rows too (two m64 blocks a consumer: 2 × (T/2
  // accumulators + T/2 partial sums) = 128 registers; at T = 128 that would
  // be 256, so FP8 block-128 takes them there by splitting the tokens
  // between its consumers instead: kTokSplit, 128 + 64). At 1024 tokens the GEMMs were bound by L2 throughput (86-92 %,
  // ncu, session 12 run 7): each n-tile re-reads its expert block's token
  // tile, and 256 rows halve those re-reads. Run 8: MXFP8 9-12 % faster at
  // 512-1024 tokens, FP8 block-128 level (−1.2 % at 512, +0.6-1.8 % at 1024).
  // W8A16: 128 rows at T = 8 (twice the tiles: decode batches' few experts
  // fill more SMs; run 4, qwen3-30b-a3b: B = 1 39.4 -> 28.1 µs, B = 8 105.4
  // -> 99.4), 256 above (128-row tiles lost 0-8 % at T = 16, 32).
  static constexpr bool kWide8 = kW8A8 && (kT == 64 || kT == 80);  // W8A8 with 256-row tiles
  // FP8 block-128 at T = 64: the operands swapped (kSwapAB, tma_gemm_kernel),
  // both GEMMs.
  static constexpr bool kSwapAB = kW8A8 && !kMx && kT == 64;
  // FP8 block-128 at T = 128: swapped too, the consumers splitting the
  // tokens (kTokSplit, tma_gemm_kernel): consumer warpgroup c takes token
  // rows 64c.. of the tile against all 256 weight rows, in two m64n128
  // halves that share one partial-sum set.
  static constexpr bool kTokSplit = kW8A8 && tma_w8a8_splits_tokens(F, kT);
  static constexpr int kRows = kA16 ? (kT == 8 ? 128 : 256) : kW8A8 && !kWide8 && !kTokSplit ? 128 : 256;  // weight rows of a tile
  static constexpr int kMBlocks = kRows / Warps<kA16, kT>::kConsumerWGs / 64;  // m64 blocks per consumer warpgroup
  static constexpr int kWTileBytes = kRows * kRowBytes;
  static constexpr int kStageK = kFp8 ? kRowBytes : kRowBytes / 2;  // K elements per slot
  // W8A16: the slot's 128 K of BF16 activations are two 128-byte-swizzled
  // halves of T rows × 64 K each (a multiple of 1024: every slot stays
  // swizzle-aligned).
  static constexpr int kAHalves = kA16 ? 2 : 1;
  static constexpr int kATileBytes = kAHalves * kT * kRowBytes;
  // W8A8 weight scales: FP8 block-128 one float per 128 rows (one per
  // consumer warpgroup at 256 rows; 16 B); MXFP8 each row's 4 E8M0 codes of
  // the slot's four 32-K blocks.
  static constexpr int kWScaleBytes = kMx ? kRows * 4 : 16;
  // (BF16 keeps the scale regions too, unused: one layout for all formats.)
  static constexpr int kSlotBytes = kWTileBytes + kATileBytes + kT * 4 + kWScaleBytes + 16;
  static constexpr int kStages = std::min(8, (227 * 1024 - 1024) / kSlotBytes);
  // Byte offsets from the 1024-aligned base.
  __host__ __device__ static constexpr int w(int s) { return s * kWTileBytes; }
  __host__ __device__ static constexpr int a(int s) { return kStages * kWTileBytes + s * kATileBytes; }
  __host__ __device__ static constexpr int a_scales(int s) { return a(kStages) + s * kT * 4; }  // W8A8
  __host__ __device__ static constexpr int w_scale(int s) { return a_scales(kStages) + s * kWScaleBytes; }
  __host__ __device__ static constexpr int full(int s) { return w_scale(kStages) + s * 8; }
  __host__ __device__ static constexpr int empty(int s) { return full(kStages) + s * 8; }
  // Gathering: the current tile's T rows' tokens (-1: padding).
  __host__ __device__ static constexpr int tokens() { return empty(kStages); }
  // W8A8 T = 64 or 80 with SiLU·up fused (kSiluQuant): per consumer warp each
  // token's largest |h|, then each token's scale (8 + 1 rows of T floats).
  static constexpr int kQuantBytes = kWide8 ? 9 * kT * 4 : 0;
  __host__ __device__ static constexpr int quant() { return tokens() + kT * 4; }
  __host__ __device__ static constexpr int bytes() { return quant() + kQuantBytes + 1024; }  // + alignment slack
  static_assert(bytes() <= 227 * 1024, "one block per SM must fit");
};

struct Params {
  // (E·N rows, K) weights, box kRows rows (fused SiLU·up: kRows / 2) × 128
  // bytes, 128-byte swizzle; (rows, K) activations, box T rows (clusters:
  // T / 2) × 128 bytes (unused when gathering).
  CUtensorMap w_map;
  CUtensorMap a_map;
  GroupedGemmParams g;
};

// The persistent walk's tiles: tile t = blockIdx.x + j·gridDim.x of the
// nb·ntn tiles is expert block (token tile) block(t) against weight tile
// n(t): t = block · ntn + weight tile, or, with weight-sharing clusters
// (kShareW), t = (block pair · ntn + weight tile) · 2 + member, the two
// members (t and t + 1: the two blocks of a cluster, the grid being even)
// the pair's two blocks, one expert's (align pairs them). SiLU·up fused
// (BF16, W8A16; W8A8 with kSiluQuant), a weight tile is kRows / 2 neurons,
// its gate rows then their up rows N / 2 further, so n0 counts neurons.
// The producer and the consumers walk the same tiles in the same order.
template <int kRows, bool kShareW, bool kTiledW>
struct TileWalk {
  const GroupedGemmParams& g;
  int N;          // g.n: weight rows an expert
  int K;          // g.k: the GEMM's K, k_tiles slots of Tile::kStageK a tile
  int k_tiles;
  int ntn;        // weight tiles of an expert block, ceil(N / kRows)
  int tiles;      // nb · ntn
  bool fused;     // SiLU·up fused: N is 2I, a tile kRows / 2 neurons
  int tile_rows;  // weight rows (fused: neurons) a weight tile advances

  __device__ __forceinline__ int block(int t) const { return kShareW ? (t >> 1) / ntn * 2 + (t & 1) : t / ntn; }
  __device__ __forceinline__ int n(int t) const { return kShareW ? (t >> 1) % ntn : t % ntn; }
  // The block table comes from the align stage (L2-coherent loads: an L1
  // line from an earlier call could be stale).
  __device__ __forceinline__ int expert(int t) const {
    return g.block_expert != nullptr ? __ldcg(g.block_expert + block(t)) : 0;
  }
  // The row the producer's weight loads start from: row expert·N + n0 of the
  // (E·N, K) weights, or, tiled (kTiledW), the 16-row item row of the tiled
  // copy's map (core/tiled_box_map.h): down's row / 16, fused gate_up's
  // (expert·I + n0) / 16, n0 counted in neurons.
  __device__ __forceinline__ int w_row(int expert, int n0) const {
    if constexpr (kTiledW) return (expert * (fused ? N / 2 : N) + n0) / 16;
    else return expert * N + n0;
  }
};

// Slots whose weight tile the producer issues before the PDL wait. One:
// the first slot streams while the previous stage (permute before gate_up,
// silu_mul before down) still runs; all kStages slots flooded the memory
// system while that small kernel, on the critical path, ran (session 12 run
// 2, qwen3-30b-a3b B = 1, µs: none 32.8, one 32.2, all 34.0 BF16; 23.9 /
// 23.1 / 25.8 FP8 block-128; 29.4 / 28.5 / 32.8 MXFP8; level at prefill).
[[maybe_unused]] constexpr int kEarlySlots = 1;

}  // namespace tma_tile

}  // namespace wd::kernels
