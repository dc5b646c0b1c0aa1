// The packed E4M3 word of the tiled MXFP8 copies (warpdecode/packed_e4m3.h):
// its two-instruction and four-instruction decodes give the BF16 words of the
// canonical decode, those words hold the codes' values × 2^-120, and packing
// loses nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "warpdecode/formats.h"
#include "warpdecode/packed_e4m3.h"

namespace wd {
namespace {

// The BF16 value of half `which` of a BF16x2 word.
float half_value(uint32_t word, int which) { return bf16_to_float(uint16_t(word >> 16 * which)); }

// Every code's BF16 half is its E4M3 value × 2^-120, subnormals included;
// NaN codes give a finite pattern (as the kernels' integer decode always did).
TEST(PackedE4m3, HalvesHoldTheCodesValuesTimesTwoToTheMinus120) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint32_t word = e4m3x2_bf16x2_bits(c | c << 8);
    EXPECT_EQ(word & ~kPackedMask, 0u) << c;
    if ((c & 0x7F) == 0x7F) continue;
    const float want = std::ldexp(e4m3_to_float(uint8_t(c)), -120);
    EXPECT_EQ(half_value(word, 0), want) << c;
    EXPECT_EQ(half_value(word, 1), want) << c;
    EXPECT_EQ(std::signbit(half_value(word, 0)), (c & 0x80) != 0) << c;
  }
}

// Every pair of codes in the first two places and every pair in the last
// two (the others drawn at random): the decodes of the packed word are the
// canonical words' BF16 words, and unpacking gives the canonical word back.
TEST(PackedE4m3, DecodesToTheCanonicalWordsAndUnpacksExactly) {
  std::mt19937 g(std::random_device{}());
  size_t bad = 0;
  for (uint32_t pair = 0; pair < 65536; ++pair)
    for (int place = 0; place < 2; ++place) {
      const uint32_t other = g() & 0xFFFFu;
      const uint32_t c = place == 0 ? pair | other << 16 : other | pair << 16;
      const uint32_t w = pack_e4m3x4(c);
      const bool ok = packed_e4m3_lo(w) == e4m3x2_bf16x2_bits(c) &&
                      packed_e4m3_hi(w) == e4m3x2_bf16x2_bits(c >> 16) && unpack_e4m3x4(w) == c;
      if (!ok && ++bad <= 5) ADD_FAILURE() << "canonical 0x" << std::hex << c << " packed 0x" << w;
    }
  EXPECT_EQ(bad, 0u);
}

// Packing is a bijection of 32-bit words: every packed word unpacks to a
// canonical word that packs back to it (random words, and single bits).
TEST(PackedE4m3, EveryWordIsThePackingOfOne) {
  std::mt19937 g(std::random_device{}());
  std::vector<uint32_t> words;
  for (int b = 0; b < 32; ++b) words.push_back(1u << b);
  for (int i = 0; i < 1 << 20; ++i) words.push_back(uint32_t(g()));
  size_t bad = 0;
  for (uint32_t w : words)
    if (pack_e4m3x4(unpack_e4m3x4(w)) != w && ++bad <= 5) ADD_FAILURE() << "packed 0x" << std::hex << w;
  EXPECT_EQ(bad, 0u);
}

// pack_e4m3_words / unpack_e4m3_words read and write little-endian words,
// as the device does, and undo each other.
TEST(PackedE4m3, PacksAndUnpacksBuffersWordByWord) {
  const uint32_t canonical[2] = {0x01B27F80u, 0xFF00C3A5u};
  uint8_t bytes[8], packed[8], back[8];
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(canonical[i / 4] >> 8 * (i % 4));
  pack_e4m3_words(bytes, 8, packed);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(packed[i], uint8_t(pack_e4m3x4(canonical[i / 4]) >> 8 * (i % 4))) << i;
  unpack_e4m3_words(packed, 8, back);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], bytes[i]) << i;
}

}  // namespace
}  // namespace wd
