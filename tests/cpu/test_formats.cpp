// BF16, E4M3 and E8M0 conversions against independent definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "warpdecode/formats.h"

namespace wd {
namespace {

// E4M3 (fn) value of a code from its definition, in double.
double e4m3_definition(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 0xF, m = c & 7;
  if (e == 15 && m == 7) return std::nan("");
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

TEST(E4M3, AllCodesDecodeToTheirDefinition) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_definition(uint8_t(c));
    const float got = e4m3_to_float(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(double(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), bool(c & 0x80)) << "code " << c;
    }
  }
}

TEST(E4M3, AllCodesRoundTrip) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN codes tested below
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(uint8_t(c))), c) << "code " << c;
  }
  EXPECT_EQ(float_to_e4m3(e4m3_to_float(0x7F)), 0x7F);
  EXPECT_EQ(float_to_e4m3(e4m3_to_float(0xFF)), 0xFF);
}

TEST(E4M3, TiesRoundToEvenBetweenEveryPairOfNeighbours) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(uint8_t(c)), hi = e4m3_to_float(uint8_t(c + 1));
    const float mid = (lo + hi) / 2;  // exact: both have few significant bits
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(float_to_e4m3(mid), even) << "tie between codes " << c << " and " << c + 1;
    EXPECT_EQ(float_to_e4m3(-mid), even | 0x80);
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 1e9f)), c + 1);
  }
}

TEST(E4M3, SaturatesToMaxFinite) {
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7E);  // the 448/480 midpoint: 480 does not exist
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-1e30f), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
}

TEST(E4M3, Subnormals) {
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0x01);        // smallest subnormal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);       // tie to even (zero)
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.5f, -10)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);       // tie 1|2 -> 2
  EXPECT_EQ(float_to_e4m3(std::ldexp(7.5f, -9)), 0x08);        // rounds up to 2^-6, a normal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -30)), 0x00);
  EXPECT_EQ(float_to_e4m3(-std::ldexp(1.0f, -30)), 0x80);      // signed zero kept
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(E4M3, NaNEncodesToNaN) {
  EXPECT_EQ(float_to_e4m3(std::nanf("")), 0x7F);
  EXPECT_EQ(float_to_e4m3(-std::nanf("")), 0xFF);
}

TEST(BF16, AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float f = bf16_to_float(uint16_t(c));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << c;
    } else {
      EXPECT_EQ(float_to_bf16(f), c) << c;
    }
  }
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even (1.0)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to +Inf
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(BF16, NaNIsKept) {
  const uint16_t n = float_to_bf16(std::nanf(""));
  EXPECT_TRUE(std::isnan(bf16_to_float(n)));
  // A NaN whose payload lives only in the low 16 bits must not become Inf.
  uint32_t bits = 0x7F800001u;
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
}

TEST(E8M0, Values) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(128), 2.0f);
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_float(1), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0_to_float(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
}

// The router's top-K ranks logits by order_key: the keys must order as the
// floats do, tie exactly where the floats compare equal (-0 with +0), keep
// NaN below everything, and give the float back. Every pair of a set of
// special and random values (bit patterns over the whole range).
TEST(OrderKey, OrdersAndTiesAsTheFloatsCompare) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::lowest(), std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 1.5f, 1.5f};
  std::mt19937 rng(7);
  for (int i = 0; i < 600; ++i) {
    const float f = bits_float(uint32_t(rng()));
    if (!std::isnan(f)) v.push_back(f);
  }
  for (float a : v) {
    const uint32_t ka = order_key(a);
    EXPECT_NE(ka, 0u) << a;
    EXPECT_EQ(float_bits(order_key_value(ka)), float_bits(a == 0.0f ? 0.0f : a)) << a;
    for (float b : v) {
      const uint32_t kb = order_key(b);
      ASSERT_EQ(a > b, ka > kb) << a << " vs " << b;
      ASSERT_EQ(a == b, ka == kb) << a << " vs " << b;
    }
  }
  EXPECT_EQ(order_key(std::nanf("")), 0u);
  EXPECT_EQ(order_key(-std::nanf("")), 0u);
  EXPECT_LT(0u, order_key(-std::numeric_limits<float>::infinity()));
}

}  // namespace
}  // namespace wd
