// The TMA tile's producer (warpgroup 0 of tma_gemm_kernel,
// classical_tma_gemm.cu): the loads of every slot of the block's tiles, in
// the consumers' order, each once every consumer thread has released the
// slot, so that the loads run kStages slots ahead across tile boundaries.
// Warp 0 works (lane 0 issues the TMA copies, the lanes the scales'
// cp.async copies); gathering (kGather), the whole warpgroup copies the
// tile's token rows from x itself. The slot layout, the barriers and the
// clusters are classical_tma_tile.cuh's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "core/tiled_box_map.h"
#include "kernels/classical_tma_tile.cuh"
#include "kernels/classical_wgmma.cuh"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "kernels/tma.cuh"

// Device code of the sm_90a pass alone, as the kernel's body that calls it.
#if WD_WGMMA_AVAILABLE
namespace wd::kernels::tma_tile {

// Run by every thread of the producer warpgroup; returns once its loads are
// issued (their bytes land on the slots' "full" barriers, which the
// consumers wait for).
template <WeightFormat F, bool kA16, int kT, int kCluster, bool kGather, bool kSiluQuant, bool kShareW, bool kTiledW>
__device__ __forceinline__ void tma_producer(const Params& p,
                                             const TileWalk<Tile<F, kT, kA16>::kRows, kShareW, kTiledW>& walk,
                                             uint32_t base, const uint8_t* base_ptr, int tid, int warp, int lane) {
  using L = Tile<F, kT, kA16>;
  using W = Warps<kA16, kT, L::kTokSplit>;
  constexpr bool kFp8 = L::kFp8, kMx = L::kMx, kW8A8 = L::kW8A8, kSwap = L::kSwapAB, kTokSplit = L::kTokSplit;
  constexpr int kRows = L::kRows, kStages = L::kStages, kStageK = L::kStageK;
  const GroupedGemmParams& g = p.g;
  const int N = walk.N, K = walk.K, k_tiles = walk.k_tiles, tiles = walk.tiles, tile_rows = walk.tile_rows;
  const bool fused = walk.fused;
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(W::kProducerRegs));
  // Warp 0 loads (gathering, the whole warpgroup); its wait below keeps
  // the block from completing first.
  if constexpr (!kGather) {
    if (warp != 0) return;
  }
  const uint32_t rank = kCluster > 1 ? tma::cluster_rank() : 0;
  // The token-split tile in clusters sharing its token tile (kSkipPad):
  // where the tile's second 64 rows are all padding (an expert's last
  // block; consumer 1 skips them: row_entries), block 1 of the cluster does
  // not load them and both slots expect half the token bytes (pad_hi, set
  // per tile). Why: with uniform routing about half the experts end in
  // such a block, whose tile costs its whole loads for a few rows (session
  // 39 run 4: the same layer on balanced routing, no such blocks, is 11-19
  // % faster at 2048-4096 tokens). Measured (run 5, 2048 / 4096 tokens, µs
  // of the layer): qwen3-30b-a3b 285.6 -> 282.4 / 444.2 -> 442.7,
  // qwen3-235b-a22b 951.9 -> 939.8 / 1539.7 -> 1525.5.
  constexpr bool kSkipPad = kTokSplit && kCluster == 2 && !kShareW;
  // (Spelled as the rows in use: the same test spelled as padding made
  // ptxas spill a register of the 40-register producer of the fused tile.)
  auto second_half_used = [&](int t) {
    return !kSkipPad || g.row_entries == nullptr || __ldcg(g.row_entries + walk.block(t) * kT + kT / 2) >= 0;
  };
  bool pad_hi = false;
  // Lane 0: slot s expects the weight tile and the whole token tile (or,
  // gathering, the weight tile alone), and the weight tile (rows wrow.., K
  // block kt) is issued; with kShareW this block's half of it (fused: the
  // gate rows or the up rows; else rows [rank, rank + 1) · kRows / 2), into
  // both blocks of the cluster, whose other block sends the other half.
  auto load_w = [&](int s, int kt, int wrow) {
    const uint32_t full = base + L::full(s);
    tma::arrive_expect_tx(full, L::kWTileBytes + (kGather ? 0 : pad_hi ? L::kATileBytes / 2 : L::kATileBytes));
    if constexpr (kTiledW) {
      // Tiled copies: boxes of two K halves (units 2kt, 2kt + 1), wrow an
      // item row. Fused: the gate box, then the up box (kShareW: block
      // rank's, into both blocks); else the tile's rows in one box
      // (kShareW: block rank's half, kRows / 32 item rows on).
      // (Coordinates: tiled_w_box_coords, core/tiled_box_map.h.)
      int c[5];
      if (fused) {
        if constexpr (kShareW) {
          const uint32_t dst = base + L::w(s) + rank * (kRows / 2) * kRowBytes;
          tiled_w_box_coords(true, int(rank), wrow, kt, c);
          tma::load_5d_multicast(dst, &p.w_map, c[0], c[1], c[2], c[3], c[4], full, 0x3);
        } else {
          const uint32_t dst = base + L::w(s);
          tiled_w_box_coords(true, 0, wrow, kt, c);
          tma::load_5d(dst, &p.w_map, c[0], c[1], c[2], c[3], c[4], full);
          tiled_w_box_coords(true, 1, wrow, kt, c);
          tma::load_5d(dst + (kRows / 2) * kRowBytes, &p.w_map, c[0], c[1], c[2], c[3], c[4], full);
        }
      } else if constexpr (kShareW) {
        const uint32_t dst = base + L::w(s) + rank * (kRows / 2) * kRowBytes;
        tiled_w_box_coords(false, 0, wrow + int(rank) * (kRows / 32), kt, c);
        tma::load_4d_multicast(dst, &p.w_map, c[0], c[1], c[2], c[3], full, 0x3);
      } else {
        const uint32_t dst = base + L::w(s);
        tiled_w_box_coords(false, 0, wrow, kt, c);
        tma::load_4d(dst, &p.w_map, c[0], c[1], c[2], c[3], full);
      }
    } else if constexpr (kSwap && kSiluQuant) {
      // Slot rows 128c.. are consumer c's: gate rows 64c.. of the tile's
      // neurons, then their up rows (four 64-row boxes; with kShareW,
      // block rank loads consumer rank's two, into both blocks).
#pragma unroll
      for (int q = kShareW ? 2 * int(rank) : 0; q < (kShareW ? 2 * int(rank) + 2 : 4); ++q) {
        const uint32_t dst = base + L::w(s) + q * 64 * kRowBytes;
        const int row = wrow + (q >> 1) * 64 + (q & 1) * (N / 2);
        if constexpr (kShareW) tma::load_2d_multicast(dst, &p.w_map, kt * kStageK, row, full, 0x3);
        else tma::load_2d(dst, &p.w_map, kt * kStageK, row, full);
      }
    } else if constexpr (kShareW) {
      const int grow = wrow + int(rank) * (fused ? N / 2 : kRows / 2);
      tma::load_2d_multicast(base + L::w(s) + rank * (kRows / 2) * kRowBytes, &p.w_map, kt * kStageK, grow, full,
                             0x3);
    } else {
      tma::load_2d(base + L::w(s), &p.w_map, kt * kStageK, wrow, full);
      if (fused) tma::load_2d(base + L::w(s) + (kRows / 2) * kRowBytes, &p.w_map, kt * kStageK, wrow + N / 2, full);
    }
  };
  // Lane 0: the token tile of slot s (with a cluster sharing it, this
  // block's half, into both blocks).
  auto load_a = [&](int s, int kt, int row0) {
    const uint32_t full = base + L::full(s);
    if constexpr (kCluster == 1 || kShareW) {
#pragma unroll
      for (int h = 0; h < L::kAHalves; ++h)
        tma::load_2d(base + L::a(s) + h * kT * kRowBytes, &p.a_map, kt * kStageK + h * (kStageK / L::kAHalves), row0,
                     full);
    } else {
      constexpr int kHalf = kT / 2;
      if (!(pad_hi && rank == 1))
        tma::load_2d_multicast(base + L::a(s) + rank * kHalf * kRowBytes, &p.a_map, kt * kStageK,
                               row0 + int(rank) * kHalf, full, 0x3);
    }
  };
  // Before the PDL wait, the producer issues the weight tiles of the first
  // kEarlySlots slots (free at the start): they depend only on the layer's
  // weights and the block table. Their barriers expect the token tile's
  // bytes too, loaded after the wait.
  int early = 0;  // slots whose weight tile is already in flight
  for (int t = blockIdx.x, kt = 0; early < std::min(kStages, kEarlySlots) && t < tiles; ++early) {
    if constexpr (kGather) break;  // the wait is behind us
    pad_hi = !second_half_used(t);
    if (lane == 0) load_w(early, kt, walk.w_row(walk.expert(t), walk.n(t) * tile_rows));
    if (++kt == k_tiles) kt = 0, t += gridDim.x;
  }
  // The token tiles are the previous kernel's output.
  wait_for_previous_kernel();
  allow_next_kernel();
  // The loads (warp 0; lane 0 issues the TMA copies): every slot, in the
  // consumers' order, once every consumer thread has released it, so the
  // loads run kStages slots ahead across tile boundaries. The tile's
  // expert is read once per tile: one L2 round trip per slot made the
  // producer, not the MMAs, set the pace of the W8A8 tile (run 4).
  // Gathering: the tile's rows' tokens (L::tokens()); thread tid copies
  // 16-byte chunk tid % 8 of rows tid / 8, tid / 8 + 16, ...
  int* s_tok = reinterpret_cast<int*>(const_cast<uint8_t*>(base_ptr) + L::tokens());
  auto gather_a = [&](int s, int kt) {
    const int chunk = tid % 8, col = kt * kStageK + 8 * chunk;  // the chunk's first K element
    const uint16_t* x = static_cast<const uint16_t*>(g.a);
#pragma unroll
    for (int r = tid / 8; r < kT; r += 16) {
      const int tok = s_tok[r];
      const bool ok = tok >= 0 && col < K;  // padding rows and K past its end: zeros
      cp_async16(base + L::a(s) + r * kRowBytes + ((chunk ^ (r % 8)) << 4), ok ? x + size_t(tok) * K + col : x, ok);
    }
  };
  int stage = 0;
  uint32_t phase = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int row0 = walk.block(t) * kT, n0 = walk.n(t) * tile_rows;
    const int expert = walk.expert(t), wrow = walk.w_row(expert, n0);
    pad_hi = !second_half_used(t);
    if constexpr (kGather) {
      // The tile's tokens into the table, between two barriers of the
      // producer warpgroup (the previous tile's copies were issued).
      named_barrier_sync(1, 128);
      for (int r = tid; r < kT; r += 128) {
        const int e = __ldcg(g.a_rows + row0 + r);
        s_tok[r] = e < 0 ? -1 : e / g.a_rows_div;
      }
      named_barrier_sync(1, 128);
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      const uint32_t full = base + L::full(stage);
      if (early > 0) {
        --early;  // the first slots: weight tile in flight since before the wait
      } else {
        tma::wait(base + L::empty(stage), phase ^ 1);
        if (lane == 0 && (!kGather || warp == 0)) load_w(stage, kt, wrow);
      }
      if constexpr (kGather) gather_a(stage, kt);
      else if (lane == 0) load_a(stage, kt, row0);
      if constexpr (kFp8) {
        // Slot = 128-K block kt: the weight scales and (W8A8) the rows'
        // activation scales, landing on the same barrier.
        const int kblocks = K / 128;
        if constexpr (kW8A8) {
          for (int i = lane; i < kT; i += 32) {
            const bool ok = row0 + i < g.rows;
            cp_async4(base + L::a_scales(stage) + 4 * i,
                      ok ? g.a_scales + size_t(row0 + i) * kblocks + kt : g.a_scales, ok);
          }
        }
        if constexpr (kMx && kTiledW) {
          // Tiled scales (core/tiled_box_map.h): for each box (fused: the
          // gate box, then the up box), unit u < 2 (blocks 4kt + 2u, + 1)
          // and item row j of the box, the item's 32 bytes (gate_up: its
          // gate or up half), as two 16-byte chunks, into
          // [box][u][j][32 bytes] (tiled_scale_box_offset). wrow is the
          // tile's first item row; past the last one, zeros.
          const int box_rows = fused ? kRows / 2 : kRows;
          const int item_rows = g.experts * (fused ? N / 2 : N) / 16, units = K / 64;
          for (int i = lane; i < kRows / 4; i += 32) {
            const W8a16ScaleChunk ch = w8a16_tiled_scale_chunk(i, box_rows, fused, wrow, item_rows, units, kt);
            cp_async16(base + L::w_scale(stage) + ch.dst, ch.ok ? g.w_mx_scales + ch.src : g.w_mx_scales, ch.ok);
          }
        } else if constexpr (kMx) {
          const size_t rows_all = size_t(g.experts) * N;
          for (int i = lane; i < kRows; i += 32) {
            // Fused SiLU·up: tile rows [kRows/2, kRows) are the up rows.
            const size_t row = size_t(wrow) + i + (fused && i >= kRows / 2 ? size_t(N / 2 - kRows / 2) : 0);
            const bool ok = row < rows_all;
            cp_async4(base + L::w_scale(stage) + 4 * i, ok ? g.w_mx_scales + row * (K / 32) + 4 * kt : g.w_mx_scales,
                      ok);
          }
        } else if (lane < kRows / 128) {
          // Block row n0/128 + lane of the expert (fused: the gate rows'
          // block, then the up rows', I/128 blocks further); past its N (a
          // tile reading the next expert's rows, not stored) zeros.
          const int boff = fused ? lane * (N / 256) : lane;
          const bool ok = n0 / 128 + boff < N / 128;
          cp_async4(base + L::w_scale(stage) + 4 * lane,
                    ok ? g.w_block_scales + (size_t(expert) * (N / 128) + n0 / 128 + boff) * kblocks + kt
                       : g.w_block_scales,
                    ok);
        }
        tma::arrive_on_cp_async(full);
      }
      if constexpr (kGather) tma::arrive_on_cp_async(full);
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
  }
  if constexpr (kGather) cp_async_wait<0>();  // no thread exits with its copies in flight
}

}  // namespace wd::kernels::tma_tile
#endif  // WD_WGMMA_AVAILABLE
