// decode(encode(s)) == NFC(s) for random valid UTF-8, on the hand-built
// tokenizer (always) and on the fixture's (when present). Seeded, so a
// failure reproduces; the failing string is printed escaped.
#include <gtest/gtest.h>

#include <random>

#include "fixture.h"
#include "small_tokenizer.h"
#include "tokenizer/utf8.h"

namespace wd::tok {
namespace {

// Code points drawn to hit every UTF-8 length, combining marks, Hangul jamo
// (NFC composes them), whitespace of every kind, and the whole range.
uint32_t random_code_point(std::mt19937_64& rng) {
  static const std::pair<uint32_t, uint32_t> ranges[] = {
      {0x20, 0x7E},     {0x09, 0x0D},     {0x300, 0x36F},   {0x1100, 0x11FF}, {0xAC00, 0xD7A3},
      {0x00A0, 0x024F}, {0x0400, 0x04FF}, {0x0900, 0x097F}, {0x2000, 0x206F}, {0x3000, 0x30FF},
      {0x4E00, 0x9FFF}, {0x1F300, 0x1FAFF}, {0x85, 0x85},   {0x180E, 0x180E}, {0xF900, 0xFAFF},
      {0x0, 0x10FFFF},
  };
  const auto& [lo, hi] = ranges[rng() % (sizeof ranges / sizeof ranges[0])];
  for (;;) {
    const uint32_t cp = lo + uint32_t(rng() % (hi - lo + 1));
    if (cp < 0xD800 || cp > 0xDFFF) return cp;
  }
}

std::string random_text(std::mt19937_64& rng, size_t max_chars) {
  std::string s;
  const size_t n = rng() % (max_chars + 1);
  for (size_t i = 0; i < n; ++i) utf8::append(s, random_code_point(rng));
  return s;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
  }
  return out;
}

bool contains_added_token(const Tokenizer& t, const std::string& s) {
  for (const auto& a : t.added_tokens())
    if (s.find(a.content) != std::string::npos) return true;
  return false;
}

void check_round_trip(const Tokenizer& t, uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  int failures = 0;
  for (int i = 0; i < count && failures < 10; ++i) {
    const std::string s = random_text(rng, 64);
    if (contains_added_token(t, s)) continue;
    const std::string back = t.decode(t.encode(s));
    if (back != Tokenizer::nfc(s)) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << " case " << i << ": " << escaped(s);
    }
  }
}

TEST(RoundTrip, RandomUtf8SmallTokenizer) {
  const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json());
  check_round_trip(t, 12345, 20000);
}

TEST(RoundTrip, RandomUtf8FixtureTokenizers) {
  WD_REQUIRE_FIXTURE();
  check_round_trip(test::fixture_tokenizer("main"), 777, 20000);
}

TEST(RoundTrip, NfcIsIdempotentAndComposes) {
  EXPECT_EQ(Tokenizer::nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(Tokenizer::nfc("\xE2\x84\xAB"), "\xC3\x85");                 // ANGSTROM SIGN -> Å
  EXPECT_EQ(Tokenizer::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(Tokenizer::nfc("ab\xEF\xA4\x80" "c"), "ab\xE8\xB1\x88" "c");       // U+F900 -> U+8C48
  EXPECT_EQ(Tokenizer::nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
  std::mt19937_64 rng(99);
  for (int i = 0; i < 5000; ++i) {
    const std::string s = random_text(rng, 32);
    const std::string n = Tokenizer::nfc(s);
    EXPECT_EQ(Tokenizer::nfc(n), n) << escaped(s);
  }
}

}  // namespace
}  // namespace wd::tok
