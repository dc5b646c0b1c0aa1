// moe_down_tc's tile layout rules (kernels/down_tc_tiles.h), which the
// kernel runs on the device and sizes its shared memory by: on routed token
// groups (random, every token on the same experts, every entry its own
// expert), every walk places each entry once, in a column of its own, inside
// its expert's tiles, with its lo half in a column no token takes where the
// walk keeps hi and lo in one tile, on the lane quad that owns it in the
// register walks; and the group's tiles never exceed max_tiles().
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/down_tc_tiles.h"

namespace wd::kernels {
namespace {

enum class Walk { kGeneral, kSplit, kQuad, kByToken };

const char* name(Walk w) {
  switch (w) {
    case Walk::kGeneral: return "general";
    case Walk::kSplit: return "split";
    case Walk::kQuad: return "quad";
    case Walk::kByToken: return "by-token";
  }
  return "?";
}

// One group: ids[t * K + k], each token's K experts distinct (as a router's).
struct Group {
  int tokens, K, E;
  std::vector<int> ids;
};

// The kernel's steps 2, 4, 5 and 6 for one walk, on the host: each
// expert's tiles, their prefix in ascending expert id, and each entry's
// (tile, column); then every property the walk relies on.
void check_walk(const Group& g, Walk w) {
  const std::string what = std::string(name(w)) + " B=" + std::to_string(g.tokens) + " K=" + std::to_string(g.K) +
                           " E=" + std::to_string(g.E);
  const int ne = g.tokens * g.K;
  // Tokens 0-63, and 64-127 (the general walk's groups of up to kMaxGroup).
  std::vector<unsigned long long> masks(g.E, 0), masks_hi(g.E, 0);
  for (int i = 0; i < ne; ++i) (i / g.K < 64 ? masks : masks_hi)[g.ids[i]] |= 1ull << (i / g.K % 64);
  std::map<int, int> first;  // distinct experts, ascending id -> first tile
  int tiles = 0;
  for (int e = 0; e < g.E; ++e) {
    if (!masks[e] && !masks_hi[e]) continue;
    const int cnt = popcount64(masks[e]) + popcount64(masks_hi[e]);
    const int n = w == Walk::kQuad      ? quad_tiles(masks[e])
                  : w == Walk::kByToken ? by_token_tiles(masks[e])
                  : w == Walk::kSplit   ? ranked_tiles(cnt, 4)
                                        : ranked_tiles(cnt, 8);
    ASSERT_GE(n, 1) << what << " expert " << e;
    first[e] = tiles;
    tiles += n;
  }
  const int na = int(first.size());
  const int reg_tok = w == Walk::kQuad ? 4 : w == Walk::kByToken ? 2 : 0;
  EXPECT_LE(tiles, max_tiles(ne, na, reg_tok, w == Walk::kSplit)) << what;
  // A register walk's kernel may take the duplicate-token walk instead: its bound covers eight-token tiles too.
  EXPECT_LE((ne + 7 * na) / 8, max_tiles(ne, na, reg_tok, w == Walk::kSplit)) << what;

  std::vector<int> hi(size_t(tiles) * 8, -1);  // (tile, column) -> entry
  std::vector<int> tile_expert(tiles, -1);
  for (int i = 0; i < ne; ++i) {
    const int e = g.ids[i], t = i / g.K;
    const int pos = tokens_below(masks[e], masks_hi[e], t);
    if (t < 64) {
      EXPECT_EQ(pos, tokens_below(masks[e], t)) << what;
    }
    int below = 0;  // the rank by a plain count
    for (int m = 0; m < i; ++m) below += g.ids[m] == e;
    EXPECT_EQ(pos, below) << what << ": entry " << i;
    int tile = 0, col = 0;
    switch (w) {
      case Walk::kQuad: {
        const TileSlot s = quad_slot(masks.data(), e, t);
        tile = s.tile(), col = s.col();
        EXPECT_EQ(col / 2, t / 2 % 4) << what << ": token " << t << " off its lane quad";
        break;
      }
      case Walk::kByToken:
        tile = by_token_tile(masks[e], t), col = t;
        break;
      case Walk::kSplit: {
        const TileSlot s = ranked_slot(pos, 4);
        tile = s.tile(), col = s.col();
        ASSERT_LT(col, 4) << what;
        break;
      }
      case Walk::kGeneral: {
        const TileSlot s = ranked_slot(pos, 8);
        tile = s.tile(), col = s.col();
        break;
      }
    }
    const int next = std::next(first.find(e)) == first.end() ? tiles : std::next(first.find(e))->second;
    ASSERT_GE(tile, 0) << what;
    ASSERT_LT(first[e] + tile, next) << what << ": entry " << i << " past its expert's tiles";
    ASSERT_GE(col, 0) << what;
    ASSERT_LT(col, 8) << what;
    const int n = first[e] + tile;
    EXPECT_EQ(hi[size_t(n) * 8 + col], -1) << what << ": tile " << n << " column " << col << " taken twice";
    hi[size_t(n) * 8 + col] = i;
    EXPECT_TRUE(tile_expert[n] == -1 || tile_expert[n] == e) << what << ": tile " << n << " holds two experts";
    tile_expert[n] = e;
  }
  for (int n = 0; n < tiles; ++n) EXPECT_NE(tile_expert[n], -1) << what << ": tile " << n << " empty";
  // hi and lo in one tile: a token's lo column (c ^ 4 in the by-token walk,
  // c + 4 in the split walk) holds no token.
  if (w == Walk::kByToken || w == Walk::kSplit)
    for (int n = 0; n < tiles; ++n)
      for (int c = 0; c < 8; ++c) {
        const int i = hi[size_t(n) * 8 + c];
        if (i < 0) continue;
        const int lo = w == Walk::kByToken ? c ^ 4 : c + 4;
        EXPECT_EQ(hi[size_t(n) * 8 + lo], -1) << what << ": tile " << n << " lo column " << lo << " holds a token";
      }
  // The by-token walk takes a second tile only for an expert with a pair of
  // tokens t, t ^ 4; the tokens sharing a tile are by_token_tile_mask's.
  if (w == Walk::kByToken)
    for (int e = 0; e < g.E; ++e) {
      if (!masks[e]) continue;
      const bool pair = (masks[e] & (masks[e] >> 4) & 0xFull) != 0;
      EXPECT_EQ(by_token_tiles(masks[e]), pair ? 2 : 1) << what << " expert " << e;
      for (int t = 0; t < g.tokens; ++t) {
        if (!(masks[e] >> t & 1ull)) continue;
        const unsigned long long m = by_token_tile_mask(masks[e], t);
        for (int u = 0; u < g.tokens; ++u) {
          if (!(masks[e] >> u & 1ull)) continue;
          EXPECT_EQ(m >> u & 1ull, by_token_tile(masks[e], u) == by_token_tile(masks[e], t) ? 1ull : 0ull)
              << what << " expert " << e << " tokens " << t << ", " << u;
        }
      }
    }
  // The ranked walks fill an expert's tiles in token order.
  if (w == Walk::kGeneral || w == Walk::kSplit)
    for (int n = 0; n < tiles; ++n) {
      int last = -1;
      for (int c = 0; c < 8; ++c)
        if (const int i = hi[size_t(n) * 8 + c]; i >= 0) {
          EXPECT_GT(i / g.K, last) << what << ": tile " << n;
          last = i / g.K;
        }
    }
}

std::vector<Walk> walks_for(int tokens) {
  if (tokens > 64) return {Walk::kGeneral};  // groups of up to kMaxGroup: the general walk only
  std::vector<Walk> w = {Walk::kGeneral, Walk::kSplit};
  if (tokens <= 16) w.push_back(Walk::kQuad);
  if (tokens <= 8) w.push_back(Walk::kByToken);
  return w;
}

Group random_group(int tokens, int K, int E, std::mt19937_64& rng) {
  Group g{tokens, K, E, {}};
  std::vector<int> perm(E);
  for (int t = 0; t < tokens; ++t) {
    for (int e = 0; e < E; ++e) perm[e] = e;
    std::shuffle(perm.begin(), perm.end(), rng);
    g.ids.insert(g.ids.end(), perm.begin(), perm.begin() + K);
  }
  return g;
}

TEST(DownTcTiles, EveryWalkOnRandomGroups) {
  std::mt19937_64 rng(20261202);
  for (int tokens : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 32, 33, 48, 64, 65, 100, 127, kMaxGroup})
    for (const auto& [K, E] : {std::pair{8, 128}, std::pair{8, 160}, std::pair{6, 20}, std::pair{4, 8}, std::pair{2, 3}})
      for (int rep = 0; rep < 20; ++rep) {
        const Group g = random_group(tokens, K, E, rng);
        for (Walk w : walks_for(tokens)) check_walk(g, w);
      }
}

// The extremes of the bounds: every token on the same K experts (na = K:
// each expert has every token), and every entry on its own expert (na = ne).
TEST(DownTcTiles, EveryWalkOnSharedAndDisjointRouting) {
  for (int tokens : {1, 3, 4, 5, 8, 9, 13, 16, 17, 31, 32, 63, 64, 65, 128})
    for (int K : {1, 2, 8}) {
      Group same{tokens, K, 8, {}}, own{tokens, K, tokens * K, {}};
      for (int t = 0; t < tokens; ++t)
        for (int k = 0; k < K; ++k) {
          same.ids.push_back(k);
          own.ids.push_back(t * K + k);
        }
      for (Walk w : walks_for(tokens)) {
        check_walk(same, w);
        check_walk(own, w);
      }
    }
}

// The by-token walk's pairs: tokens t and t ^ 4 of one expert.
TEST(DownTcTiles, ByTokenPairs) {
  EXPECT_EQ(by_token_tiles(0b00000001), 1);
  EXPECT_EQ(by_token_tiles(0b01000010), 1);  // tokens 1 and 6: columns 1, 5 and 6, 2
  EXPECT_EQ(by_token_tiles(0b11101110), 2);  // tokens 1 and 5 meet
  EXPECT_EQ(by_token_tiles(0b11110000), 1);
  EXPECT_EQ(by_token_tile(0b00100010, 5), 1);
  EXPECT_EQ(by_token_tile(0b00100010, 1), 0);
  EXPECT_EQ(by_token_tile(0b01000010, 6), 0);
  EXPECT_EQ(by_token_tile_mask(0b00110010, 4), 0b00110000u);
  EXPECT_EQ(by_token_tile_mask(0b01000010, 1), 0b01000010u);
}

TEST(DownTcTiles, SplitWalkRule) {
  EXPECT_TRUE(split_walk(1, 0, true));
  EXPECT_TRUE(split_walk(kSplitMaxBatch, 0, true));
  EXPECT_FALSE(split_walk(kSplitMaxBatch + 1, 0, true));
  EXPECT_FALSE(split_walk(8, 0, false));  // BF16 keeps eight-token tiles
  EXPECT_FALSE(split_walk(8, 2, true));   // the register walks have their own tiles
  EXPECT_FALSE(split_walk(12, 4, true));
}

}  // namespace
}  // namespace wd::kernels
