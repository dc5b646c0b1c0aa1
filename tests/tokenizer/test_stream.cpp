// StreamDecoder: partial characters are held back, and the concatenated
// stream always equals decode() of the same ids.
#include <gtest/gtest.h>

#include <random>

#include "small_tokenizer.h"
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/stream_decoder.h"

namespace wd::tok {
namespace {

const Tokenizer& small() {
  static const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json());
  return t;
}

// In the small tokenizer, the id of a byte's own symbol is the byte value.
TEST(StreamDecoder, HoldsBackAPartialCharacter) {
  StreamDecoder s(small());
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.push(0x9F), "");
  EXPECT_EQ(s.push(0x98), "");
  EXPECT_EQ(s.pending_bytes(), 3u);
  EXPECT_EQ(s.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(s.pending_bytes(), 0u);
  EXPECT_EQ(s.push('h'), "h");
  EXPECT_EQ(s.push(0xC3), "");
  EXPECT_EQ(s.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(s.finish(), "");
}

TEST(StreamDecoder, EmitsReplacementAsSoonAsASequenceCannotComplete) {
  StreamDecoder s(small());
  EXPECT_EQ(s.push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push(0xE4), "");
  EXPECT_EQ(s.push('a'), "\xEF\xBF\xBD" "a");  // E4 then 'a': E4 can no longer complete
  EXPECT_EQ(s.push(0xE0), "");
  EXPECT_EQ(s.push(0x80), "\xEF\xBF\xBD\xEF\xBF\xBD");  // E0 80 is never valid
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.finish(), "\xEF\xBF\xBD");  // unfinished at the end
  EXPECT_EQ(s.push('x'), "x");            // reusable after finish()
}

TEST(StreamDecoder, SpecialTokensInsideAPartialCharacter) {
  // Bytes on both sides of an added token are one byte stream (HF concatenates
  // all tokens' bytes before repairing), so the emoji still completes.
  StreamDecoder keep(small(), false), skip(small(), true);
  std::string a, b;
  for (TokenId id : {0xF0, 0x9F, 267, 0x98, 0x80}) {
    a += keep.push(id);
    b += skip.push(id);
  }
  a += keep.finish();
  b += skip.finish();
  EXPECT_EQ(a, small().decode({0xF0, 0x9F, 267, 0x98, 0x80}));
  EXPECT_EQ(b, "\xF0\x9F\x98\x80");
  EXPECT_EQ(b, small().decode({0xF0, 0x9F, 267, 0x98, 0x80}, true));
}

TEST(StreamDecoder, RefusesBadIds) {
  StreamDecoder s(small());
  EXPECT_THROW(s.push(100000), InvalidArgument);
}

TEST(StreamDecoder, EqualsDecodeOnRandomIdSequences) {
  std::mt19937_64 rng(2024);
  const TokenId n = TokenId(small().vocab_size());
  for (int round = 0; round < 5000; ++round) {
    std::vector<TokenId> ids(rng() % 12);
    for (auto& id : ids) {
      // Bias to the bytes >= 0x80, where the interesting cases are.
      id = rng() % 3 ? TokenId(0x80 + rng() % 0x80) : TokenId(rng() % n);
    }
    for (bool skip : {false, true}) {
      StreamDecoder s(small(), skip);
      std::string text;
      for (TokenId id : ids) {
        text += s.push(id);
        EXPECT_LE(s.pending_bytes(), 3u);
      }
      text += s.finish();
      ASSERT_EQ(text, small().decode(ids, skip)) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace wd::tok
