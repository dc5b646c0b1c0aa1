// The un-tiling of the tiled copies (warpdecode/down_tiling.h,
// warpdecode/gate_up_tiling.h): untile_* must give back exactly the canonical
// bytes the tiling took, every E4M3 word (NaN codes included) and scale byte,
// so that the classical path on un-tiled weights computes what it computes on
// the canonical upload.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
#include "warpdecode/gate_up_tiling.h"

#include "test_support.h"

namespace wd {
namespace {

MoeShape shape(int H, int I, int E) { return test::make_shape(H, I, E, 2); }

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());  // every byte value: E4M3 NaN codes (0x7F, 0xFF) included
  return v;
}

// (E, rows, len) codes and (E, rows, len/32) scales through tile and untile.
struct RoundTrip {
  std::vector<uint8_t> q, sc, qt, st, qb, sb;
  RoundTrip(size_t codes, uint32_t seed)
      : q(random_bytes(codes, seed)), sc(random_bytes(codes / 32, seed + 1)), qt(codes), st(codes / 32),
        qb(codes, 0xAB), sb(codes / 32, 0xAB) {}
};

TEST(Untiling, Mxfp8DownGivesBackTheCanonicalBytes) {
  const MoeShape s = shape(48, 192, 3);
  RoundTrip r(size_t(3) * 48 * 192, 11);
  tile_mxfp8_down(s, r.q.data(), r.sc.data(), r.qt.data(), r.st.data());
  ASSERT_NE(r.qt, r.q);  // the tiling moved (and packed) the codes
  untile_mxfp8_down(s, r.qt.data(), r.st.data(), r.qb.data(), r.sb.data());
  EXPECT_EQ(r.qb, r.q);
  EXPECT_EQ(r.sb, r.sc);
}

TEST(Untiling, Mxfp8GateUpGivesBackTheCanonicalBytes) {
  const MoeShape s = shape(128, 48, 2);
  RoundTrip r(size_t(2) * 2 * 48 * 128, 12);
  tile_mxfp8_gate_up(s, r.q.data(), r.sc.data(), r.qt.data(), r.st.data());
  ASSERT_NE(r.qt, r.q);
  untile_mxfp8_gate_up(s, r.qt.data(), r.st.data(), r.qb.data(), r.sb.data());
  EXPECT_EQ(r.qb, r.q);
  EXPECT_EQ(r.sb, r.sc);
}

TEST(Untiling, Bf16GivesBackTheCanonicalValues) {
  const MoeShape s = shape(128, 64, 2);
  const size_t n = size_t(2) * 128 * 64;  // each projection's element count (gate_up: 2I rows)
  std::mt19937 rng(13);
  std::vector<uint16_t> down(n), gate_up(2 * n), dt(n), gt(2 * n), db(n, 0xABCD), gb(2 * n, 0xABCD);
  for (auto& v : down) v = uint16_t(rng());
  for (auto& v : gate_up) v = uint16_t(rng());
  tile_bf16_down(s, down.data(), dt.data());
  tile_bf16_gate_up(s, gate_up.data(), gt.data());
  ASSERT_NE(dt, down);
  ASSERT_NE(gt, gate_up);
  untile_bf16_down(s, dt.data(), db.data());
  untile_bf16_gate_up(s, gt.data(), gb.data());
  EXPECT_EQ(db, down);
  EXPECT_EQ(gb, gate_up);
}

TEST(Untiling, RefusesWhatTheTilingRefuses) {
  std::vector<uint8_t> b(size_t(40) * 128 * 2 * 2);
  EXPECT_THROW(untile_mxfp8_down(shape(40, 128, 2), b.data(), b.data(), b.data(), b.data()), InvalidArgument);
  EXPECT_THROW(untile_mxfp8_gate_up(shape(96, 16, 2), b.data(), b.data(), b.data(), b.data()), InvalidArgument);
  EXPECT_THROW(untile_mxfp8_down(shape(32, 128, 2), b.data(), nullptr, b.data(), b.data()), InvalidArgument);
  std::vector<uint16_t> w(size_t(32) * 96 * 2);
  EXPECT_THROW(untile_bf16_down(shape(32, 96, 2), w.data(), w.data()), InvalidArgument);
}

}  // namespace
}  // namespace wd
