// The TMA tile of the classical grouped GEMM: its kernel (tma_gemm_kernel:
// the barriers, the consumers' MMAs and epilogues) and launchers
// (tma_gemm). Its design — warp roles, slot layout, clusters, swapped
// operands, tiled weights, numerics — and the measurements behind each
// choice are kernels/classical_tma_tile.cuh, with its geometry (Warps, Tile,
// Params, TileWalk); the producer's loads are kernels/classical_tma_producer.cuh,
// the epilogue's stores kernels/classical_tma_epilogue.cuh.
#include <cuda.h>  // CUtensorMap and the encoder's types (the entry point comes from the runtime)
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/classical_tma_epilogue.cuh"
#include "kernels/classical_tma_producer.cuh"
#include "kernels/classical_tma_tile.cuh"
#include "kernels/classical_wgmma.cuh"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/tma.cuh"
#include "kernels/tma_map.h"
#include "warpdecode/classical.h"
#include "warpdecode/error.h"

namespace wd::kernels {

namespace {

using namespace tma_tile;

template <WeightFormat F, bool kA16, int kT, int kCluster, bool kGather, bool kSiluQuant, bool kShareW, bool kTiledW>
__global__ void __launch_bounds__(Warps<kA16, kT>::kThreads, 1) tma_gemm_kernel(const __grid_constant__ Params p) {
#if defined(__CUDA_ARCH__)
#if !WD_WGMMA_AVAILABLE
  __trap();  // the host launches this kernel only on sm_90a
#else
  using L = Tile<F, kT, kA16>;
  static_assert(kCluster == 1 || (kCluster == 2 && kT >= 16), "a half token tile must stay swizzle-aligned (8 rows)");
  static_assert(kCluster == 1 || F == WeightFormat::kBF16 || kShareW || L::kSwapAB || L::kTokSplit,
                "clusters: BF16, the swapped FP8 tiles, or weight-sharing (launch_tma)");
  static_assert(!kShareW || (kCluster == 2 && !kGather &&
                             ((F == WeightFormat::kBF16 && kT == 144) ||
                              (F == WeightFormat::kFP8Block128 && L::kWide8))),
                "weight-sharing clusters: BF16 at T = 144 or FP8 block-128 W8A8 at T = 64 or 80, pairs of token tiles");
  static_assert(!kGather || (F == WeightFormat::kBF16 && kCluster == 1 && kT <= 128), "gathering: BF16, T <= 128");
  static_assert(!kTiledW || (F == WeightFormat::kBF16 && !kA16) || kA16,
                "tiled weight copies: BF16, or MXFP8 in W8A16 (packed words, tiled scales)");
  static_assert(!kSiluQuant || ((L::kWide8 || L::kTokSplit) && (kCluster == 1 || kShareW || L::kSwapAB || L::kTokSplit) &&
                                 !kGather),
                "SiLU·up and its quantization fused: W8A8 at T = 64 or 80, FP8 block-128 at 128 (256-row tiles: 128 "
                "neurons, one group)");
  static_assert(!kSiluQuant || tma_w8a8_fuses_silu(F, kT), "the rule the host checks (tma_w8a8_fuses_silu)");
  // kFp8: 1-byte weights with scales; kW8A8: FP8 activations too (FP8 MMAs
  // and promotions); kA16: FP8 weights decoded to BF16 by the consumers.
  constexpr bool kFp8 = L::kFp8, kMx = L::kMx, kW8A8 = L::kW8A8;
  constexpr bool kSwap = L::kSwapAB;  // operands swapped (classical_tma_tile.cuh)
  constexpr bool kTokSplit = L::kTokSplit;  // swapped, the consumers splitting the tokens
  using W = Warps<kA16, kT, L::kTokSplit>;
  static_assert(kA16 || W::kConsumerWGs == 2, "BF16 and W8A8: two consumer warpgroups (rows kRows / 2 each)");
  constexpr int kN8 = kT / 8;  // n8 column groups of an accumulator set (wgmma_m64nT)
  constexpr int kRows = L::kRows, kStages = L::kStages, kStageK = L::kStageK, kMB = L::kMBlocks;
  const GroupedGemmParams& g = p.g;
  const int N = g.n, K = g.k;
  const int ntn = (N + kRows - 1) / kRows;
  const int k_tiles = (K + kStageK - 1) / kStageK;
  // The block table comes from the align stage, complete before this kernel
  // starts even under PDL (our predecessor waited for it before letting us
  // start); L2-coherent loads, as an L1 line from an earlier call could be
  // stale. Gathering, the align stage is the previous kernel, and it lets
  // its successor start at once: wait for it first.
  if constexpr (kGather) wait_for_previous_kernel();
  const int nb = g.num_blocks != nullptr ? __ldcg(g.num_blocks) : g.max_blocks;
  const int tiles = nb * ntn;

  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint8_t* base_ptr = smem_raw + (base - smem_u32(smem_raw));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      // full: lane 0's expect_tx arrival (+ one cp.async arrival per lane of
      // warp 0 for the FP8 weights' scales, and W8A8's activation scales;
      // gathering, one per producer thread, its token chunks and scales);
      // empty: BF16, every consumer warp of the cluster (one lane each, once
      // the warp is done with the slot); FP8 weights, every consumer thread
      // of this block (release below) and, in a cluster, every consumer warp
      // of the other block (one lane each).
      tma::mbar_init(base + L::full(s), kGather ? 1 + 128 : kFp8 ? 1 + 32 : 1);
      tma::mbar_init(base + L::empty(s), kFp8 ? W::kConsumerThreads + (kCluster - 1) * W::kConsumerThreads / 32
                                              : kCluster * W::kConsumerThreads / 32);
    }
    tma::fence_barrier_init();
  }
  if constexpr (kCluster > 1) tma::cluster_sync();  // the other block multicasts into our slots
  else __syncthreads();

  // SiLU·up fused (BF16, W8A16; W8A8 with kSiluQuant): a tile is kRows / 2
  // neurons, its gate rows then its up rows (TileWalk).
  const bool fused = kSiluQuant || (!kW8A8 && g.fuse_silu != 0);
  const int tile_rows = fused ? kRows / 2 : kRows;  // weight rows a tile advances
  const TileWalk<kRows, kShareW, kTiledW> walk{g, N, K, k_tiles, ntn, tiles, fused, tile_rows};
  if (warp >= 4) {
    // The consumers: their outputs may be what an earlier kernel still reads.
    wait_for_previous_kernel();
    allow_next_kernel();
  } else {
    tma_producer<F, kA16, kT, kCluster, kGather, kSiluQuant, kShareW, kTiledW>(p, walk, base, base_ptr, tid, warp, lane);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(W::kConsumerRegs));

  // The MMAs: consumer warpgroup c owns kMB m64 blocks of the tile, rows
  // [c·kRows/W, (c+1)·kRows/W) of W consumer warpgroups (W8A16 fused:
  // row_of below).
  const int c = (warp >> 2) - 1, w4 = warp & 3, g8 = lane >> 2, t4 = lane & 3;
  float acc[kMB][kT / 2];
  int stage = 0, prev = 0;  // prev: the slot consumed before `stage`
  uint32_t phase = 0;
  auto next = [&] {
    prev = stage;
    if (++stage == kStages) stage = 0, phase ^= 1;
  };
  // The thread is done with slot s. BF16: the warp's MMAs (wgmma reads the
  // slot; no thread does) are done, one arrival on the slot's empty barrier
  // of every block of the cluster. FP8 weights: every thread arrives itself
  // after its own reads of the slot (the scales; W8A16: the weights too), so
  // that each read is ordered before the producer's next copy into the slot
  // by the barrier alone (compute-sanitizer's racecheck counts a lane's read
  // as ordered only then: a warp's single arrival after __syncwarp measured
  // no faster and reported 47 hazards, session 13 run 8).
  auto release = [&](int s) {
    if constexpr (kFp8) {
      tma::arrive(base + L::empty(s));
      if constexpr (kCluster > 1) {
        // The other block's producer multicasts weight rows into this slot:
        // one arrival a warp once its MMAs are done (its scales are ours).
        __syncwarp();
        if (lane == 0) tma::arrive_peer(base + L::empty(s));
      }
    } else {
      __syncwarp();
      if (lane == 0) {
        tma::arrive(base + L::empty(s));
        if constexpr (kCluster > 1) tma::arrive_peer(base + L::empty(s));
      }
    }
  };
  // Consumer c's m64 blocks: rows [c·kRows/2, (c+1)·kRows/2) of the tile,
  // or, fused, gate rows [64c, 64c + 64) and the same neurons' up rows
  // (mb = 1, kRows / 2 further).
  // Tiled copies (kTiledW): the slot's weight tile is boxes of box_rows rows
  // (a box a load: kRows / 2 fused or with kShareW, else kRows), each its K
  // halves one after the other, box_rows rows × 64 bytes each, 64-byte
  // swizzle (core/tiled_box_map.h); slot row r's first half at w_off(r).
  const int box_rows = fused || kShareW ? kRows / 2 : kRows;
  auto w_off = [&](int r) { return (r / box_rows) * box_rows * kRowBytes + (r % box_rows) * (kRowBytes / 2); };
  auto descs = [&](int s, uint64_t& da, uint64_t& db) {
    if constexpr (kTiledW) da = wgmma::sw64_desc(base + L::w(s) + w_off(c * (fused ? 64 : kRows / 2)));
    else da = wgmma::sw128_desc(base + L::w(s) + c * (fused ? 64 : kRows / 2) * kRowBytes);
    db = wgmma::sw128_desc(base + L::a(s));
  };

  // W8A8: a slot's four k32 MMAs sum into `part`, promoted into acc once
  // they are done. Promotions overlapped with MMAs lost three times: a
  // second set promoted while the next slot's MMAs run (3-13 % slower,
  // session 10 run 3), the two consumer warpgroups taking turns to issue,
  // and block 0 promoted while block 1's MMAs run (session 19 runs 2 and 4,
  // +3-10 % at 2048-4096 tokens); fewer promotion instructions won (below).
  // On the swapped tile (session 23, 4096 tokens): the turns again, gate_up
  // −1 to −4 % but down +3 to +5 % (and racecheck hazards on the fused
  // epilogue's amax table, as in session 19), and a tile's epilogue run
  // while the next tile's first MMAs are in flight, gate_up +4 to +7 %, down
  // +10 to +12 %. ncu (session 23 run 3): the consumers already wait for
  // their slots' bytes a tenth of the time and L2 runs at 74 % (gate_up) and
  // 88 % (down) of its throughput: the supply, not the issue order, is the
  // next bound. Session 36 run 1 on the swapped T = 64 tile: two partial-sum
  // sets, a slot's promotion while the next slot's MMAs run (wait<1>),
  // layer +2.2 / +4.9 % at 4096 tokens (qwen3-30b-a3b / qwen3-235b-a22b),
  // level at 512 and 2048; the larger token-split tile (kTokSplit) won
  // instead.
  constexpr uint64_t kMStep = (64 * kRowBytes) >> 4;  // one m64 block on, in descriptor units
  // The BF16 consumer's second m64 block (fused: the up rows, one box on;
  // else 64 rows on, in the same box: 64-byte rows when tiled).
  const uint64_t mstep = fused ? 2 * kMStep : kTiledW ? kMStep / 2 : kMStep;
  // The weight descriptor's k16 step ks (32 bytes; tiled, steps 2 and 3 are
  // in the box's second half, box_rows · 64 bytes on).
  const uint64_t half_step = uint64_t(box_rows) * (kRowBytes / 2) >> 4;
  auto w_kstep = [&](int ks) -> uint64_t {
    if constexpr (kTiledW) return (ks >> 1) * half_step + 2 * (ks & 1);
    else return 2 * ks;
  };
  float part[kMB][kW8A8 ? (kTokSplit ? 32 : kT / 2) : 1];
  auto slot_fp8 = [&]() {
    if constexpr (kW8A8 && !kTokSplit) {
      tma::wait(base + L::full(stage), phase);
      uint64_t da, db;
      descs(stage, da, db);
      const float* sa = reinterpret_cast<const float*>(base_ptr + L::a_scales(stage));
      // acc[mb] += part[mb] · sw · sa(token) (acc starts at zero: one FFMA
      // an element; "first slot: =" made it a predicated FMUL and FFMA pair,
      // two issue slots each, session 19 run 5). Element 4i + j of m64
      // block mb: weight row 64mb + 16w4 + g8 (+8 for j >= 2) of the
      // consumer's rows, token 8i + 2t4 + (j & 1).
      auto promote = [&](int mb, float s_lo, float s_hi) {
#pragma unroll
        for (int i = 0; i < kN8; ++i) {
          const float2 s2 = *reinterpret_cast<const float2*>(sa + 8 * i + 2 * t4);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            wgmma::fence_operand(part[mb][4 * i + j]);
            const float sc = (j < 2 ? s_lo : s_hi) * ((j & 1) ? s2.y : s2.x);
            float& a = acc[mb][4 * i + j];
            a = __fmaf_rn(part[mb][4 * i + j], sc, a);
          }
        }
      };
      if constexpr (kSwap) {
        // The slot's four k32 MMAs m64n128 (tokens × the consumer's 128
        // weight rows), then one promotion: element 4i + j of the flat
        // accumulators is token 16w4 + g8 + 8(j >> 1), weight row 8i + 2t4
        // + (j & 1) of the consumer's 128 (rows < 64 gate, the rest up), so
        // a thread's scale products are its two tokens' sa times the gate
        // and the up block scale: one FFMA an element and 4 FMUL a slot (the
        // weights-as-A tile needs an FMUL and an LDS per two or four
        // elements).
        // db (descs) is the token tile; the consumer's rows here are its
        // 128 slot rows.
        const uint64_t dw = wgmma::sw128_desc(base + L::w(stage) + c * (kRows / 2) * kRowBytes);
        float(&pf)[kT] = *reinterpret_cast<float(*)[kT]>(&part[0][0]);
        float(&af)[kT] = *reinterpret_cast<float(*)[kT]>(&acc[0][0]);
        // The scale products before the MMAs (a shared-memory load after
        // the wait would delay the next slot's MMAs). Fused: the gate
        // block's scale, then the up block's; else the consumer's 128 rows
        // are one block.
        const float* wsc = reinterpret_cast<const float*>(base_ptr + L::w_scale(stage));
        const float a_lo = sa[16 * w4 + g8], a_hi = sa[16 * w4 + g8 + 8];
        const float w_lo = wsc[kSiluQuant ? 0 : c], w_hi = wsc[kSiluQuant ? 1 : c];
        const float s00 = w_lo * a_lo, s01 = w_lo * a_hi, s10 = w_hi * a_lo, s11 = w_hi * a_hi;
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) wgmma::wgmma_m64n128_e4m3(pf, db + 2 * ks, dw + 2 * ks, ks != 0);
        wgmma::commit();
        wgmma::wait<0>();
#pragma unroll
        for (int i = 0; i < kT / 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            wgmma::fence_operand(pf[4 * i + j]);
            const float sc = i < kT / 8 ? (j < 2 ? s00 : s01) : (j < 2 ? s10 : s11);
            af[4 * i + j] = __fmaf_rn(pf[4 * i + j], sc, af[4 * i + j]);
          }
      } else if constexpr (!kMx) {
        // FP8 block-128: the slot's four k32 MMAs per m64 block, then one
        // promotion each, with the consumer's 128-row block scale.
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb)
            wgmma::mma_e4m3<kT>(part[mb], da + mb * mstep + 2 * ks, db + 2 * ks, ks != 0);
        wgmma::commit();
        wgmma::wait<0>();
        // (Fused: m64 block 0 is gate rows, 1 up rows, each its own block.)
        const float* wsc = reinterpret_cast<const float*>(base_ptr + L::w_scale(stage));
        const float sw = wsc[kRows == 256 ? c : 0];
#pragma unroll
        for (int mb = 0; mb < kMB; ++mb) {
          const float s = fused ? wsc[mb] : sw;
          promote(mb, s, s);
        }
      } else {
        // MXFP8: every k32 MMA is one 32-K scale block of the weight rows,
        // promoted on its own with the rows' E8M0 scales.
        const uint8_t* wsb = base_ptr + L::w_scale(stage);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          wgmma::fence();
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb) wgmma::mma_e4m3<kT>(part[mb], da + mb * mstep + 2 * ks, db + 2 * ks, 0);
          wgmma::commit();
          wgmma::wait<0>();
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb) {
            const int r = (fused ? 64 * c + (kRows / 2) * mb : (kRows / 2) * c + 64 * mb) + 16 * w4 + g8;
            promote(mb, e8m0_to_float(wsb[r * 4 + ks]), e8m0_to_float(wsb[(r + 8) * 4 + ks]));
          }
        }
      }
      release(stage);
      next();
    }
  };

  // The token-split tile (kTokSplit): consumer c's A operand is token rows
  // [64c, 64c + 64) of the slot's 128, its B operand all 256 weight rows, as
  // two m64n128 halves (fused: the 128 gate rows, then their up rows; else
  // output columns 0-127, then 128-255), each a commit group of four k32
  // MMAs into the one partial-sum set, promoted into acc[half] with the
  // half's block scale. Why: a slot brings 48 KB into shared memory for
  // 128 × 256 outputs where the T = 64 tile brings 40 KB for 64 × 256
  // (−40 % L2 bytes a MAC), and its wgmmas read 80 KB of shared memory for
  // them where the T = 64 tile's read 96 KB for the same MACs. Element 4i +
  // j of half h (acc[h]) is token 64c + 16w4 + g8 + 8(j >> 1) of the tile,
  // weight row 128h + 8i + 2t4 + (j & 1). `active`: the consumer's first
  // row is in use (align pads each expert's rows at its end, so a half with
  // none in use is all padding: no MMAs, no stores).
  //
  // issue_half(h): the slot's half h, four k32 MMAs into the partial sums.
  auto issue_half = [&](int h) {
    if constexpr (!kTokSplit) return;
    float(&pf)[64] = *reinterpret_cast<float(*)[64]>(&part[0][0]);
    const uint64_t dt = wgmma::sw128_desc(base + L::a(stage) + c * 64 * kRowBytes);
    const uint64_t dw = wgmma::sw128_desc(base + L::w(stage) + h * 128 * kRowBytes);
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) wgmma::wgmma_m64n128_e4m3(pf, dt + 2 * ks, dw + 2 * ks, ks != 0);
    wgmma::commit();
  };
  // The scale products of the slot's halves (`halves`, a bit mask), read
  // before its MMAs rather than between a wgmma wait and the next MMAs
  // (level in session 37 run 2, kept as the shorter dependency chain).
  auto split_scales = [&](float(&s_lo)[2], float(&s_hi)[2], int halves = 3) {
    const float* sa = reinterpret_cast<const float*>(base_ptr + L::a_scales(stage));
    const float* wsc = reinterpret_cast<const float*>(base_ptr + L::w_scale(stage));
    const float a_lo = sa[64 * c + 16 * w4 + g8], a_hi = sa[64 * c + 16 * w4 + g8 + 8];
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (halves & (1 << h)) s_lo[h] = wsc[h] * a_lo, s_hi[h] = wsc[h] * a_hi;
  };
  // Half h's partial sums (in flight) into acc[h]: += or, the tile's first
  // slot (`first`), = with the accumulators' zeros folded in.
  auto promote_half = [&](auto h, auto first, const float(&s_lo)[2], const float(&s_hi)[2]) {
    constexpr int kH = decltype(h)::value;
    constexpr bool kFirst = decltype(first)::value;
    float(&pf)[64] = *reinterpret_cast<float(*)[64]>(&part[0][0]);
    wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      wgmma::fence_operand(pf[i]);
      acc[kH][i] = __fmaf_rn(pf[i], (i & 2) ? s_hi[kH] : s_lo[kH], kFirst ? 0.0f : acc[kH][i]);
    }
  };
  auto slot_split = [&](bool active, auto first) {
    if constexpr (kTokSplit) {
      tma::wait(base + L::full(stage), phase);
      if (active) {
        float s_lo[2], s_hi[2];
        split_scales(s_lo, s_hi);
        issue_half(0);
        promote_half(std::integral_constant<int, 0>{}, first, s_lo, s_hi);
        issue_half(1);
        promote_half(std::integral_constant<int, 1>{}, first, s_lo, s_hi);
      }
      release(stage);
      next();
    }
  };
  // The next tile's first slot runs during this tile's epilogue (`pending`:
  // its half is in use). look_ahead(0) issues its half 0 before the
  // epilogue; once the epilogue's first part has freed acc[0], look_ahead(1)
  // promotes half 0 there and issues half 1; once the second part has freed
  // acc[1], look_ahead(2) promotes half 1 there and releases the slot. The
  // tensor cores run while the consumers store. (Session 37: half 0 alone
  // −2.2 / −3.0 % at 4096 tokens in a run up to 1980 MHz with its branches
  // voted, level in a power-capped one unvoted, where both halves gave −0.7 /
  // −1.4 %. Session 38 run 1: the branches that in-flight MMAs cross voted
  // warp-uniform (`pending`, `active`), −3.2 / −2.4 % at 4096 tokens and
  // −2.0 / −1.3 % at 2048, gate_up and down alike, at the same clocks.)
  // (The scale products are read where they are used: held through the
  // epilogue, they made ptxas spill.)
  bool pending = false;
  auto look_ahead = [&](int step) {
    if constexpr (!kTokSplit) return;
    if (!warp_uniform(pending)) return;
    if (step == 0) {
      tma::wait(base + L::full(stage), phase);
      issue_half(0);
      return;
    }
    float s_lo[2], s_hi[2];
    split_scales(s_lo, s_hi, step);  // half step - 1
    if (step == 1) {
      promote_half(std::integral_constant<int, 0>{}, std::true_type{}, s_lo, s_hi);
      issue_half(1);
    } else {
      promote_half(std::integral_constant<int, 1>{}, std::true_type{}, s_lo, s_hi);
      release(stage);
      next();
    }
  };

  // W8A16: the slot's eight k16 steps, each a register-A wgmma per m64 block
  // whose A fragments this thread decodes from the slot's E4M3 rows (mma.sync
  // m16n8k16 A layout: the thread's two rows, the activations' positions
  // 2t4.. and 2t4 + 8..). The activations are stored K-permuted
  // (a16_k_position: stages 4 and 6, and this kernel's fused epilogue), so
  // that those positions hold elements 4t4 .. 4t4 + 3 of the step, whose
  // codes are one word of the row: an ldmatrix x4 reads two rows × two
  // steps of them (load_words), where eight 2-byte loads did (session 25).
  // The A rows are the consumer's to choose: m64 block q =
  // c · kMB + mb of the tile holds rows 64q.. (the fragment's rows g8 and
  // g8 + 8 are tile rows 64q + 16w4 + g8 and 8 further) or, SiLU·up fused,
  // the 32 neurons 32q.. with each neuron's gate row at fragment row g8 and
  // its up row at g8 + 8 (tile rows n and 128 + n): a thread's accumulators
  // then hold gate and up of one neuron and token, whatever the tile height.
  // The eight steps go as groups of kGroupK: group g + 1 is decoded while
  // group g's wgmmas run (the next slot's first while the last's do). Set
  // g & 1 of the fragments holds group g; wait<1> after a group's commit
  // retires the group before it, whose set is then rewritten; fence_operand
  // keeps a set live (its registers unreused) until that wait, across slots
  // too (f lives outside the slot). One wait a group, not a step: a wait after
  // every step exposed each wgmma's latency (run 3: the slot took as long
  // for 128 rows as for 256). Exact: every E4M3 value times its E8M0 scale
  // is a BF16 normal for codes 10 to 246 (mma.cuh).
  // k16 steps a group: four, or one at T = 128 (four warpgroups of 104
  // registers and 64 accumulators: no room for more sets; an m64n128k16
  // takes long enough to hide a wait; run 4: four warpgroups with one step a
  // group 3-7 % faster there than two with two steps), or two at T = 144
  // (two m64 blocks of 72 accumulators: 144 + 2 × 16 fragment registers;
  // session 24 runs 3 and 6: one step a group +2 to +3.5 %, four +7.5 to
  // +8.9 % at 2048-4096 tokens).
  // Four sets, three groups in flight, measured no faster (session 24 run
  // 1: T = 128's GEMMs −0.5 to +3.4 %; T = 80 at 1024 tokens gate_up −4.5 %
  // on qwen3-30b-a3b, +6.6 % on qwen3-235b-a22b).
  constexpr int kGroupK = kT == 128 ? 1 : kT == 144 ? 2 : 4;
  // The E4M3 -> BF16 decode: integer (e4m3x2_to_bf16x2_shift120: a byte
  // permute, a shift, the sign moved by an add, then × 2^(c-7)) from T = 16
  // on, where it measured 4-13 % faster than the hardware convert and its
  // bit move (session 25 run 3: T = 16 −10 to −13 %, T = 80 −6 to −10 %, T =
  // 144 −4 to −5 %); T = 8 keeps the convert (+1.5 to +4 % with the integer
  // one: the whole slot is decode there, on the integer pipes).
  // (Tiled copies: always the integer path, whose ldmatrix words are the
  // packed words the decode takes.)
  constexpr bool kIntDecode = kT != 8 || kTiledW;
  // Tiled copies: rows of a weight box (fused: the gate box, then the up box).
  // The slot loop's offsets divide by it at run time (w8a16_tiled_chunk_offset,
  // w8a16_tiled_scale_pair_offset). Masks or a compare instead (session 56)
  // made ptxas keep the cheaper offsets live across the loop: the T = 144
  // and T = 80 MXFP8 kernels then spill (24-124 bytes) at 232 registers.
  const int a16_box_rows = fused ? kRows / 2 : kRows;
  constexpr uint32_t kBias = kIntDecode ? kIntBias : kConvertBias;  // the decoded values are × 2^-kBias
  uint32_t f[2][kGroupK][kMB][4];
  static_assert((8 / kGroupK) % 2 == 0, "a slot's groups alternate the two sets and end on set 1");
  auto fence_f = [&](int set) {
#pragma unroll
    for (int s = 0; s < kGroupK; ++s)
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int i = 0; i < 4; ++i) wgmma::fence_operand(f[set][s][mb][i]);
  };
  // Tile row of the thread's first fragment row in m64 block mb; its second
  // is row2 further.
  auto row_of = [&](int mb) {
    const int q = c * kMB + mb;
    return fused ? 32 * q + 8 * w4 + g8 : 64 * q + 16 * w4 + g8;
  };
  const int row2 = fused ? kRows / 2 : 8;
  // The token rows the tile's wgmmas issue (GroupedGemmParams::row_entries,
  // tma_a16_issue_rows): every consumer warp counts the tile's rows in use
  // in the align stage's table (complete before this kernel, as the block
  // table).
  constexpr int kNarrowRows = tma_a16_issue_rows(kT, 0);
  constexpr bool kNarrowIssue = kA16 && kNarrowRows < kT;
  auto issue_rows = [&](int t) {
    if (!kNarrowIssue || g.row_entries == nullptr) return kT;
    const int row0 = walk.block(t) * kT;
    int used = 0;
#pragma unroll
    for (int r0 = 0; r0 < kT; r0 += 32) {
      const int r = row0 + r0 + lane;
      used += __popc(__ballot_sync(kFullMask, r0 + lane < kT && r < g.rows && __ldcg(g.row_entries + r) >= 0));
    }
    return tma_a16_issue_rows(kT, used);
  };
  auto slot_a16 = [&](int kt, auto width) {
    if constexpr (kA16) {
      constexpr int kN = decltype(width)::value;  // token rows the wgmmas issue
      tma::wait(base + L::full(stage), phase);
      if constexpr (kGather) tma::fence_proxy_async();
      const uint8_t* wsc = base_ptr + L::w_scale(stage);
      const uint64_t db = wgmma::sw128_desc(base + L::a(stage));
      uint32_t codes[kMB][2];  // the two rows' four E8M0 codes (one per 32-K block)
      bool narrow = true;
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if constexpr (kTiledW) {
            // Tiled scales: the row's blocks 0-1 and 2-3 of the slot, two
            // 16-bit reads in its box (producer above).
            const int row = row_of(mb) + r * row2, lo = w8a16_tiled_scale_pair_offset(row, 0, a16_box_rows),
                      hi = w8a16_tiled_scale_pair_offset(row, 1, a16_box_rows);
            codes[mb][r] = uint32_t(*reinterpret_cast<const uint16_t*>(wsc + lo)) |
                           uint32_t(*reinterpret_cast<const uint16_t*>(wsc + hi)) << 16;
          } else {
            codes[mb][r] = *reinterpret_cast<const uint32_t*>(wsc + 4 * (row_of(mb) + r * row2));
          }
          narrow &= scales_narrow4<kBias>(codes[mb][r]);
        }
      // One BF16x2 multiply by the scale where every code of the warp's
      // rows is narrow (real checkpoints), two otherwise: a warp-uniform path.
      auto run = [&](auto narrow_path) {
        constexpr bool kNarrow = decltype(narrow_path)::value;
        // Word w of the thread's row r (fragment rows g8, g8 + row2) of m64
        // block mb in step ks: bytes 4t4 .. 4t4 + 3 of the row's 16 bytes of
        // the step, the codes of K-permuted activations' positions 2t4, + 1
        // (low half) and 2t4 + 8, + 9 (high half) (a16_k_order), decoded by
        // a16_fragment_row (mma.cuh) into fragment words r and 2 + r.
        auto decode = [&](int ks, int mb, int r, uint32_t lo, uint32_t sel_lo, uint32_t hi, uint32_t sel_hi,
                          uint32_t (&fr)[kMB][4]) {
          a16_fragment_row<kIntDecode, kTiledW, kNarrow, kBias>(codes[mb][r], ks >> 1, lo, sel_lo, hi, sel_hi,
                                                                fr[mb][r], fr[mb][2 + r]);
        };
        // The words of rows r = 0, 1 of block mb in steps ks0 .. ks0 + kSteps
        // - 1 (w[r + 2s]) by one ldmatrix of the E4M3 rows as 16-bit
        // elements: lane l addresses row l & 7 of matrix l >> 3, which is row
        // r = (l >> 3) & 1, step ks0 + (l >> 4); tile rows ≡ l & 7 (mod 8)
        // keep the 128-byte swizzle's chunk (step ^ (l & 7)): conflict-free.
        auto load_words = [&](auto steps, int ks0, int mb, uint32_t (&w)[4]) {
          constexpr int kSteps = decltype(steps)::value;
          const int j = lane & 7, i = lane >> 3;
          const int row = row_of(mb) - g8 + j + (i & 1) * row2;
          uint32_t addr;
          if constexpr (kTiledW) {
            // Tiled copies: the row's box, the step's half (steps 0-3, 4-7),
            // 64-byte rows under the 64-byte swizzle (core/tiled_box_map.h).
            static_assert(kRowBytes == 128, "w8a16_tiled_chunk_offset: 128 codes a slot row");
            addr = base + L::w(stage) + w8a16_tiled_chunk_offset(row, ks0 + (i >> 1), a16_box_rows);
          } else {
            addr = base + L::w(stage) + row * kRowBytes + (((ks0 + (i >> 1)) ^ j) << 4);
          }
          if constexpr (kSteps == 2) ldmatrix_x4(w, addr);
          else ldmatrix_x2(w[0], w[1], addr);
        };
        // T = 8 (128 rows, one m64 block a consumer; the convert decode)
        // reads each half word by its own 2-byte load instead, zero-extended
        // into a low half: the convert takes a register's low half, so an
        // ldmatrix word's high half costs a shift, and with the convert the
        // ldmatrix measured slower there (session 25 run 1: +6.5 to +9.1 %
        // at 64 and 256 tokens, where T = 16 gained 3-5 %).
        auto decode_group = [&](int grp) {
          if constexpr (!kIntDecode) {
#pragma unroll
            for (int s = 0; s < kGroupK; ++s)
#pragma unroll
              for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                  const int ks = kGroupK * grp + s;
                  const uint8_t* row =
                      base_ptr + L::w(stage) + (row_of(mb) + r * row2) * kRowBytes + ((ks ^ g8) << 4) + 4 * t4;
                  const uint16_t lo = *reinterpret_cast<const uint16_t*>(row);
                  const uint16_t hi = *reinterpret_cast<const uint16_t*>(row + 2);
                  decode(ks, mb, r, lo, 0x1404u, hi, 0x1404u, f[grp & 1][s]);
                }
          } else {
            constexpr int kSteps = kGroupK == 1 ? 1 : 2;
#pragma unroll
            for (int s0 = 0; s0 < kGroupK; s0 += kSteps)
#pragma unroll
              for (int mb = 0; mb < kMB; ++mb) {
                uint32_t w[4];
                load_words(std::integral_constant<int, kSteps>{}, kGroupK * grp + s0, mb, w);
#pragma unroll
                for (int s = 0; s < kSteps; ++s)
#pragma unroll
                  for (int r = 0; r < 2; ++r)
                    decode(kGroupK * grp + s0 + s, mb, r, w[r + 2 * s], 0x1404u, w[r + 2 * s], 0x3424u,
                           f[grp & 1][s0 + s]);
              }
          }
        };
        decode_group(0);
#pragma unroll
        for (int grp = 0; grp < 8 / kGroupK; ++grp) {
          wgmma::fence();
#pragma unroll
          for (int s = 0; s < kGroupK; ++s) {
            const int ks = kGroupK * grp + s;
#pragma unroll
            for (int mb = 0; mb < kMB; ++mb) {
              const uint64_t d = db + (ks >> 2) * (kT * kRowBytes >> 4) + 2 * (ks & 3);
              wgmma::mma_bf16_rs<kN>(*reinterpret_cast<float(*)[kN / 2]>(&acc[mb][0]), f[grp & 1][s][mb], d,
                                     (kt | ks) != 0);
            }
          }
          wgmma::commit();
          // Every group but this one done: the other set is free, and
          // (group 0) the previous slot's wgmmas have read its tokens.
          wgmma::wait<1>();
          fence_f((grp & 1) ^ 1);
          if (grp == 0 && kt > 0) release(prev);
          if (grp + 1 < 8 / kGroupK) decode_group(grp + 1);
        }
      };
      if (__all_sync(kFullMask, narrow)) run(std::true_type{});
      else run(std::false_type{});
      next();
    }
  };

  // kTokSplit: whether consumer c's half of tile t holds a row in use (align
  // pads each expert's rows at its end, so a half whose first row is padding
  // is all padding). Read a tile ahead: the next tile's first slot runs
  // during this tile's epilogue (look_ahead) where its half is in use.
  auto half_active = [&](int t) {
    const int r = walk.block(t) * kT + 64 * c;
    return warp_uniform(t < tiles && (g.row_entries == nullptr || (r < g.rows && __ldcg(g.row_entries + r) >= 0)));
  };
  bool active_next = kTokSplit && half_active(blockIdx.x), active = active_next;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    if constexpr (kA16) {
      // The tile's slots at the width issue_rows gives: each width its own
      // copy of the slot loop, so that no wgmma sits behind a branch on the
      // width (a branch before every wgmma made ptxas fence each one:
      // 8-44 % slower, session 35 run 1).
      auto slots = [&](auto width) {
        for (int kt = 0; kt < k_tiles; ++kt) slot_a16(kt, width);
        wgmma::wait<0>();
        fence_f(0);
        fence_f(1);
        release(prev);
        // Rows not issued: zeros (their accumulators hold an earlier tile's).
        constexpr int kN = decltype(width)::value;
#pragma unroll
        for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
          for (int i = 0; i < kT / 2; ++i) {
            wgmma::fence_operand(acc[mb][i]);
            if (i >= kN / 2) acc[mb][i] = 0.0f;
          }
      };
      using Full = std::integral_constant<int, kT>;
      if constexpr (kNarrowIssue) {
        if (issue_rows(t) == kNarrowRows) slots(std::integral_constant<int, kNarrowRows>{});
        else slots(Full{});
      } else {
        slots(Full{});
      }
    } else if constexpr (!kFp8) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        // Slot kt's MMAs stay in flight while we wait for slot kt+1; the slot
        // before is released once its MMAs are done (wait_group 1).
        tma::wait(base + L::full(stage), phase);
        if constexpr (kGather) tma::fence_proxy_async();
        uint64_t da, db;
        descs(stage, da, db);
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
#pragma unroll
          for (int mb = 0; mb < kMB; ++mb)
            wgmma::mma_bf16<kT>(acc[mb], da + mb * mstep + w_kstep(ks), db + 2 * ks, (kt | ks) != 0);
        wgmma::commit();
        wgmma::wait<1>();
        if (kt > 0) release(prev);
        next();
      }
      wgmma::wait<0>();
      release(prev);
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int i = 0; i < kT / 2; ++i) wgmma::fence_operand(acc[mb][i]);
    } else if constexpr (kTokSplit) {
      active = active_next;
      active_next = half_active(t + int(gridDim.x));
      // Slot 0, unless the previous tile's epilogue ran it (look_ahead).
      if (!warp_uniform(pending)) slot_split(active, std::true_type{});
      for (int kt = 1; kt < k_tiles; ++kt) slot_split(active, std::false_type{});
      pending = active_next;
    } else {
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb)
#pragma unroll
        for (int i = 0; i < kT / 2; ++i) acc[mb][i] = 0.0f;
      for (int kt = 0; kt < k_tiles; ++kt) slot_fp8();
    }

    // Epilogue: straight from the registers (TileStores).
    const int row0 = walk.block(t) * kT, odd = g8 & 1;
    const TileStores<kT> st{g, N, row0, w4, g8, t4, odd, (g8 >> 1) & 1, (g8 >> 2) & 1};
    if constexpr (kTokSplit && !kSiluQuant) {
      // The token-split tile, a plain GEMM (down): half h of the consumer's
      // accumulators is output columns 128h.. of the tile for its 64 tokens.
      // (`active`: the consumer's half holds a row in use; look_ahead: the
      // next tile's first slot, each half into the accumulators just stored.)
      // (Clusters: both halves stored before half 1 goes out; between the
      // stores, the next tile's half 0 beside acc[1] and the partial sums in
      // flight made ptxas spill a register.)
      const int tok0 = row0 + 64 * c + 16 * w4 + g8, col0 = walk.n(t) * kRows;
      look_ahead(0);
      if (warp_uniform(active)) st.store_swapped(acc[0], tok0, col0);
      if constexpr (kCluster == 1) look_ahead(1);
      if (warp_uniform(active)) st.store_swapped(acc[1], tok0, col0 + 128);
      if constexpr (kCluster > 1) look_ahead(1);
      look_ahead(2);
    } else if constexpr (kTokSplit) {
      // The token-split tile, SiLU·up fused (gate_up): a thread holds gate
      // (acc[0]) and up (acc[1]) of neurons 8i + 2t4, + 1 (i < 16) of the
      // tile's 128 for two tokens, so a token's 128 neurons — one activation
      // group — are the quad's four lanes': its amax is two shuffles away
      // (no shared memory, no barrier), quantized as the T = 64 tile's
      // epilogue below does.
      // h goes to acc[1], so that acc[0] is free for the next tile's first
      // half-slot (look_ahead, as in down above).
      const int n0 = walk.n(t) * tile_rows;
      float m[2] = {0.0f, 0.0f};
      look_ahead(0);
      if (active) {
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          acc[1][i] = silu_fast(acc[0][i]) * acc[1][i];
          m[(i >> 1) & 1] = fmaxf(m[(i >> 1) & 1], fabsf(acc[1][i]));
        }
      }
      look_ahead(1);
      if (active) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          m[h] = fmaxf(m[h], __shfl_xor_sync(kFullMask, m[h], 1));
          m[h] = fmaxf(m[h], __shfl_xor_sync(kFullMask, m[h], 2));
          const int row = row0 + 64 * c + 16 * w4 + g8 + 8 * h;
          const float sc = e4m3_scale(m[h]);
          const float r = 1.0f / sc;
          if (t4 == 0 && row < g.rows) g.out_scales[size_t(row) * (N / 256) + n0 / 128] = sc;
#pragma unroll
          for (int half = 0; half < 2; ++half) st.store_codes(&acc[1][32 * half], h, r, row, n0, 64 * half);
        }
      }
      look_ahead(2);
    } else if constexpr (kSwap && !kSiluQuant) {
      // Swapped operands, a plain GEMM (down): element 4i + j of the flat
      // accumulators is token 16w4 + g8 + 8(j >> 1) of the tile, output
      // column 8i + 2t4 + (j & 1) of the consumer's 128.
      st.store_swapped(*reinterpret_cast<float(*)[64]>(&acc[0][0]), row0 + 16 * w4 + g8, walk.n(t) * kRows + 128 * c);
    } else if constexpr (kSwap) {
      // Swapped operands, SiLU·up fused (gate_up): the flat accumulators.
      float(&af)[kT] = *reinterpret_cast<float(*)[kT]>(&acc[0][0]);
      float* s_amax = reinterpret_cast<float*>(const_cast<uint8_t*>(base_ptr) + L::quant());
      st.template silu_quant_swapped<W::kConsumerThreads>(af, s_amax, c, tid, walk.n(t) * tile_rows);
    } else if constexpr (kSiluQuant) {
      // W8A8 at T = 64 or 80, SiLU·up fused (gate_up): m64 block 0 gate, 1 up.
      float* s_amax = reinterpret_cast<float*>(const_cast<uint8_t*>(base_ptr) + L::quant());
      st.template silu_quant<W::kConsumerThreads>(acc[0], acc[1], s_amax, c, warp, tid, walk.n(t) * tile_rows);
    } else if (fused && kA16) {
      // W8A16: fragment rows g8 and g8 + 8 are one neuron's gate and up
      // (row_of): elements 4i + j and 4i + 2 + j, token 8i + 2t4 + j. One
      // BF16 a store: the neuron's h of two tokens are two rows apart. h is
      // the down GEMM's activations: K in a16_k_position order.
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb) {
        const int n = a16_k_position(walk.n(t) * (kRows / 2) + row_of(mb));
#pragma unroll
        for (int i = 0; i < kN8; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int row = row0 + 8 * i + 2 * t4 + j;
            if (row < g.rows)
              static_cast<__nv_bfloat16*>(g.out)[size_t(row) * (N / 2) + n] =
                  __float2bfloat16_rn(silu(acc[mb][4 * i + j]) * acc[mb][4 * i + 2 + j]);
          }
      }
    } else if (fused) {
      // h = silu(gate) · up of neurons walk.n(t)·128 + 64c.. from the FP32
      // accumulators: element x of both blocks is one neuron and token.
#pragma unroll
      for (int i = 0; i < kT / 2; ++i) acc[0][i] = silu(acc[0][i]) * acc[kMB - 1][i];
      st.store(acc[0], walk.n(t) * (kRows / 2) + 64 * c, N / 2);
    } else {
      // m64 block q = c · kMB + mb: output columns 64q.. of the tile.
#pragma unroll
      for (int mb = 0; mb < kMB; ++mb) st.store(acc[mb], walk.n(t) * kRows + 64 * (c * kMB + mb), N);
    }
  }
  // Nothing is in flight here (the last tile issued no next MMAs), but
  // ptxas cannot tell: without this wait it fences the MMAs that cross the
  // loop's branches (C7517/C7518).
  if constexpr (kTokSplit) wgmma::wait<0>();
  // No block exits while the other may still arrive on its barriers.
  if constexpr (kCluster > 1) tma::cluster_sync();
#endif
#endif
}

}  // namespace

namespace {
template <WeightFormat F, bool kA16, int kT, int kCluster, bool kGather, bool kSiluQuant, bool kShareW, bool kTiledW>
void launch_tma_cluster(const GroupedGemmParams& p, long tiles, cudaStream_t stream, bool pdl) {
  using L = Tile<F, kT, kA16>;
  const auto kernel = &tma_gemm_kernel<F, kA16, kT, kCluster, kGather, kSiluQuant, kShareW, kTiledW>;
  Params tp{};
  tp.g = p;
  // Weight boxes of half a tile where the tile is two loads (fused: gate
  // and up rows; kShareW: one half from each block of the cluster), a
  // quarter where it is four (kSwapAB fused: each consumer's gate and up
  // rows).
  const int box_rows = L::kSwapAB && kSiluQuant ? 64 : p.fuse_silu || kShareW ? L::kRows / 2 : L::kRows;
  if constexpr (kTiledW) {
    // The tiled copy of gate_up (fused: N = 2I, K = H) or down (N = H, K = I):
    // BF16, or W8A16's MXFP8 codes (one byte, packed words).
    const uint64_t E = uint64_t(p.experts), N = uint64_t(p.n), K = uint64_t(p.k);
    const int eb = kA16 ? 1 : 2;
    tp.w_map = tma_tiled_map(p.w, p.fuse_silu ? gate_up_tiled_box_map(E, K, N / 2, box_rows, eb)
                                              : down_tiled_box_map(E, N, K, box_rows, eb),
                             eb);
  } else {
    tp.w_map = tma_matrix_map(p.w, uint64_t(p.experts) * uint64_t(p.n), uint64_t(p.k), L::kFp8, box_rows);
  }
  if constexpr (!kGather)
    tp.a_map = tma_matrix_map(p.a, uint64_t(p.rows), uint64_t(p.k), L::kW8A8, kShareW ? kT : kT / kCluster);
  constexpr int kThreads = Warps<kA16, kT>::kThreads;
  const long resident = kCluster == 1 ? resident_blocks(kernel, kThreads, L::bytes())
                                      : kCluster * resident_clusters(kernel, kThreads, L::bytes(), kCluster);
  launch_kernel_ex(kernel, dim3(unsigned(std::min(tiles, resident))), dim3(kThreads), size_t(L::bytes()), stream,
                   pdl, kCluster, tp);
}

// Clusters of two for BF16 at T >= 64 where an expert block has an even
// number of weight tiles (tiles then pair up, and the persistent grid, a
// multiple of 2, walks whole pairs). Measured (session 13 runs 2-3, layer
// µs, two runs each, min, against the same kernel without clusters):
// qwen3-235b-a22b BF16 −4 to −5 % at 2048-4096 tokens, −1.4 % at 1024;
// qwen3-30b-a3b BF16 −1.5 to −2 %. W8A8 (T = 64, 256-row tiles) was mixed,
// from −5.5 % to +3.6 %, within two runs' spread: no clusters there; the
// swapped FP8 tile's fused gate_up (sessions 23-24) takes them (below).
template <WeightFormat F, bool kA16, int kT, bool kTiledW = false>
void launch_tma(const GroupedGemmParams& p, cudaStream_t stream, bool pdl) {
  using L = Tile<F, kT, kA16>;
  // Tiled BF16 copies: the same kernels, their weight loads and descriptors
  // the tiled ones (a template parameter: the producer's 40 registers).
  if constexpr (((F == WeightFormat::kBF16 && !kA16) || kA16) && !kTiledW) {
    if (p.w_tiled) return launch_tma<F, kA16, kT, true>(p, stream, pdl);
  }
  // Fused SiLU·up: a tile advances kRows / 2 neurons of the N / 2 gate rows.
  const int ntn = (p.n + L::kRows - 1) / L::kRows;
  const long tiles = long(p.max_blocks) * ntn;
  if constexpr (F == WeightFormat::kBF16 && kT <= 128) {
    if (p.a_rows != nullptr) return launch_tma_cluster<F, kA16, kT, 1, true, false, false, kTiledW>(p, tiles, stream, pdl);
  }
  // W8A8 with SiLU·up fused takes the kernel that also quantizes h
  // (kSiluQuant); BF16 fuses it at run time.
  constexpr bool kWide8 = L::kWide8;
  if constexpr ((F == WeightFormat::kBF16 && kT == 144) || (kWide8 && F == WeightFormat::kFP8Block128)) {
    // Weight-sharing clusters, pairs of blocks (align's pair_blocks): an
    // even grid of whole pairs.
    if (p.share_weights) {
      const long pairs = tiles + (tiles & 1);
      if (kWide8 && p.fuse_silu)
        return launch_tma_cluster<F, kA16, kT, 2, false, kWide8, true, false>(p, pairs, stream, pdl);
      return launch_tma_cluster<F, kA16, kT, 2, false, false, true, kTiledW>(p, pairs, stream, pdl);
    }
  }
  if constexpr ((F == WeightFormat::kBF16 && kT >= 64) || L::kSwapAB || L::kTokSplit) {
    // Clusters sharing the token tile, where an expert block has an even
    // number of weight tiles. The swapped FP8 tile (session 23 run 9,
    // against unclustered, 4096 tokens; each block loads half the token tile
    // and multicasts it: 36 KB a slot from L2 instead of 40, the GEMMs being
    // near L2's throughput, ncu above): layer 475.7 -> 470.7 / 1664.1 ->
    // 1644.3 µs (gate_up −2.6 / −0.3 %, down +1.9 / +0.5 %); 512 tokens
    // −0.3 / −0.1 %. So the fused gate_up alone takes them (session 24 run
    // 1, against both GEMMs clustered, 4096 tokens: layer 472.4 -> 468.6 /
    // 1666.0 -> 1662.7, down 143.2 -> 140.8 / 509.3 -> 507.3; 512 and 2048
    // tokens within ±0.2 %). The token-split T = 128 tile takes them on
    // both GEMMs (session 36 run 4, against none and against the fused
    // gate_up's alone, 4096 tokens: 465.7 / 465.6 / 463.5 and 1596.0 /
    // 1591.3 / 1582.4 µs; 2048: 292.9 / 293.2 / 293.4 and 983.5 / 972.1 /
    // 967.5).
    if (ntn % 2 == 0 && (!L::kSwapAB || p.fuse_silu)) {
      constexpr bool kQuant = kWide8 || L::kTokSplit;  // W8A8: h quantized in the epilogue
      if (kQuant && p.fuse_silu)
        return launch_tma_cluster<F, kA16, kT, 2, false, kQuant, false, false>(p, tiles, stream, pdl);
      return launch_tma_cluster<F, kA16, kT, 2, false, false, false, kTiledW>(p, tiles, stream, pdl);
    }
  }
  if constexpr (kWide8 || L::kTokSplit) {
    if (p.fuse_silu) return launch_tma_cluster<F, kA16, kT, 1, false, true, false, false>(p, tiles, stream, pdl);
  }
  launch_tma_cluster<F, kA16, kT, 1, false, false, false, kTiledW>(p, tiles, stream, pdl);
}

template <WeightFormat F, bool kA16 = false>
void launch_format(const GroupedGemmParams& p, int tile_tokens, cudaStream_t stream, bool pdl) {
  switch (tile_tokens) {
    case 8: return launch_tma<F, kA16, 8>(p, stream, pdl);
    case 16: return launch_tma<F, kA16, 16>(p, stream, pdl);
    case 32: return launch_tma<F, kA16, 32>(p, stream, pdl);
    case 64: return launch_tma<F, kA16, 64>(p, stream, pdl);
    case 80: return launch_tma<F, kA16, 80>(p, stream, pdl);
    case 128: return launch_tma<F, kA16, 128>(p, stream, pdl);
    case 144:
      if constexpr (F == WeightFormat::kBF16 || kA16) return launch_tma<F, kA16, 144>(p, stream, pdl);
      break;
    default: break;
  }
  throw InvalidArgument(detail::concat("classical GEMM: the TMA kernel takes tile_tokens 8, 16, 32, 64, 80, 128 or "
                                       "(BF16 activations) 144, not ", tile_tokens, " for ", to_string(F),
                                       kA16 ? " W8A16" : ""));
}
}  // namespace

void tma_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, cudaStream_t stream, bool pdl) {
  WD_CHECK(tma_gemm_fits(format, p.n, p.k), "classical GEMM: the TMA kernel takes BF16 (N % 8 == 0, K % 8 == 0) or "
           "W8A8 (N, K multiples of 128) weights, not ", to_string(format), " with N = ", p.n, ", K = ", p.k);
  WD_CHECK(p.experts > 0, "classical GEMM: the TMA kernel needs the number of experts (the weights' extent)");
  const bool w8a8 = format != WeightFormat::kBF16 && !p.a_bf16;
  WD_CHECK(!p.fuse_silu ||
               ((!w8a8 || (tma_w8a8_fuses_silu(format, tile_tokens) && p.out_scales)) && p.n % 256 == 0 &&
                !p.out_fp32),
           "classical GEMM: SiLU·up in the TMA GEMM takes BF16 activations (BF16 or W8A16) or W8A8 at tile_tokens "
           "64 or 80 (FP8 block-128 also 128) with out_scales, a 2-byte (BF16) or 1-byte (W8A8: E4M3) output and N = "
           "2I a multiple of 256, not ",
           to_string(format), p.a_bf16 ? " W8A16" : "", " at T = ", tile_tokens, " with N = ", p.n);
  WD_CHECK(!p.a_bf16 || format == WeightFormat::kMXFP8, "classical GEMM: W8A16 in the TMA GEMM takes MXFP8 weights, not ",
           to_string(format));
  WD_CHECK(!p.a_rows || (format == WeightFormat::kBF16 && !p.a_bf16 && tile_tokens <= 128 && p.a_rows_div >= 1),
           "classical GEMM: the TMA kernel gathers token rows for BF16 weights, T <= 128 and a_rows_div >= 1, not ",
           to_string(format), p.a_bf16 ? " W8A16" : "", ", T = ", tile_tokens, ", a_rows_div = ", p.a_rows_div);
  WD_CHECK(!p.share_weights ||
               (!p.a_bf16 && !p.a_rows &&
                ((format == WeightFormat::kBF16 && tile_tokens == 144) ||
                 (format == WeightFormat::kFP8Block128 && (tile_tokens == 64 || tile_tokens == 80)))),
           "classical GEMM: weight-sharing clusters take BF16 weights and activations at tile_tokens 144 or FP8 "
           "block-128 W8A8 at 64 or 80, rows permuted (not gathered), not ", to_string(format),
           p.a_bf16 ? " W8A16" : "", " at T = ", tile_tokens);
  WD_CHECK(!p.w_tiled || tma_gemm_reads_tiled(format, p.n, p.k, p.fuse_silu != 0, p.a_bf16 != 0),
           "classical GEMM: the TMA kernel reads tiled weight copies for BF16 weights and activations or W8A16 (MXFP8), "
           "gate_up with "
           "SiLU·up fused (N = 2I, I % 128 == 0) or down (N % 16 == 0), K % 64 == 0; not ", to_string(format),
           p.a_bf16 ? " W8A16" : "", " with N = ", p.n, ", K = ", p.k, p.fuse_silu ? " (gate_up)" : " (down)");
  WD_CHECK(wgmma_available(), "classical GEMM: the TMA kernel needs an sm_90 device and an sm_90a build");
  if (p.a_bf16) return launch_format<WeightFormat::kMXFP8, true>(p, tile_tokens, stream, pdl);
  switch (format) {
    case WeightFormat::kBF16: return launch_format<WeightFormat::kBF16>(p, tile_tokens, stream, pdl);
    case WeightFormat::kFP8Block128: return launch_format<WeightFormat::kFP8Block128>(p, tile_tokens, stream, pdl);
    case WeightFormat::kMXFP8: return launch_format<WeightFormat::kMXFP8>(p, tile_tokens, stream, pdl);
  }
  throw InvalidArgument("classical GEMM: unknown weight format");
}

}  // namespace wd::kernels
