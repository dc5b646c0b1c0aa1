// moe_gate_up on the tensor cores: see moe_tc.cuh for the mapping and the
// numerics, mma.cuh for the fragment layout and the K permutation.
#include "kernels/moe_tc.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "warpdecode/gate_up_tiling.h"

namespace wd::kernels {
namespace {

constexpr int kSlices = 4;  // warps per block, each a quarter of H
constexpr int kThreads = kSlices * kWarpSize;
constexpr int kTile = 16;   // neurons per block
constexpr int kTokens = 8;  // tokens of one n8 tile: a pass takes kTiles of them
constexpr size_t kMaxSmem = 200 * 1024;

// A chunk: one 16-byte load per lane and row; four lanes cover 64 bytes of a
// row, i.e. 32 BF16 or 64 E4M3 weights (two or four k16 steps).
template <bool kMx8>
struct Chunk {
  static constexpr int kElems = kMx8 ? 64 : 32;
  static constexpr int kLaneElems = kElems / 4;
  static constexpr int kSteps = kLaneElems / 4;                       // k16 steps
  static constexpr int kXLoads = kMx8 ? 2 : 1;                        // 16-byte x loads per lane
};

// Chunks per round of loads (one round in flight while the other is
// computed): 2 for BF16 (4 KB per warp); for MXFP8 1 (2 KB), or 2 with deep
// loads, which need H % 512 == 0 and leave 3 blocks per SM instead of 4 (the
// registers of the second chunk). The round size changes when a chunk is
// loaded, not what is summed or in which order: the bits are the same.
template <bool kMx8, bool kDeep>
struct Rounds {
  static constexpr int kChunks = kMx8 && !kDeep ? 1 : 2;
  static constexpr int kMinBlocks = kMx8 && kDeep ? 3 : 4;
};

// kTiled: weights (and MXFP8 scales) in the tiled layout of
// warpdecode/gate_up_tiling.h, where a chunk's 32 row pieces are one
// contiguous 2 KB item; the same values reach the same registers, so the
// bits are the same.
// kNarrowOnly (MXFP8, GateUpParams::scales_narrow: every code of the
// weights is narrow): every round takes the narrow decode, without the
// warp's vote on its codes; the same decode, so the same bits. Measured
// (PERF_LOG session 17): −1 to −3 % on gate_up with tiled weights. Not with
// deep loads from the canonical layout (session 18 run 8: gate_up +1 to +5
// %, qwen3-235b-a22b 419.8 -> 442.8 µs at B = 32, where the canonical
// non-deep kernel gains 3-6 %): launch() keeps the vote there.
// kMinBlocks 5 (MXFP8 narrow-only on tiled weights without deep loads: 96
// registers instead of 99, no spills; 20 warps an SM instead of 16): where
// the grid is at least 4 waves of 4 blocks an SM. Measured (session 20 runs
// 1-2, tiled-only, gate_up): −1.7 / −3.1..−3.9 / −5.2 % at B = 8 / 32 / 64
// on qwen3-30b-a3b (3072 blocks and more), −1.4 to −2.1 % at B = 4-32 on
// qwen3-235b-a22b; below 4 waves +5.1 % (B = 1, 384 blocks), +1.9 / +0.9 %
// (30b B = 2 / 4, 768 / 1536 blocks), +3.7 % (235b B = 2): ptxas's schedule
// under the lower register cap is slower per warp, which only many waves
// repay. From the canonical layout it lost (30b B = 32 +9.6 %): not there.
// (kMinBlocks 0: Rounds' count.)
// kTiles 2 (launch: tiled weights without deep loads, where
// GateUpParams::two_tiles asks; WarpDecodeConfig::for_batch's rule, by
// routing entries an expert, format, card and H): a pass takes 16 of the
// expert's tokens, two n8 tiles against one decoded weight fragment, so an
// expert of 9-16 tokens streams and decodes its weight tile once instead of
// twice. Three blocks an SM (128-165 registers: the second tile's x and
// accumulators; deep loads' rounds spill with it). A token's column is the
// same MMA chain over the same fragments either way, and its K ranges sum in
// the same order: the same bits. The one-tile kernels' PTX is what it was
// before kTiles.
template <bool kMx8, bool kDeep, bool kTiled, bool kNarrowOnly = false, int kMinBlocks = 0, int kTiles = 1>
__global__ void __launch_bounds__(kThreads, kMinBlocks > 0 ? kMinBlocks
                                            : kTiles > 1   ? 3
                                                           : Rounds<kMx8, kDeep>::kMinBlocks)
moe_gate_up_tc_kernel(const __grid_constant__ GateUpParams p, int by_id) {
  using C = Chunk<kMx8>;
  constexpr int kR = Rounds<kMx8, kDeep>::kChunks;
  extern __shared__ int32_t s_list[];
  __shared__ int s_warp_counts[kSlices];
  __shared__ float s_part[kSlices][8 * kTiles][kWarpSize];

  const int entries = p.batch * p.top_k, H = p.hidden, I = p.intermediate, K = p.top_k;
  // The block's expert. Few entries: that of entry blockIdx.y, unless an
  // earlier entry has it (one load, one barrier). Many (by_id: entries >
  // 2.5E, kByIdFromEntriesPerExpertX2): expert blockIdx.y itself. MXFP8: its
  // first weights are in flight before any routing is read, and a block
  // whose expert no entry routes to (E·(1 − K/E)^B of them: 10 of 128 at
  // qwen3-30b-a3b's B = 40, 2 at 64) exits once its entry list comes back
  // empty, below; BF16, whose first round is twice the bytes, checks first
  // (one pass over the ids, one barrier). The blockIdx.y-th distinct expert
  // before (a presence bitmap of all B·K ids built with shared atomics, then
  // a scan, ahead of the first weight load) cost MXFP8's gate_up 2.0-2.6 %
  // at B = 40-64 on an H100, and BF16's speculative round +0.5-0.7 % at B =
  // 40-48 (PERF_LOG session 66). Which block row takes an expert changes no
  // bits, so the rule is speed alone.
  int e;
  if (by_id) {
    e = blockIdx.y;
    if constexpr (!kMx8)
      if (!block_has_id(p.ids, entries, e)) return;
  } else {
    e = __ldg(p.ids + blockIdx.y);
    if (block_has_id(p.ids, blockIdx.y, e)) return;
  }

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int i0 = blockIdx.x * kTile;
  const int k0 = warp * (H / kSlices);         // the warp's K range
  const int nc = H / kSlices / C::kElems;      // chunks in it
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);
  const auto* w = static_cast<const uint8_t*>(p.weights);
  constexpr int kElemBytes = kMx8 ? 1 : 2;

  // Rows gate g, gate g+8, up g, up g+8 of the tile: row r is row0 + (r%2)·8
  // + (r/2)·I. Lane q's 16 bytes of chunk c of row r sit at
  // a0 + r_off(r) + c_bytes·c; its scale at s0 + s_off(r) + c_scales·c.
  // (kTiled: item (e, tile, k0 / 64) is the warp's first; row r at 512·r,
  // scale row r at 16·r.)
  constexpr int c_bytes = kTiled ? kGateUpTileBytes : 64, c_scales = kTiled ? kGateUpTileScales : 2;
  const size_t row0 = size_t(e) * 2 * I + i0 + g;
  const size_t item0 = (size_t(e) * (I / kTile) + blockIdx.x) * (H * kElemBytes / 64) + k0 * kElemBytes / 64;
  const uint8_t* a0 = kTiled ? w + item0 * kGateUpTileBytes + 16 * lane : w + (row0 * H + k0) * kElemBytes + q * 16;
  const uint8_t* s0 = !kMx8 ? nullptr
                      : kTiled ? p.scales + item0 * kGateUpTileScales + 2 * g + q / 2
                               : p.scales + row0 * (H / kMxBlock) + (k0 + q * C::kLaneElems) / kMxBlock;
  auto r_off = [&](int r) {
    if constexpr (kTiled) return size_t(512) * r;
    else return (size_t(r % 2) * 8 + size_t(r / 2) * I) * H * kElemBytes;
  };
  auto s_off = [&](int r) {
    if constexpr (kTiled) return size_t(16) * r;
    else return (size_t(r % 2) * 8 + size_t(r / 2) * I) * (H / kMxBlock);
  };

  struct Round {
    uint4 a[kR][4];
    uint32_t sc[kR][4];  // raw E8M0 codes: nothing waits on the load until the compute
    uint4 x[kTiles][kR][C::kXLoads];
  };
  // Loads are unconditional (a round past the end re-reads the last one, and a
  // column without a token reads another column's token): a load under a
  // condition makes the compiler merge the buffer's old and new values with
  // register moves, and a move of a register with a load in flight waits for
  // the load, which undoes the double buffering (seen in the SASS stall
  // samples). Columns without a token are never stored.
  auto load_a = [&](Round& rd, int c0) {
#pragma unroll
    for (int u = 0; u < kR; ++u) {
      const int c = min(c0 + u, nc - 1);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        rd.a[u][r] = ld_stream(a0 + r_off(r) + c_bytes * c, pol);
        if constexpr (kMx8) rd.sc[u][r] = ld_byte(s0 + s_off(r) + c_scales * c);
      }
    }
  };
  // xp[tt]: the lane's x row of n8 tile tt.
  auto load_x = [&](Round& rd, int c0, const uint16_t* const* xp) {
#pragma unroll
    for (int tt = 0; tt < kTiles; ++tt)
#pragma unroll
      for (int u = 0; u < kR; ++u)
#pragma unroll
        for (int j = 0; j < C::kXLoads; ++j)
          rd.x[tt][u][j] = ld_cached(xp[tt] + min(c0 + u, nc - 1) * C::kElems + 8 * j);
  };
  // One round's compute is one basic block: the scale path (mma.cuh) is
  // chosen for the whole round with one warp vote.
  auto compute_path = [&](const Round& rd, float (&acc)[kTiles][2][4], auto narrow) {
    [[maybe_unused]] constexpr bool kNarrow = decltype(narrow)::value;
#pragma unroll
    for (int u = 0; u < kR; ++u) {
      uint32_t xw[kTiles][8];
#pragma unroll
      for (int tt = 0; tt < kTiles; ++tt)
#pragma unroll
        for (int j = 0; j < C::kXLoads; ++j) {
          xw[tt][4 * j] = rd.x[tt][u][j].x; xw[tt][4 * j + 1] = rd.x[tt][u][j].y;
          xw[tt][4 * j + 2] = rd.x[tt][u][j].z; xw[tt][4 * j + 3] = rd.x[tt][u][j].w;
        }
      // m-tile 0: gate rows g, g+8; m-tile 1: up rows g, g+8 (decoded one tile at a time).
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t a[2][8];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = 2 * mt + hh;
          if constexpr (kMx8) {
            e4m3x16_to_bf16x8<kNarrow, kTiled>(rd.a[u][r], rd.sc[u][r], a[hh]);
          } else {
            a[hh][0] = rd.a[u][r].x; a[hh][1] = rd.a[u][r].y;
            a[hh][2] = rd.a[u][r].z; a[hh][3] = rd.a[u][r].w;
          }
        }
#pragma unroll
        for (int s = 0; s < C::kSteps; ++s)
#pragma unroll
          for (int tt = 0; tt < kTiles; ++tt)
            mma_bf16(acc[tt][mt], a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], xw[tt][2 * s],
                     xw[tt][2 * s + 1]);
      }
    }
  };
  auto compute = [&](const Round& rd, float (&acc)[kTiles][2][4]) {
    if constexpr (kNarrowOnly) {
      compute_path(rd, acc, std::true_type{});
      return;
    }
    uint32_t mc = 0;
    if constexpr (kMx8) {
#pragma unroll
      for (int u = 0; u < kR; ++u)
#pragma unroll
        for (int r = 0; r < 4; ++r) mc = max(mc, rd.sc[u][r]);
    }
    with_scale_path<kMx8>(mc, [&](auto narrow) { compute_path(rd, acc, narrow); });
  };

  // Two buffers, used alternately (never copied): one round in flight while
  // the other is computed. nc is a multiple of kR (H % 256 == 0; H % 512 == 0 for MXFP8 deep loads).
  Round ra, rb;
  load_a(ra, 0);  // out before the entry list is built: its latency overlaps that work
  allow_next_kernel();
  const int n = collect_entries(p.ids, entries, e, s_list, s_warp_counts);
  if (n == 0) return;  // by_id, MXFP8: no entry routes to expert e (n is the block's)

  // One group of up to 8·kTiles of the expert's tokens: the K loop, then h.
  // ra holds the group's first round of weights when it is called. Lane
  // (g, q) reads x of column g of each n8 tile; a column without a token
  // reads the expert's last one (never stored).
  auto group = [&](int t0) {
    const uint16_t* xp[kTiles];
#pragma unroll
    for (int tt = 0; tt < kTiles; ++tt) {
      const int tb = t0 + kTokens * tt;
      xp[tt] = p.x + size_t(s_list[tb + min(g, n - 1 - tb)] / K) * H + k0 + q * C::kLaneElems;
    }
    load_x(ra, 0, xp);
    float acc[kTiles][2][4] = {};
    for (int c0 = 0;; c0 += 2 * kR) {
      load_a(rb, c0 + kR);
      load_x(rb, c0 + kR, xp);
      compute(ra, acc);
      if (c0 + kR >= nc) break;
      load_a(ra, c0 + 2 * kR);
      load_x(ra, c0 + 2 * kR, xp);
      compute(rb, acc);
      if (c0 + 2 * kR >= nc) break;
    }
    // The four K ranges' partials, summed in warp order.
#pragma unroll
    for (int tt = 0; tt < kTiles; ++tt)
#pragma unroll
      for (int j = 0; j < 8; ++j) s_part[warp][8 * tt + j][lane] = acc[tt][j / 4][j % 4];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int tt = 0; tt < kTiles; ++tt) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          v[j] = s_part[0][8 * tt + j][lane];
#pragma unroll
          for (int s = 1; s < kSlices; ++s) v[j] += s_part[s][8 * tt + j][lane];
        }
        // C fragment: v[c] is row g + 8·(c/2), column 2q + c%2; gate v[0..3], up v[4..7].
        // h is stored split (mma.cuh split_bf16): per entry, I BF16 hi then I BF16 lo.
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int col = t0 + kTokens * tt + 2 * q + c % 2;
          if (col < n) {
            uint16_t* hrow = reinterpret_cast<uint16_t*>(p.h) + size_t(s_list[col]) * 2 * I + i0 + g + 8 * (c / 2);
            split_bf16(silu(v[c]) * v[4 + c], hrow[0], hrow[I]);
          }
        }
      }
    }
    __syncthreads();
  };
  // The first group peeled off: it computes on the loads issued above as
  // they are. A reload of ra under `if (t0 > 0)` made the compiler merge
  // the two versions of ra with register moves, and those moves waited for
  // the first loads to land (13 % of the stall samples, ncu run 5 of v9).
  group(0);
  for (int t0 = kTokens * kTiles; t0 < n; t0 += kTokens * kTiles) {
    load_a(ra, 0);
    group(t0);
  }
}

// Rows by expert id (by_id above) past 2.5 routing entries an expert on
// average (B·K > 2.5E: B ≥ 41 on 128 experts and top-8), first-occurrence
// rows up to there: where many experts have no token, MXFP8's speculative
// first rounds of their blocks cost more than the other rows' id load and
// scan. Measured on an H100 (PERF_LOG session 67), MXFP8 gate_up, first
// occurrence against by id: qwen3-30b-a3b −5.3 / −2.6 / −1.0 / −1.1 / −0.5 /
// −0.1 / +0.5 / +1.6 % at B = 17 / 24 / 32 / 33 / 36 / 40 / 44 / 64;
// qwen3-235b-a22b −1.3 / −1.0 / −0.7 / −0.2 % at B = 33 / 40 / 48 / 64
// (its balance lies later, B ≈ 56-64; one rule kept). BF16 level either way
// from B = 17 (±0.3 %). Not measured on an H200, whose faster HBM may move it.
constexpr int kByIdFromEntriesPerExpertX2 = 5;  // 2.5, doubled to stay integral

template <bool kMx8, bool kDeep, bool kTiled = false>
void launch(const GateUpParams& p, cudaStream_t stream) {
  const int entries = p.batch * p.top_k;
  const int by_id = 2 * entries > kByIdFromEntriesPerExpertX2 * p.experts;
  const dim3 grid(p.intermediate / kTile, by_id ? p.experts : entries);
  const size_t smem = size_t(entries) * sizeof(int32_t);
  // Two-tile passes and five blocks an SM: tiled weights without deep loads
  // (whose rounds already take 168 registers).
  constexpr bool kTiledShallow = kTiled && !kDeep;
  const bool pair = kTiledShallow && p.two_tiles;
  auto* k = &moe_gate_up_tc_kernel<kMx8, kDeep, kTiled>;
  if constexpr (kTiledShallow)
    if (pair) k = &moe_gate_up_tc_kernel<kMx8, kDeep, kTiled, false, 0, 2>;
  if constexpr (kMx8 && (kTiled || !kDeep))
    if (p.scales_narrow) {
      k = &moe_gate_up_tc_kernel<kMx8, kDeep, kTiled, true>;
      if constexpr (kTiledShallow) {
        if (pair) k = &moe_gate_up_tc_kernel<kMx8, kDeep, kTiled, true, 0, 2>;
        else if (long(grid.x) * grid.y >= 4 * resident_blocks(k, kThreads, smem))
          k = &moe_gate_up_tc_kernel<kMx8, kDeep, kTiled, true, 5>;
      }
    }
  ensure_dynamic_smem(k, smem);
  k<<<grid, kThreads, smem, stream>>>(p, by_id);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gate_up_tc_deep_fits(int hidden) { return hidden % (kSlices * 2 * Chunk<true>::kElems) == 0; }

// tc_shape.h's rule is this kernel's: four warps a block, each a quarter of
// H in 64-element steps.
static_assert(kSlices * 64 == kTcHiddenMultiple, "moe_gate_up_tc's H multiple is tc_shape.h's");

void check_moe_gate_up_tc(const GateUpParams& p, WeightFormat format) {
  WD_CHECK(p.batch >= 1, "moe_gate_up_tc: batch = ", p.batch, " must be >= 1");
  WD_CHECK(tensor_core_shape_ok(p.hidden, p.intermediate), "moe_gate_up_tc: H = ", p.hidden, ", I = ",
           p.intermediate, " do not fit the tensor-core kernels (H % 256 == 0, I % 64 == 0); use the scalar kernels "
           "(tensor_cores = false)");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "moe_gate_up_tc: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_gate_up_tc: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(size_t(p.batch) * p.top_k * sizeof(int32_t) <= kMaxSmem, "moe_gate_up_tc: batch ", p.batch,
           " × top-k ", p.top_k, " routing entries do not fit in shared memory");
  WD_CHECK(p.weights && p.x && p.ids && p.h, "moe_gate_up_tc: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || (format == WeightFormat::kMXFP8 && p.scales),
           "moe_gate_up_tc: weights must be BF16, or MXFP8 with scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "moe_gate_up_tc: weights and x must be 16-byte aligned");
}

void moe_gate_up_tc(const GateUpParams& p, WeightFormat format, cudaStream_t stream) {
  check_moe_gate_up_tc(p, format);
  const bool deep = p.deep_loads && gate_up_tc_deep_fits(p.hidden);
  if (format == WeightFormat::kBF16) p.tiled ? launch<false, false, true>(p, stream) : launch<false, false>(p, stream);
  else if (p.tiled) deep ? launch<true, true, true>(p, stream) : launch<true, false, true>(p, stream);
  else if (deep) launch<true, true>(p, stream);
  else launch<true, false>(p, stream);
}

}  // namespace wd::kernels
