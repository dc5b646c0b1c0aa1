// moe_down on the tensor cores: see moe_tc.cuh for the mapping and the
// numerics, mma.cuh for the fragment layout and the K permutation.
#include "kernels/moe_tc.cuh"

#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/down_tc_tiles.h"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/moe_down_store.cuh"
#include "warpdecode/down_tiling.h"

namespace wd::kernels {
namespace {

constexpr int kTile = 16;       // output rows per block
// Tokens per walk over the experts: 64 (one mask word an expert), or
// kMaxGroup (down_tc_tiles.h: two words) past 64 tokens where the shared
// memory allows (group_tokens()). Each group's walk reads the block's
// weights of every expert it routes to once more, from HBM: the block's
// share of all experts (qwen3-30b-a3b MXFP8: 1.5 MB a block, 200 MB in
// all) does not stay in L2 from one walk to the next. A token's column
// sums the same products in the same order in a group of any size, so the
// group size changes no bits.
constexpr int kGroup = 64;
constexpr size_t kMaxSmem = 200 * 1024;  // dynamic shared memory a block may take (moe_down_tc checks)
constexpr int kMaxSlices = 12;  // warps per block
constexpr int kUnit = 64;       // a warp's K range is U units of 64 elements of I
// tc_shape.h's I rule is down_tc_slices() > 0: I a multiple of the unit (any
// such I has a K split, one range at worst); H a multiple of the row tile.
static_assert(kUnit == kTcIntermediateMultiple, "moe_down_tc's unit is tc_shape.h's I multiple");
static_assert(kTcHiddenMultiple % kTile == 0, "tc_shape.h's H multiple holds whole row tiles");
// The warps (H/16 blocks × K ranges) of a grid that an H200 runs in one wave:
// 132 SMs × 12 warps of up to 168 registers. down_tc_slices() gives a warp
// more units of I rather than overflow it: qwen3-235b-a22b 6 K ranges of 4
// units (two 6-warp blocks an SM, 256 blocks in one wave) instead of 12 of
// 2 (one 12-warp block an SM, two waves): layer −7.8 % at B = 1 (MXFP8; down
// −15 %), −1.7 to −4.1 % at B = 2-16, level above; BF16 −3.6 % at B = 1,
// down −2.5 to −9 % at every B (PERF_LOG session 28). A rule of the shape
// alone, so that the bits do not depend on the card (another card runs the
// same grid in more or fewer waves).
constexpr long kDownWaveWarps = 132 * 12;

// One work item of a warp: one unit (16 rows × 64 elements of I) of one
// expert for one n8 tile of its tokens. Per lane: 16 elements of rows g and
// g+8 (BF16: two 16-byte chunks [8q, 8q+8) and [32+8q, 32+8q+8); E4M3: one,
// [16q, 16q+16)) and the same 16 elements of its token's h, hi and lo.
template <bool kMx8>
struct Item {
  static constexpr int kChunks = kMx8 ? 1 : 2;
  uint4 a[2][kChunks];  // [row g / g+8][chunk]
  uint32_t sc[2];       // MXFP8: raw E8M0 codes of the two rows (decoded at use)
  uint4 h[4];           // hi words 0-3, 4-7; lo words 0-3, 4-7 (BF16x2)
  int n;                // tile (an expert and up to 8 of its tokens)
  int u;                // unit
};

// How a walk folds a tile into the warp's accumulators: shared memory, one
// column at a time (a token routed twice to an expert), or registers
// (kRegTok > 0); kWalkSplit: shared memory, from tiles of at most four
// tokens whose lo products sit in the tile's other four columns (below).
enum WalkKind { kWalkShared, kWalkDup, kWalkRegisters, kWalkSplit };

// Floats per row of a warp's shared-memory accumulators for a group of G
// tokens: G tokens and 8 junk columns, rounded up to an odd count, so that
// the fold's 8 rows g of one column fall in 8 banks (an even stride that is
// a multiple of 32 put them in one: an 8-way conflict at G = 24 and 56).
__host__ __device__ constexpr int acc_stride(int G) { return (G + 8) | 1; }

// Token j (< kRegTok) of lane quad q in the register walks: tokens 2q, 2q + 1
// of each octet of the group. kRegTok = 2 is the by-token walk's pair.
__device__ __forceinline__ int lane_token(int q, int j) { return 8 * (j / 2) + 2 * q + j % 2; }

// Element offset (within a unit) of 16-byte h piece m (0, 1) of lane q.
template <bool kMx8>
__host__ __device__ constexpr int h_offset(int q, int m) {
  return kMx8 ? 16 * q + 8 * m : 8 * q + 32 * m;
}

// kTiled: weights (and MXFP8 scales) in the tiled layout of
// warpdecode/down_tiling.h, where a work item's kilobyte (BF16: two
// consecutive kilobytes) is contiguous; the same values reach the same
// registers, so the bits are the same.
// kUnits > 0: the warp's unit count known at compile time (launch: BF16
// with one unit a warp, qwen3-30b-a3b), so that the fold's test and the
// walk's index arithmetic fold away: BF16 down −4 to −7 % (PERF_LOG session
// 16). The same specialisation of the MXFP8 kernel measured 4-12 % slower
// (another ptxas schedule of the decode), so MXFP8 keeps the runtime count,
// except with kNarrowOnly (DownParams::scales_narrow: every code of the
// weights narrow), where every item takes the narrow decode without the
// warp's vote on its codes (the same decode: the same bits): one unit a
// warp measured −1.4 to −2.3 % on down, the runtime count +7 to +9 %
// (qwen3-235b-a22b then with 2 units; PERF_LOG session 16, e7), so
// kUnits = 1 has it in the general walk, kUnits = 2 in the register walks
// (below) only, and kUnits = 4 and 10 in both, with a deeper ring (kRing:
// two units' fixed-count general walk measured +0.2 to +3 % with the ring
// of three, session 27; four and ten units with four, −0.1 to −6 % on the
// layer, session 29).
//
// kRegTok > 0: the warp's accumulators in registers, kRegTok tokens a lane
// (rows g and g + 8 of each), folded with the same FMAs in the same
// (ascending expert) order as the shared-memory accumulators of the general
// walk, so the bits are the same; the fold loses its shared-memory
// read-modify-write, its dependent bookkeeping load and its ordering of
// every tile after the previous one. A batch with a token routed twice to
// one expert takes the duplicate-token walk instead. Launched with one unit
// a warp, and with two, four or ten for MXFP8 with narrow scales (ten: the
// by-token walk only; register_tokens()).
// - kRegTok = 2, the by-token walk (batch <= 8, one group of at most 8
//   tokens): a tile is one expert, its token t in column t itself (not its
//   rank among the expert's tokens), and lane (g, q) owns tokens 2q, 2q + 1:
//   one candidate token a column. Column t ^ 4 holds token t's lo half of h
//   (the same weights times it), so an expert with tokens t and t ^ 4 takes
//   two tiles, one a half of the group (tokens 0-3, 4-7; down_tc_tiles.h).
//   One MMA chain then computes both products, where the other walks run
//   a hi chain and a lo chain over eight columns: half the MMAs and half
//   the h loads an item, the hi + lo sum one shuffle away (lane q ^ 2 holds
//   column t ^ 4). A column's MMA result depends only on its own B column,
//   so its products and sums are the other walks' bit for bit. One
//   block an SM, as the general kernel: ptxas gives the walk 128 (MXFP8,
//   one unit a warp) to 168 registers on sm_90a (session 34); session 26's
//   form (163) measured slower capped at 144.
// - kRegTok = 4, the quad walk (9 <= batch <= 16): token t belongs to
//   lane quad (t / 2) % 4 (lane_token), and an expert's k-th token of quad
//   q (ascending) sits in its tile k / 2, column 2q + k % 2. An expert then
//   takes as many tiles as its fullest quad needs (ceil(count / 2)), not
//   ceil(count / 8): more tiles only where an expert has three tokens in
//   one quad. The fold tests each column's token against the lane's four
//   (predicated FMAs): down −10 to −12 % at B = 12-16. With eight tokens a
//   lane (batch <= 32) the fold's 32 predicated FMAs cost what the
//   registers save: level to +1.6 % at B = 20-32 (PERF_LOG session 27).
//
// kPair = 2, the paired general walk (paired_walk(): tiled MXFP8 with
// narrow scales, 1, 4 or 10 units a warp, at any batch): two
// warps a K slice, the even tiles to the first, the odd to the second, so
// that an SM runs twice the warps at <= 80 registers (a ring of two items)
// instead of up to 168 (24 warps an SM on qwen3-30b-a3b instead of 12). It is
// the split walk (four-token tiles) at every batch, duplicates included,
// and folds into the slice's one set of shared-memory accumulators in tile
// order, in turns (pair_turn below), with the same FMAs as the one-warp
// walks: the same bits, so that a launch may take either walk.
template <bool kMx8, bool kTiled, int kUnits, bool kNarrowOnly = false, int kRegTok = 0, int kPair = 1>
__global__ void __launch_bounds__(kMaxSlices * kWarpSize * kPair, 1)
moe_down_tc_kernel(const __grid_constant__ DownParams p, int units_arg, int group) {
  static_assert(kPair == 1 || (kPair == 2 && kMx8 && kTiled && kRegTok == 0 && kNarrowOnly &&
                                (kUnits == 1 || kUnits == 4 || kUnits == 10)),
                "kPair = 2: tiled MXFP8 weights with narrow scales, 1, 4 or 10 units a warp, the general walk");
  const int units = kUnits > 0 ? kUnits : units_arg;
  // The general walk folds each tile one tile late (below), except in the
  // MXFP8 kernel with the runtime unit count and the per-item scale vote,
  // where it measured +9 to +15 % on down (PERF_LOG session 26).
  constexpr bool kLateFold = !(kMx8 && kUnits == 0);
  const int H = p.hidden, I = p.intermediate, K = p.top_k, E = p.experts;
  const int lane = threadIdx.x % kWarpSize, warp_id = threadIdx.x / kWarpSize;
  const int slices = blockDim.x / kWarpSize / kPair;
  // The warp's K slice, and which of the slice's tiles it walks: n = part,
  // part + kPair, ...
  const int warp = kPair > 1 ? warp_id % slices : warp_id, part = kPair > 1 ? warp_id / slices : 0;
  const int g = lane / 4, q = lane % 4;
  const int d0 = blockIdx.x * kTile;
  const int kw = warp * units * kUnit;  // the warp's K range starts here
  const int G = min(p.batch, group);    // tokens per group
  const int words_a_mask = mask_words(G);  // an expert's token mask: tokens 0-63, then 64-127
  const int ga = acc_stride(G);         // accumulator row: G tokens, 8 junk columns, odd
  const int ne_max = G * K, na_max = min(E, ne_max);
  static_assert(kRegTok == 0 || kRegTok == 2 || kRegTok == 4, "kRegTok: 0, 2 or 4");
  constexpr bool kQuad = kRegTok > 2;
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);
  constexpr int kElemBytes = kMx8 ? 1 : 2;
  const auto* w = static_cast<const uint8_t*>(p.weights);
  // Per expert, lane (g, q) reads row d0 + g (+8) from its K range on: its
  // first byte and first scale in expert 0 (an expert's weights and scales
  // are below 4 GiB: moe_down_tc checks).
  const uint32_t expert_bytes = uint32_t(H) * I * kElemBytes, expert_scales = uint32_t(H) * (I / kMxBlock);
  // Per item (expert e, unit u): + e·expert_bytes + u·unit_bytes; row g + 8
  // at + row8_bytes; likewise for the scales.
  // A unit's chunk c (BF16: c < 2) of rows g, g+8 at + c·chunk_bytes.
  const uint8_t* a_lane;
  const uint8_t* s_lane = nullptr;
  uint32_t unit_bytes, row8_bytes, unit_scales = 0, row8_scales = 0;
  constexpr uint32_t chunk_bytes = kTiled ? kDownTileBytes : 64;
  if constexpr (kTiled) {
    // Items of 64 bytes of 16 rows; a unit is kElemBytes of them.
    const size_t item0 = (size_t(blockIdx.x) * I + kw) * kElemBytes / kUnit;  // item (0, blockIdx.x, kw·bytes / 64)
    a_lane = w + item0 * kDownTileBytes + 16 * lane;
    if constexpr (kMx8) s_lane = p.scales + item0 * kDownTileScales + 2 * g + q / 2;
    unit_bytes = kDownTileBytes * kElemBytes, row8_bytes = 512, unit_scales = kDownTileScales, row8_scales = 16;
  } else {
    a_lane = w + (size_t(d0 + g) * I + kw) * kElemBytes + q * 16;
    if constexpr (kMx8) s_lane = p.scales + size_t(d0 + g) * (I / kMxBlock) + (kw + 16 * q) / kMxBlock;
    unit_bytes = kUnit * kElemBytes, row8_bytes = 8 * I * kElemBytes;
    unit_scales = kUnit / kMxBlock, row8_scales = 8 * (I / kMxBlock);
  }

  // Shared memory (8-byte aligned pieces first): per expert id, the group's
  // tokens routed to it (bit t = token b0 + t; a second word of E masks,
  // tokens 64 on, in groups of more than 64); the warps' accumulators
  // (slices × 16 rows × acc_stride(G): columns G + c are junk, the target of an
  // MMA column c without a token, so that the fold has no branch and no
  // two lanes share an address); the group's expert ids; per
  // distinct expert (ascending id) its token count and first tile. Then the
  // walk's tiles: a tile is one expert and up to 8 of its tokens (ascending),
  // the columns of an n8 MMA tile, or up to 4 and their lo halves (the
  // by-token walk, kWalkSplit); per tile its expert, and per column the
  // entry whose h it reads (those two walks: the half row, 2·entry + lo).
  // Each column's token (G + column: none) and routing weight. The general
  // walks with one unit a warp (a fold every item) keep them first in the
  // block's shared memory, 16-byte aligned, as one 8-byte record a column,
  // so that a fold reads its lane's two adjacent columns with one 16-byte
  // load (col_pair; four 4-byte loads before): qwen3-30b-a3b's MXFP8 down
  // with L2-served weights −2 to −8 % at B = 16-48 on an H100 (PERF_LOG
  // session 65). The other kernels keep them last, t_max × 8 tokens then
  // t_max × 8 weights: the register walks spilled at their 168 registers
  // with the records first (sm_90a), and four units a warp (a fold every
  // fourth item) measured 2 % slower with them. The walk reads one tile's
  // bookkeeping with independent loads, not a chain.
  constexpr bool kColsFirst = kRegTok == 0 && kUnits == 1;
  // The split general walk: tiles of at most four tokens (split_walk; the
  // runtime-count MXFP8 kernel, which folds at once, keeps eight).
  constexpr bool kCanSplit = kMx8 && kRegTok == 0 && kLateFold;
  // The paired walk is the split walk at every batch (the same bits as the
  // eight-token tiles; split_walk()), duplicates included: its registers
  // hold no other walk.
  const bool split_batch = kCanSplit && (kPair > 1 || split_walk(p.batch, kRegTok, kMx8));
  const int t_max = max_tiles(ne_max, na_max, kRegTok, split_batch);
  extern __shared__ __align__(16) unsigned long long s_dyn[];
  // (the records, placed first, take t_max × 8 of its 8-byte words)
  unsigned long long* s_tokmask = kColsFirst ? s_dyn + t_max * 8 : s_dyn;
  float* s_acc = reinterpret_cast<float*>(s_tokmask + words_a_mask * E);
  int* s_ids = reinterpret_cast<int*>(s_acc + slices * kTile * ga);
  int* s_cnt = s_ids + ne_max;             // na_max
  int* s_tfirst = s_cnt + na_max;          // na_max
  int* s_texp = s_tfirst + na_max;         // t_max
  int* s_tent = s_texp + t_max;            // t_max × 8
  // Column `slot`'s token at s_ttok[kColStride·slot], its weight at s_tw[kColStride·slot].
  constexpr int kColStride = kColsFirst ? 2 : 1;
  int* s_ttok = kColsFirst ? reinterpret_cast<int*>(s_dyn) : s_tent + t_max * 8;
  float* s_tw = reinterpret_cast<float*>(kColsFirst ? s_ttok + 1 : s_ttok + t_max * 8);
  __shared__ uint32_t s_bits[kMaxExperts / 32];
  __shared__ int s_wpre[kMaxExperts / 32];
  __shared__ int s_na, s_tiles, s_dup;
  const int words = (E + 31) / 32;

  bool waited = false;
  for (int b0 = 0; b0 < p.batch; b0 += group) {
    const int nb = min(group, p.batch - b0), ne = nb * K;
    // 1. Clear, and read the group's routing.
    if (threadIdx.x == 0) s_dup = 0;
    for (int i = threadIdx.x; i < words; i += blockDim.x) s_bits[i] = 0;
    for (int i = threadIdx.x; i < words_a_mask * E; i += blockDim.x) s_tokmask[i] = 0;
    for (int i = threadIdx.x; i < slices * kTile * ga; i += blockDim.x) s_acc[i] = 0.0f;
    for (int i = threadIdx.x; i < ne; i += blockDim.x) s_ids[i] = __ldg(p.ids + size_t(b0) * K + i);
    // Columns without a token fold into a junk column (weight 0); their h
    // is that of their tile's first column (step 6 writes every column of
    // every tile the walk reads), so that the warp's h loads of a sparse
    // tile touch the lines of one entry, not of eight.
    for (int i = threadIdx.x; i < t_max * 8; i += blockDim.x) {
      s_ttok[kColStride * i] = G + i % 8;
      s_tw[kColStride * i] = 0.0f;
    }
    __syncthreads();
    // 2. Which experts, and which tokens of each.
    for (int i = threadIdx.x; i < ne; i += blockDim.x) {
      const int e = s_ids[i];
      atomicOr(&s_bits[e >> 5], 1u << (e & 31));
      const int t = i / K;
      const unsigned long long bit = 1ull << (t % 64);
      if (atomicOr(&s_tokmask[(t / 64) * E + e], bit) & bit) s_dup = 1;  // a token routed twice to e
    }
    __syncthreads();
    // A token routed twice to one expert (no router does that, but a caller's
    // routing may) breaks "one entry per token and expert": then counts and
    // positions come from a plain scan of the group's entries (slow, exact).
    const bool dup = s_dup != 0;
    // 3. Rank of each expert word (exclusive popcount prefix).
    if (warp == 0) {
      const int c = lane < words ? __popc(s_bits[lane]) : 0;
      const int incl = warp_inclusive_sum(c, lane);
      if (lane < words) s_wpre[lane] = incl - c;
      if (lane == kWarpSize - 1) s_na = incl;
    }
    __syncthreads();
    auto rank = [&](int e) { return s_wpre[e >> 5] + __popc(s_bits[e >> 5] & ((1u << (e & 31)) - 1u)); };
    // The quad walk without duplicates: tiles by lane quad (above); the
    // by-token walk: a tile an expert (two with a pair t, t ^ 4), column = token.
    const bool quad = kQuad && !dup;
    const bool by_token = kRegTok == 2 && !dup;
    const bool split = split_batch && (kPair > 1 || !dup);
    // 4. The distinct experts in ascending id, with their token counts (the
    // quad and by-token walks: their tile counts).
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (s_bits[e >> 5] >> (e & 31) & 1u) {
        const int j = rank(e);
        int cnt = 0;
        if (quad) {
          cnt = quad_tiles(s_tokmask[e]);
        } else if (by_token) {
          cnt = by_token_tiles(s_tokmask[e]);
        } else if (dup) {
          for (int i = 0; i < ne; ++i) cnt += s_ids[i] == e;
        } else {
          cnt = popcount64(s_tokmask[e]) + (words_a_mask > 1 ? popcount64(s_tokmask[E + e]) : 0);
        }
        s_cnt[j] = cnt;
      }
    __syncthreads();
    // 5. Each expert's first tile (exclusive prefix of its tiles: ceil(count
    // / 8), the split walk ceil(count / 4), the quad and by-token walks s_cnt).
    const int na = s_na;
    if (warp == 0) {
      int carry = 0;
      for (int base = 0; base < na; base += kWarpSize) {
        const int c = base + lane < na ? (quad || by_token ? s_cnt[base + lane]
                                          : split      ? ranked_tiles(s_cnt[base + lane], 4)
                                                       : ranked_tiles(s_cnt[base + lane], 8))
                                       : 0;
        const int incl = warp_inclusive_sum(c, lane);
        if (base + lane < na) s_tfirst[base + lane] = carry + incl - c;
        carry += __shfl_sync(kFullMask, incl, kWarpSize - 1);
      }
      if (lane == 0) s_tiles = carry;
    }
    __syncthreads();
    // 6. Each entry into its tile and column: its position among the expert's
    // entries (ascending token), 8 per tile.
    if (quad) {
      // The expert's lowest token claims its tiles; every column reads its
      // h until an entry takes the column (after the barrier).
      for (int i = threadIdx.x; i < ne; i += blockDim.x) {
        const int e = s_ids[i], t = i / K;
        if (s_tokmask[e] & ((1ull << t) - 1ull)) continue;
        const int j = rank(e);
        for (int n = s_tfirst[j]; n < s_tfirst[j] + s_cnt[j]; ++n) {
          s_texp[n] = e;
          for (int c = 0; c < 8; ++c) s_tent[n * 8 + c] = i;
        }
      }
      __syncthreads();
    }
    for (int i = threadIdx.x; i < ne && quad; i += blockDim.x) {
      const int e = s_ids[i], t = i / K;
      const TileSlot ts = quad_slot(s_tokmask, e, t);
      const int slot = (s_tfirst[rank(e)] + ts.tile()) * 8 + ts.col();
      s_tent[slot] = i;
      s_ttok[kColStride * slot] = t;
      s_tw[kColStride * slot] = __ldg(p.route_w + size_t(b0) * K + i);
    }
    // The by-token and split walks: their h entries count half rows (2i:
    // entry i's hi, 2i + 1: its lo; load_h); column a of tile n reads entry
    // i's hi, column b its lo.
    auto put_halves = [&](int n, int a, int b, int i) {
      s_tent[n * 8 + a] = 2 * i;
      s_tent[n * 8 + b] = 2 * i + 1;
    };
    for (int i = threadIdx.x; i < ne && by_token; i += blockDim.x) {
      const int e = s_ids[i], t = i / K;
      const unsigned long long tile_mask = by_token_tile_mask(s_tokmask[e], t);
      const int n = s_tfirst[rank(e)] + by_token_tile(s_tokmask[e], t);
      if (!(tile_mask & ((1ull << t) - 1ull))) {  // the tile's lowest token: its expert, the unused column pairs
        s_texp[n] = e;
        for (int c = 0; c < 4; ++c)
          if (!(tile_mask >> c & 1ull) && !(tile_mask >> (c + 4) & 1ull)) put_halves(n, c, c + 4, i);
      }
      put_halves(n, t, t ^ 4, i);
      s_ttok[kColStride * (n * 8 + t)] = t;
      s_tw[kColStride * (n * 8 + t)] = __ldg(p.route_w + size_t(b0) * K + i);
    }
    // The split walk.
    for (int i = threadIdx.x; i < ne && split; i += blockDim.x) {
      const int e = s_ids[i], t = i / K;
      int pos;
      if constexpr (kPair > 1) {
        // Any group size, and duplicates: positions as the general walk's.
        pos = tokens_below(s_tokmask[e], words_a_mask > 1 ? s_tokmask[E + e] : 0ull, t);
        if (dup) {
          pos = 0;
          for (int m = 0; m < i; ++m) pos += s_ids[m] == e;
        }
      } else {
        pos = tokens_below(s_tokmask[e], t);
      }
      const TileSlot ts = ranked_slot(pos, 4);
      const int j = rank(e), n = s_tfirst[j] + ts.tile(), slot = n * 8 + ts.col();
      if (pos % 4 == 0) {
        s_texp[n] = e;
        for (int c = min(4, s_cnt[j] - pos); c < 4; ++c) put_halves(n, c, c + 4, i);
      }
      put_halves(n, ts.col(), ts.col() + 4, i);
      s_ttok[kColStride * slot] = t;
      s_tw[kColStride * slot] = __ldg(p.route_w + size_t(b0) * K + i);
    }
    for (int i = threadIdx.x; i < ne && !quad && !by_token && !split; i += blockDim.x) {
      const int e = s_ids[i], t = i / K;
      int pos = tokens_below(s_tokmask[e], words_a_mask > 1 ? s_tokmask[E + e] : 0ull, t);
      if (dup) {
        pos = 0;
        for (int m = 0; m < i; ++m) pos += s_ids[m] == e;
      }
      const TileSlot ts = ranked_slot(pos, 8);
      const int j = rank(e), n = s_tfirst[j] + ts.tile(), slot = n * 8 + ts.col();
      if (pos % 8 == 0) {
        s_texp[n] = e;
        for (int c = min(8, s_cnt[j] - pos); c < 8; ++c) s_tent[n * 8 + c] = i;
      }
      s_tent[slot] = i;
      s_ttok[kColStride * slot] = t;
      s_tw[kColStride * slot] = __ldg(p.route_w + size_t(b0) * K + i);
    }
    __syncthreads();

    // The warp's walk: items (tile n, unit u) in order, two in flight ahead
    // of the one being computed (the paired walk: its own tiles, one ahead).
    const int tiles = s_tiles;
    const int items = (kPair == 1 ? tiles : tiles > part ? (tiles - part + kPair - 1) / kPair : 0) * units;
    int ln = kPair > 1 ? min(part, tiles - 1) : 0, lu = 0;  // the next item to load
    auto advance = [&]() {
      if (++lu == units) {
        lu = 0;
        ln = min(ln + kPair, tiles - 1);  // past the last item: stays there (loads of it are dummies)
      }
    };
    // Loads are unconditional: past the last item they re-read the last
    // expert, and a column without a token reads another column's token (its
    // products land in a column that is never folded). A load under a
    // condition makes the compiler merge the buffer's old and new values with
    // register moves, and a move of a register with a load in flight waits
    // for the load, which undoes the pipelining (seen in the SASS stall
    // samples).
    auto load_a = [&](Item<kMx8>& it) {
      it.n = ln;
      it.u = lu;
      const uint32_t e = s_texp[ln];
      const uint8_t* a = a_lane + uint64_t(e) * expert_bytes + lu * unit_bytes;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int c = 0; c < Item<kMx8>::kChunks; ++c)
          it.a[hh][c] = ld_stream(a + hh * row8_bytes + chunk_bytes * c, pol);
      if constexpr (kMx8) {
        const uint8_t* sc = s_lane + uint64_t(e) * expert_scales + lu * unit_scales;
        it.sc[0] = ld_byte(sc);
        it.sc[1] = ld_byte(sc + row8_scales);
      }
    };
    // h rows: per entry, I BF16 hi then I BF16 lo (moe_gate_up_tc).
    // The lane's first h bytes of entry 0 of the group (hi; lo 2I bytes on);
    // an entry's offset from there is a 32-bit product, its second piece an
    // immediate: a few integer instructions an item where 64-bit element
    // arithmetic per load took about twenty (SASS, PERF_LOG session 31:
    // down −4 to −7 % in the register walks and with four or ten units).
    // Not in the one-unit general walk (qwen3-30b-a3b above B = 16), where
    // ptxas scheduled the shorter form slower (down +1 to +4.5 % at B =
    // 24-64, session 31 run 6): it keeps the element arithmetic.
    constexpr bool kByteOffsets = !(kUnits == 1 && kRegTok == 0);
    const uint16_t* hs = reinterpret_cast<const uint16_t*>(p.h) + size_t(b0) * K * 2 * I;
    const uint8_t* h_lane = reinterpret_cast<const uint8_t*>(hs + kw + h_offset<kMx8>(q, 0));
    const uint32_t h_entry_bytes = 4u * uint32_t(I), h_lo_bytes = 2u * uint32_t(I);
    constexpr int kHPiece = 2 * (h_offset<kMx8>(0, 1) - h_offset<kMx8>(0, 0));  // bytes from piece 0 to 1
    // The walks with hi and lo in one tile (kSplit: the by-token walk and
    // kWalkSplit) load the lane's column's half row: 2I bytes an s_tent
    // step, hi or lo as step 6 chose, two pieces.
    auto load_h = [&](Item<kMx8>& it, auto walk_kind) {
      constexpr bool kSplit = (kRegTok == 2 && decltype(walk_kind)::value == kWalkRegisters) ||
                              decltype(walk_kind)::value == kWalkSplit;
      if constexpr (kSplit) {
        const uint8_t* hp = h_lane + (uint32_t(s_tent[it.n * 8 + g]) * h_lo_bytes + uint32_t(it.u) * (2 * kUnit));
        it.h[0] = ld_cached(hp);
        it.h[1] = ld_cached(hp + kHPiece);
      } else if constexpr (kByteOffsets) {
        const uint8_t* hp = h_lane + (uint32_t(s_tent[it.n * 8 + g]) * h_entry_bytes + uint32_t(it.u) * (2 * kUnit));
        const uint8_t* lp = hp + h_lo_bytes;
        it.h[0] = ld_cached(hp);
        it.h[1] = ld_cached(hp + kHPiece);
        it.h[2] = ld_cached(lp);
        it.h[3] = ld_cached(lp + kHPiece);
      } else {
        const uint16_t* hp = hs + s_tent[it.n * 8 + g] * 2 * I + kw + it.u * kUnit;
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          it.h[m] = ld_cached(hp + h_offset<kMx8>(q, m));
          it.h[2 + m] = ld_cached(hp + I + h_offset<kMx8>(q, m));
        }
      }
    };
    // Two accumulators, the hi and the lo products: two independent MMA
    // chains, summed (hi + lo) once per tile. One item's compute is one
    // basic block (no branch inside but the fold's tests of u, which fold
    // away with one unit a warp): the scale path is chosen per item
    // (scales_narrow), the duplicate-token fold per walk, and empty columns
    // fold into junk columns.
    float tile[4] = {0.f, 0.f, 0.f, 0.f}, tile_lo[4] = {0.f, 0.f, 0.f, 0.f};
    // The register walks' accumulators: rows g, g + 8 of the lane's tokens lane_token(q, j).
    constexpr int kRegs = kRegTok > 0 ? kRegTok : 1;
    float racc[2][kRegs];
#pragma unroll
    for (int j = 0; j < kRegs; ++j) racc[0][j] = racc[1][j] = 0.0f;
    // The general walk's pending tile: tile + tile_lo of tile pn, not yet
    // folded. Before the first tile, zeros "of tile 0": acc (+0) + w·0 = +0,
    // the accumulators unchanged. The paired walk: none (-1), since every
    // fold takes a turn of the pair (pair_turn).
    int pn = kPair > 1 ? -1 : 0;
    // A tile column's token and routing weight: column `slot` alone (the
    // weight read first, as these kernels always did, so that the register
    // walks' machine code stays the same), or columns 2j and 2j + 1 of tile n
    // at once (col_pair: one 16-byte load; only where the records come
    // first, kColsFirst, and called nowhere else).
    struct Col {
      int tok;
      float w;
    };
    struct ColPair {
      Col c[2];
    };
    auto col = [&](int slot) {
      const float w = s_tw[kColStride * slot];
      return Col{s_ttok[kColStride * slot], w};
    };
    auto col_pair = [&](int n, int j) {
      const int4 c = reinterpret_cast<const int4*>(s_ttok)[n * 4 + j];
      return ColPair{{{c.x, __int_as_float(c.y)}, {c.z, __int_as_float(c.w)}}};
    };
    // The warp's accumulator of row `row` for token `tok` (a column without
    // a token: a junk accumulator).
    auto acc_at = [&](int row, int tok) { return s_acc + (warp * kTile + row) * ga + tok; };
    // acc[row][token] += w · v for rows g, g + 8 of the token in column
    // 2q + cc of a tile, whose token and weight are c. The C fragment of a
    // tile: c is row g + 8·(c/2), column 2q + c%2.
    auto fold_shared = [&](const Col& c, int cc, auto v) {
      float* acc = acc_at(g, c.tok);
      acc[0] = __fmaf_rn(c.w, v(cc), acc[0]);
      acc[8 * ga] = __fmaf_rn(c.w, v(2 + cc), acc[8 * ga]);
    };
    // Tile n's columns 2q, 2q + 1, each as fold_shared.
    auto fold_both = [&](int n, auto v) {
      if constexpr (kColsFirst) {
        const ColPair cp = col_pair(n, q);
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) fold_shared(cp.c[cc], cc, v);
      } else {
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) fold_shared(col(n * 8 + 2 * q + cc), cc, v);
      }
    };
    auto fold_pending = [&]() { fold_both(pn, [&](int c) { return tile[c] + tile_lo[c]; }); };
    // The walks with hi and lo in one tile: column x's hi + column x ^ 4's lo
    // (lane q ^ 2), the same sum as tile + tile_lo. All lanes call it.
    auto hi_plus_lo = [&](int c) { return tile[c] + __shfl_xor_sync(kFullMask, tile[c], 2); };
    // The paired walk's turns: tile n's fold runs between the pair's
    // barriers n and n + 1 (named barrier 1 + warp, both warps), so that
    // folds run in tile order, n after n - 1, and a warp's fold of tile n
    // waits only for its partner's fold of n - 1. Each warp runs its own
    // tiles' turns and, to pair every barrier, one more: the second warp's
    // barrier 0 before its walk, the first warp's barrier 2R after it, and an
    // empty turn for a tile past the last (R = ceil(tiles / 2) turns each).
    auto pair_barrier = [&]() {
      if constexpr (kPair > 1) named_barrier_sync(1 + warp, kPair * kWarpSize);
    };
    auto pair_turn = [&](auto fold_it) {
      pair_barrier();
      fold_it();
      __syncwarp();  // a token's column, hence its lane, may differ in the next tile
      pair_barrier();
    };
    // The split walk's pending fold. Lanes q and q ^ 2 hold the same sums
    // of columns 2(q & 1) + cc, rows g and g + 8 (hi + lo and lo + hi: the
    // same bits), so lanes q < 2 fold row g and lanes q >= 2 row g + 8: two
    // read-modify-writes a lane, every lane on a real column (where the
    // tile has a token), instead of four with half the lanes on junk
    // columns (kHalfRows). Not in the paired walk with four or ten units a
    // warp, where ptxas then spills 8 bytes at its 80 registers.
    constexpr bool kHalfRows = kPair == 1 || kUnits == 1;
    auto fold_pending_split = [&]() {
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] = hi_plus_lo(c);
      if (kPair > 1 && dup) {
        // Two of the tile's columns may be one token: one column at a time
        // (the hi columns 0-3, lanes q = 0, 1), in the duplicate walk's order.
        for (int c = 0; c < 4; ++c) {
          if (q == c / 2) fold_shared(col(pn * 8 + 2 * q + c % 2), c % 2, [&](int i) { return v[i]; });
          __syncwarp();
        }
        return;
      }
      if constexpr (!kHalfRows) {
        fold_both(pn, [&](int c) { return v[c]; });
        return;
      }
      const bool row8 = q >= 2;
      ColPair cp{};
      if constexpr (kColsFirst) cp = col_pair(pn, q & 1);
#pragma unroll
      for (int cc = 0; cc < 2; ++cc) {
        // Without the records first: the token read before the weight, as
        // before (the four- and ten-unit kernels' machine code unchanged).
        const int slot = kColStride * (pn * 8 + 2 * (q & 1) + cc);
        float* acc = acc_at(g + (row8 ? 8 : 0), kColsFirst ? cp.c[cc].tok : s_ttok[slot]);
        // (v: a select, not a runtime index, which would put v in local memory)
        *acc = __fmaf_rn(kColsFirst ? cp.c[cc].w : s_tw[slot], row8 ? v[2 + cc] : v[cc], *acc);
      }
    };
    auto compute = [&](const Item<kMx8>& it, auto narrow, auto walk_kind) {
      [[maybe_unused]] constexpr bool kNarrow = decltype(narrow)::value;
      constexpr bool kDup = decltype(walk_kind)::value == kWalkDup;
      constexpr bool kRegisters = decltype(walk_kind)::value == kWalkRegisters;
      constexpr bool kSplitShared = decltype(walk_kind)::value == kWalkSplit;
      constexpr bool kSplit = (kRegisters && kRegTok == 2) || kSplitShared;  // hi and lo in one chain's columns
      const bool first = it.u == 0;
      if constexpr (!kDup && !kRegisters && kLateFold) {
        // The general walk folds each tile one tile late: at the first item
        // of the next tile, before its MMAs reuse the accumulators, so that
        // the fold's FMAs read MMA results issued a step earlier instead of
        // waiting for the tile's own MMA chains. The same FMAs in the same
        // order, so the same bits (PERF_LOG session 26: down −1 to −5 %).
        if constexpr (kPair > 1) {
          // The paired walk has no zero tile pending before its first.
          if (first && pn >= 0) pair_turn(fold_pending_split);
        } else if (first) {
          if constexpr (kSplitShared) fold_pending_split();
          else fold_pending();
          __syncwarp();  // a token's column, hence its lane, may differ in the next tile
        }
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        tile[c] = first ? 0.0f : tile[c];
        tile_lo[c] = first ? 0.0f : tile_lo[c];
      }
      // The tiled copy's packed words on the narrow path are decoded a k16
      // step at a time in the MMA loop (a step's two words of a row are
      // one packed word): decoded all up front, as the other paths are,
      // sm_90a's ptxas spilled 4-12 bytes in the four-unit register walks,
      // and sm_100a's spills 4 bytes in the four-unit quad walk the other way.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
      constexpr bool kStepDecode = false;
#else
      constexpr bool kStepDecode = kMx8 && kTiled && kNarrow;
#endif
      uint32_t a[2][8];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        if constexpr (!kMx8) {
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            a[hh][4 * c] = it.a[hh][c].x; a[hh][4 * c + 1] = it.a[hh][c].y;
            a[hh][4 * c + 2] = it.a[hh][c].z; a[hh][4 * c + 3] = it.a[hh][c].w;
          }
        } else if constexpr (!kStepDecode) {
          e4m3x16_to_bf16x8<kNarrow, kTiled>(it.a[hh][0], it.sc[hh], a[hh]);
        }
      }
      const uint32_t hi[8] = {it.h[0].x, it.h[0].y, it.h[0].z, it.h[0].w, it.h[1].x, it.h[1].y, it.h[1].z, it.h[1].w};
      const uint32_t lo[8] = {it.h[2].x, it.h[2].y, it.h[2].z, it.h[2].w, it.h[3].x, it.h[3].y, it.h[3].z, it.h[3].w};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        if constexpr (kStepDecode) {
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const uint4& v = it.a[hh][0];
            packed_e4m3x4_to_bf16x2x2(s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w, it.sc[hh], a[hh][2 * s],
                                      a[hh][2 * s + 1]);
          }
        }
        mma_bf16(tile, a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], hi[2 * s], hi[2 * s + 1]);
        if constexpr (!kSplit)
          mma_bf16(tile_lo, a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], lo[2 * s], lo[2 * s + 1]);
      }
      if (it.u == units - 1) {
        if constexpr (kSplit && !kSplitShared) {
#pragma unroll
          for (int c = 0; c < 4; ++c) tile[c] = hi_plus_lo(c);
        } else if constexpr (kRegisters || kDup || !kLateFold) {
#pragma unroll
          for (int c = 0; c < 4; ++c) tile[c] += tile_lo[c];
        }
        auto this_tile = [&](int c) { return tile[c]; };
        if constexpr (kRegisters) {
          // Column 2q + cc holds one of the lane's tokens or none (token G +
          // column). The by-token walk: token 2q + cc (j = cc) or none.
#pragma unroll
          for (int cc = 0; cc < 2; ++cc) {
            const Col c = col(it.n * 8 + 2 * q + cc);
            const float rw = c.w;
            const int tok = c.tok;
#pragma unroll
            for (int j = 0; j < kRegTok; ++j)
              if ((kRegTok > 2 || j == cc) && tok == lane_token(q, j)) {
                racc[0][j] = __fmaf_rn(rw, tile[cc], racc[0][j]);
                racc[1][j] = __fmaf_rn(rw, tile[2 + cc], racc[1][j]);
              }
          }
        } else if constexpr (!kDup && kLateFold) {
          pn = it.n;  // folded at the next tile's first item (or after the walk)
        } else if constexpr (!kDup) {
          fold_both(it.n, this_tile);  // 8 distinct tokens or junk columns: no two lanes share an accumulator
          __syncwarp();  // a token's column, hence its lane, may differ in the next tile
        } else {
          for (int c = 0; c < 8; ++c) {  // two columns may be one token: one column at a time
            if (q == c / 2) fold_shared(col(it.n * 8 + 2 * q + c % 2), c % 2, this_tile);
            __syncwarp();
          }
        }
      }
    };
    // The ring: kRing items, the weights of kRing - 1 items ahead of the
    // one computed in flight. Four with four units a warp or more (the
    // fixed-count MXFP8 kernels: 150-160 registers then, 164-168 on sm_90a
    // in session 34), whose chain is 4 × 8 items or more at B = 1: three in
    // flight instead of two took qwen3-235b-a22b's down −7 to −12 % at B =
    // 1-16 (register walks, h still one ahead) and −10 to −14 % at B = 24-64
    // (general walk, h as deep as the weights); five, at the 168-register
    // cap, lost it. With one unit a warp (qwen3-30b-a3b, 159 registers) a
    // fourth was level to +3 % on down (PERF_LOG session 29). The paired
    // walk: two, within its 80 registers (a third spills 68 bytes).
    constexpr int kRing = kPair > 1 ? 2 : kUnits >= 4 ? 4 : 3;
    // One step of the walk: the loads of the item kRing - 1 ahead, then the
    // compute of this one.
    // The register walks load h one item ahead (next), not as far as the
    // weights (ahead): h comes from L2, one item's compute covers its
    // latency, and the ring holds two items' h, not kRing (the by-token
    // walk: a quarter of its gain, PERF_LOG session 26).
    auto step = [&](const Item<kMx8>& cur, Item<kMx8>& next, Item<kMx8>& ahead, auto walk_kind) {
      load_a(ahead);
      if constexpr (decltype(walk_kind)::value == kWalkRegisters) load_h(next, walk_kind);
      else load_h(ahead, walk_kind);
      advance();
      if constexpr (kNarrowOnly)
        compute(cur, std::true_type{}, walk_kind);
      else
        with_scale_path<kMx8>(kMx8 ? max(cur.sc[0], cur.sc[1]) : 0u,
                              [&](auto narrow) { compute(cur, narrow, walk_kind); });
    };

    // The ring's positions are compile-time constants (for_each_index), so
    // that the buffers stay registers and every step is written out as if
    // by hand.
    Item<kMx8> buf[kRing];
    auto ring_step = [&](auto i, auto walk_kind) {
      constexpr int j = decltype(i)::value;
      step(buf[j], buf[(j + 1) % kRing], buf[(j + kRing - 1) % kRing], walk_kind);
    };
    for_each_index<kRing - 1>([&](auto i) {
      load_a(buf[decltype(i)::value]);
      advance();
    });
    // Everything above reads routing and weights only; h is moe_gate_up's output.
    if (!waited) {
      if (p.programmatic_launch) wait_for_previous_kernel();
      allow_next_kernel();  // the next layer's router streams its weights while this layer ends
    }
    waited = true;
    const bool registers = kRegTok > 0 && !dup;
    using Shared = std::integral_constant<int, kWalkShared>;
    using Split = std::integral_constant<int, kWalkSplit>;
    if (kCanSplit && split) {
      for_each_index<kRing - 1>([&](auto i) { load_h(buf[decltype(i)::value], Split{}); });
    } else {
      if (kRegTok == 2 && registers)
        load_h(buf[0], std::integral_constant<int, kWalkRegisters>{});
      else
        load_h(buf[0], Shared{});
      if (!registers)
        for_each_index<kRing - 1>([&](auto i) {
          if constexpr (decltype(i)::value > 0) load_h(buf[decltype(i)::value], Shared{});
        });
    }
    // Items kRing at a time (a turn of the ring), then the last kRing - 1 or
    // fewer: no bounds test inside a turn.
    auto walk = [&](auto walk_kind) {
      int n = 0;
      for (; n + kRing <= items; n += kRing) for_each_index<kRing>([&](auto i) { ring_step(i, walk_kind); });
      for_each_index<kRing - 1>([&](auto i) {
        if (n + decltype(i)::value < items) ring_step(i, walk_kind);
      });
    };
    // The paired walk's unpaired barriers (pair_turn): the second warp's
    // first; after the walk, an empty turn where the warp had a tile fewer,
    // then the first warp's last.
    const int pair_turns = (tiles + kPair - 1) / kPair;
    if (kPair > 1 && part == 1) pair_barrier();
    if (kPair == 1 && dup) {
      if constexpr (kPair == 1) walk(std::integral_constant<int, kWalkDup>{});  // the paired walk: split, below
    } else if (registers) {
      walk(std::integral_constant<int, kWalkRegisters>{});
#pragma unroll
      for (int j = 0; j < kRegs; ++j)
        if (const int t = lane_token(q, j); t < nb) {
          s_acc[(warp * kTile + g) * ga + t] = racc[0][j];
          s_acc[(warp * kTile + g + 8) * ga + t] = racc[1][j];
        }
    } else if (kCanSplit && split) {
      if constexpr (kCanSplit) {
        walk(Split{});
        if constexpr (kPair > 1) {
          if (pn >= 0) pair_turn(fold_pending_split);
        } else {
          fold_pending_split();
        }
      }
    } else if constexpr (kPair == 1) {
      walk(Shared{});
      if constexpr (kLateFold) fold_pending();
    }
    if constexpr (kPair > 1) {
      if (items / units < pair_turns) pair_turn([] {});
      if (part == 0) pair_barrier();
    }
    __syncthreads();

    // The warps' accumulators summed in warp order; then the residual.
    for (int o = threadIdx.x; o < kTile * nb; o += blockDim.x) {
      const int row = o / nb, t = o % nb;
      float v = s_acc[row * ga + t];
      for (int s = 1; s < slices; ++s) v += s_acc[(s * kTile + row) * ga + t];
      store_down_output(p, size_t(b0 + t) * H + d0 + row, v);
    }
    __syncthreads();
  }
}

// The unit counts a warp walks with the count fixed at compile time (the
// fixed-count kernels): one (BF16, and MXFP8 with narrow scales), and two,
// four and ten (MXFP8 with narrow scales only). One unit (qwen3-30b-a3b)
// folds the walk's test and index arithmetic away (BF16 down −4 to −7 %,
// session 16); two, four and ten are qwen3-235b-a22b's earlier 12 ranges of
// 2, its 6 of 4 and qwen3-coder-480b-a35b's 4 of 10: with the register
// walks, layer −1.4 to −2.9 % / −1.7 to −2.8 % / −1.1 to −3.4 % at B = 1-16,
// where the runtime count's kernel measured +4-5 % on down with the by-token
// walk (PERF_LOG sessions 26-29). Other counts take the runtime count's
// general walk. register_tokens() and launch() both follow this list.
constexpr int kFixedCounts[] = {1, 2, 4, 10};
constexpr int kNumFixedCounts = int(sizeof(kFixedCounts) / sizeof(kFixedCounts[0]));
constexpr bool fixed_count(int units, bool mx8) {
  for (int c : kFixedCounts)
    if (c == units && (mx8 || c == 1)) return true;
  return false;
}

// The register walk a launch takes: kRegTok of moe_down_tc_kernel (2 up to
// B = 8, 4 up to 16), or 0: the general walk, also wherever the unit count
// is not fixed_count() and for MXFP8 weights without narrow scales (the
// runtime-count kernel). With ten units a warp (qwen3-coder-480b-a35b) the
// MXFP8 general walk of four-token tiles beats both register walks from B =
// 5: layer −1.0 to −3.2 % at B = 5-16, where one and four units a warp
// lose 6-8 % / level (PERF_LOG session 32). The shared memory a launch asks
// for follows (smem_bytes: the walk's tile bound).
int register_tokens(const DownParams& p, int units, bool mx8) {
  if ((mx8 && !p.scales_narrow) || !fixed_count(units, mx8)) return 0;
  if (mx8 && units >= 10 && p.batch > 4) return 0;
  return p.batch <= 8 ? 2 : p.batch <= 16 ? 4 : 0;
}

// Whether a launch takes the paired general walk (kPair = 2): asked for,
// tiled MXFP8 weights with narrow scales, and a unit count with a
// fixed-count general walk of its own (1, 4, 10: kFixedCounts but two, whose
// general walk is the runtime count's). At any batch: where the register
// walks would run (B <= 16), the paired walk then runs instead (the same
// bits). BF16's general walk, eight-token tiles with hi and lo chains,
// spills at the paired walk's 80 registers.
constexpr bool paired_units(int units) { return units == 1 || units == 4 || units == 10; }
bool paired_walk(const DownParams& p, int units, bool mx8) {
  return p.pair_warps && p.tiled && mx8 && p.scales_narrow && paired_units(units);
}

size_t smem_bytes(const DownParams& p, int slices, int reg_tok, bool mx8, int group, bool paired) {
  const bool split = paired || split_walk(p.batch, reg_tok, mx8);
  const int G = p.batch < group ? p.batch : group, ne = G * p.top_k;
  const int na = p.experts < ne ? p.experts : ne;
  // Masks, accumulators, ids, counts and first tiles, then per tile its expert and 8 × (entry, token, weight)
  // (the one-unit general walks: the (token, weight) records first).
  return size_t(p.experts) * 8 * mask_words(G) + size_t(slices) * kTile * acc_stride(G) * 4 + size_t(ne) * 4 +
         size_t(na) * 8 + size_t(max_tiles(ne, na, reg_tok, split)) * (4 + 8 * 12);
}

// Tokens a walk takes (kGroup above): kMaxGroup past 64 tokens where its
// shared memory fits (the register and split walks take at most 32 tokens,
// one group either way). Measured (PERF_LOG session 49 run 5, tiled-only,
// against groups of 64): layer −15 to −20 % at B = 96, −11 to −17 % at 128
// and 256 (down −22 to −42 %); B = 64 level.
int group_tokens(const DownParams& p, int slices, int reg_tok, bool mx8, bool paired) {
  return p.batch > kGroup && smem_bytes(p, slices, reg_tok, mx8, kMaxGroup, paired) <= kMaxSmem ? kMaxGroup : kGroup;
}

// kUnits units a warp (fixed_count): the register walk reg_tok, or the
// general walk (0). MXFP8's fixed-count kernels are its narrow-scale ones.
// Two units keep the runtime count's general walk: their fixed-count one
// measured +0.2 to +3 % with the ring of three (session 27). Ten units have
// no quad walk (register_tokens()).
template <bool kMx8, bool kTiled, int kUnits>
auto* fixed_units_general() {
  if constexpr (kUnits == 2) return &moe_down_tc_kernel<kMx8, kTiled, 0>;
  else return &moe_down_tc_kernel<kMx8, kTiled, kUnits, kMx8, 0>;
}
template <bool kMx8, bool kTiled, int kUnits>
auto* fixed_units_kernel(int reg_tok) {
  switch (reg_tok) {
    case 2: return &moe_down_tc_kernel<kMx8, kTiled, kUnits, kMx8, 2>;
    case 4:
      if constexpr (kUnits != 10) return &moe_down_tc_kernel<kMx8, kTiled, kUnits, kMx8, 4>;
      else return fixed_units_general<kMx8, kTiled, kUnits>();
    default: return fixed_units_general<kMx8, kTiled, kUnits>();
  }
}

// slices: down_tc_slices(H, I); reg_tok: register_tokens(); paired:
// paired_walk(); group: group_tokens(); smem: smem_bytes() (moe_down_tc
// checked it).
template <bool kMx8, bool kTiled>
void launch(const DownParams& p, int slices, int reg_tok, bool paired, int group, size_t smem, cudaStream_t stream) {
  const int units = p.intermediate / kUnit / slices;
  auto* k = &moe_down_tc_kernel<kMx8, kTiled, 0>;
  if (!kMx8 || p.scales_narrow)
    for_each_index<kNumFixedCounts>([&](auto i) {
      constexpr int kCount = kFixedCounts[decltype(i)::value];
      if constexpr (fixed_count(kCount, kMx8))
        if (units == kCount) k = fixed_units_kernel<kMx8, kTiled, kCount>(reg_tok);
    });
  int pair = 1;
  if constexpr (kMx8 && kTiled) {
    if (paired) {
      k = units == 1   ? &moe_down_tc_kernel<kMx8, kTiled, 1, true, 0, 2>
          : units == 4 ? &moe_down_tc_kernel<kMx8, kTiled, 4, true, 0, 2>
                       : &moe_down_tc_kernel<kMx8, kTiled, 10, true, 0, 2>;
      pair = 2;
    }
  }
  ensure_dynamic_smem(k, smem);
  launch_kernel(k, dim3(p.hidden / kTile), dim3(pair * slices * kWarpSize), smem, stream, p.programmatic_launch != 0,
                p, units, group);
}

}  // namespace

int down_tc_slices(int hidden, int intermediate) {
  if (hidden <= 0 || intermediate <= 0 || intermediate % kUnit != 0) return 0;
  const int n = intermediate / kUnit, row_tiles = hidden / kTile;
  // The most K ranges whose grid still fits one wave of warps ...
  for (int u = 1; u <= n; ++u)
    if (n % u == 0 && n / u <= kMaxSlices && long(row_tiles) * (n / u) <= kDownWaveWarps) return n / u;
  // ... or, where none does, the most K ranges.
  for (int u = 1; u <= n; ++u)
    if (n % u == 0 && n / u <= kMaxSlices) return n / u;
  return 0;
}

bool down_tc_pairs_fit(int hidden, int intermediate) {
  const int slices = down_tc_slices(hidden, intermediate);
  if (slices <= 0) return false;
  DownParams p{};
  p.scales_narrow = p.pair_warps = p.tiled = 1;
  const int units = intermediate / kUnit / slices;
  return paired_walk(p, units, true);
}

namespace {
// How moe_down_tc runs these parameters (its walk and shared memory).
struct DownTcPlan {
  int slices, reg_tok, group;
  bool paired;
  size_t smem;
};

DownTcPlan plan(const DownParams& p, WeightFormat format) {
  const bool mx8 = format == WeightFormat::kMXFP8;
  DownTcPlan pl{};
  pl.slices = down_tc_slices(p.hidden, p.intermediate);
  const int units = p.intermediate / kUnit / pl.slices;
  pl.paired = paired_walk(p, units, mx8);
  pl.reg_tok = pl.paired ? 0 : register_tokens(p, units, mx8);
  pl.group = group_tokens(p, pl.slices, pl.reg_tok, mx8, pl.paired);
  pl.smem = smem_bytes(p, pl.slices, pl.reg_tok, mx8, pl.group, pl.paired);
  return pl;
}

// The checks of check_moe_down_tc, and the plan they end with (its shared
// memory is one of them): one plan per launch.
DownTcPlan checked_plan(const DownParams& p, WeightFormat format) {
  WD_CHECK(p.batch >= 1, "moe_down_tc: batch = ", p.batch, " must be >= 1");
  WD_CHECK(tensor_core_shape_ok(p.hidden, p.intermediate), "moe_down_tc: H = ", p.hidden, ", I = ",
           p.intermediate, " do not fit the tensor-core kernels; use the scalar kernels (tensor_cores = false)");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "moe_down_tc: E = ", p.experts, " out of range");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_down_tc: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(p.weights && p.h && p.ids && p.route_w && p.y, "moe_down_tc: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || (format == WeightFormat::kMXFP8 && p.scales),
           "moe_down_tc: weights must be BF16, or MXFP8 with scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.h)) % 16 == 0,
           "moe_down_tc: weights and h must be 16-byte aligned");
  WD_CHECK(uint64_t(p.hidden) * p.intermediate * 2 < (uint64_t(1) << 32), "moe_down_tc: H = ", p.hidden, ", I = ",
           p.intermediate, ": an expert's weights must be below 4 GiB");
  const DownTcPlan pl = plan(p, format);
  WD_CHECK(pl.smem <= kMaxSmem, "moe_down_tc: E = ", p.experts, ", K = ", p.top_k,
           " need more shared memory than a block may use");
  // The walks address a group's h (its tokens' K entries of 4I bytes: hi and
  // lo BF16 halves) with 32-bit byte offsets.
  WD_CHECK(uint64_t(pl.group) * p.top_k * 4 * p.intermediate < (uint64_t(1) << 32), "moe_down_tc: I = ",
           p.intermediate, ", K = ", p.top_k, ": a token group's h must be below 4 GiB");
  return pl;
}
}  // namespace

void check_moe_down_tc(const DownParams& p, WeightFormat format) { (void)checked_plan(p, format); }

void moe_down_tc(const DownParams& p, WeightFormat format, cudaStream_t stream) {
  const DownTcPlan pl = checked_plan(p, format);
  auto* go = format == WeightFormat::kBF16 ? (p.tiled ? &launch<false, true> : &launch<false, false>)
                                           : (p.tiled ? &launch<true, true> : &launch<true, false>);
  go(p, pl.slices, pl.reg_tok, pl.paired, pl.group, pl.smem, stream);
}

}  // namespace wd::kernels
