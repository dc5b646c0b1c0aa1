// How moe_down_tc lays out one token group's work as tiles: the rules, host
// and device, so that the CPU tests check the bounds the kernel sizes its
// shared memory by (tests/cpu/test_down_tc_tiles.cpp).
//
// A group is up to 64 tokens of the batch (128 in the general walk where
// shared memory allows: moe_down_tc.cu); an expert's tokens in it are a
// 64-bit mask (bit t: the group's token t is routed to the expert), two
// words in a group of more than 64. A tile is
// one expert and the tokens of one n8 MMA tile: its 8 columns. The walks
// (moe_down_tc.cu) place them differently:
// - general walk: an expert's k-th token (ascending) in its tile k / 8,
//   column k % 8; with hi and lo in one tile (kWalkSplit, MXFP8 up to
//   kSplitMaxBatch) in tile k / 4, column k % 4, its lo half in column
//   k % 4 + 4.
// - by-token walk (B <= 8): token t in column t, its lo half in column
//   t ^ 4, of its expert's one tile; an expert with a pair of tokens t and
//   t ^ 4 (whose columns would meet) takes one tile a half of the group
//   (tokens 0-3, 4-7).
// - quad walk (9 <= B <= 16): token t belongs to lane quad (t / 2) % 4; the
//   expert's k-th token of that quad in its tile k / 2, column 2q + k % 2.
// The tiles of the group's distinct experts follow one another in ascending
// expert id.
#pragma once

#include <cstdint>

#include "warpdecode/formats.h"  // WD_HD

namespace wd::kernels {

// Tokens t with (t / 2) % 4 == 0 among a group's 64: the quad walk's lane
// quad q owns (kQuadMask << 2q).
constexpr unsigned long long kQuadMask = 0x0303030303030303ull;

// The MXFP8 general walk takes tiles of at most four tokens, hi and lo h in
// one MMA chain's columns (kWalkSplit), up to this batch: an expert's
// tokens then fill ceil(count / 4) tiles instead of ceil(count / 8), each
// with half the MMAs and h loads. Measured against eight-token tiles
// (PERF_LOG session 32): MXFP8 down −3 to −7 % at B = 20-32, +3 to +19 % at
// B = 40-64 (more tiles: about 4 tokens an expert at B = 64); BF16 level to
// +1.4 % on down at B = 20-32. A rule of the batch alone; either walk gives
// the same bits.
constexpr int kSplitMaxBatch = 32;
WD_HD constexpr bool split_walk(int batch, int reg_tok, bool mx8) {
  return mx8 && reg_tok == 0 && batch <= kSplitMaxBatch;
}

// The most tiles a group of ne entries on na distinct experts makes in a
// kernel of register walk reg_tok (it may also take the duplicate-token
// walk): Σ ceil(count / 8) <= (ne + 7·na) / 8; the quad walk (reg_tok 4)
// at most Σ ceil(count / 2) <= (ne + na) / 2; the by-token walk (reg_tok
// 2) one tile an expert, two where it has a pair of tokens t, t ^ 4 (one
// token of each half at least): at most min(ne, 2·na); the split general
// walk Σ ceil(count / 4) <= (ne + 3·na) / 4.
WD_HD constexpr int max_tiles(int ne, int na, int reg_tok, bool split = false) {
  if (split) return (ne + 3 * na) / 4;  // Σ ceil(count / 4); at least the general bound
  if (reg_tok == 2) {
    const int general = (ne + 7 * na) / 8, by_token = ne < 2 * na ? ne : 2 * na;
    return by_token > general ? by_token : general;
  }
  return reg_tok == 4 && (ne + na) / 2 > (ne + 7 * na) / 8 ? (ne + na) / 2 : (ne + 7 * na) / 8;
}

WD_HD int popcount64(unsigned long long x) {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}

// An expert's tokens below token t (its rank k among them, ascending).
WD_HD int tokens_below(unsigned long long mask, int t) { return popcount64(mask & ((1ull << t) - 1ull)); }

// Groups of up to 128 tokens (the general walk past 64 tokens, where the
// kernel's shared memory allows): an expert's tokens are two mask words,
// tokens 0-63 in lo and 64-127 in hi.
constexpr int kMaxGroup = 128;
// Mask words an expert takes in a group of this many tokens (at most kMaxGroup).
WD_HD constexpr int mask_words(int tokens) { return tokens > 64 ? 2 : 1; }
WD_HD int tokens_below(unsigned long long lo, unsigned long long hi, int t) {
  return t < 64 ? tokens_below(lo, t) : popcount64(lo) + tokens_below(hi, t - 64);
}

// The by-token walk: whether an expert's tokens include a pair t, t ^ 4
// (token t's lo column is token t ^ 4's hi column): then its tokens of each
// half of the group take a tile of their own.
WD_HD bool by_token_pair(unsigned long long mask) { return (mask & (mask >> 4) & 0x0Full) != 0; }

// The tiles an expert takes in the quad walk (its fullest quad's
// ceil(count / 2)) and in the by-token walk (one, or two with a pair).
WD_HD int quad_tiles(unsigned long long mask) {
  int n = 0;
  for (int q = 0; q < 4; ++q) {
    const int c = (popcount64(mask & kQuadMask << 2 * q) + 1) / 2;
    n = n > c ? n : c;
  }
  return n;
}
WD_HD int by_token_tiles(unsigned long long mask) { return by_token_pair(mask) ? 2 : 1; }

// Where token t of an expert sits: its tile (counted from the expert's
// first) and column, from its rank k in a run of per-tile places starting
// at column col0.
struct TileSlot {
  int k;
  int per;
  int col0;
  WD_HD int tile() const { return k / per; }
  WD_HD int col() const { return col0 + k % per; }
};
// The quad walk: the k-th token of quad q of expert e (masks: the group's
// per expert), two a tile, columns 2q and 2q + 1.
WD_HD TileSlot quad_slot(const unsigned long long* masks, int e, int t) {
  const int q = t / 2 % 4;
  return {popcount64(masks[e] & kQuadMask << 2 * q & ((1ull << t) - 1ull)), 2, 2 * q};
}
// The general walks: the expert's k-th token, per_tile tokens a tile (8, or
// 4 with hi and lo in one tile), and the tiles of an expert of count tokens.
WD_HD TileSlot ranked_slot(int k, int per_tile) { return {k, per_tile, 0}; }
WD_HD constexpr int ranked_tiles(int count, int per_tile) { return (count + per_tile - 1) / per_tile; }
// The by-token walk: token t in column t of its expert's tile, the second
// one for tokens 4-7 of an expert with a pair.
WD_HD int by_token_tile(unsigned long long mask, int t) { return int(t / 4 == 1 && by_token_pair(mask)); }
// The tokens that share token t's by-token tile: all the expert's, or with
// a pair those of t's half of the group.
WD_HD unsigned long long by_token_tile_mask(unsigned long long mask, int t) {
  return by_token_pair(mask) ? mask & 0x0Full << 4 * (t / 4) : mask;
}

}  // namespace wd::kernels
