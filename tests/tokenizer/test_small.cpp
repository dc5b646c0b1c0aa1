// The tokenizer on a hand-built tokenizer.json (small_tokenizer.h), whose
// expected ids are worked out by hand in the comments. Runs without the fixture.
#include <gtest/gtest.h>

#include "small_tokenizer.h"
#include "tokenizer/split_regex.h"
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {
namespace {

using Ids = std::vector<TokenId>;

const Tokenizer& small() {
  static const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json());
  return t;
}

TEST(SmallTokenizer, Loads) {
  EXPECT_EQ(small().vocab_size(), 270u);
  EXPECT_EQ(small().token_to_id("<|im_end|>"), 267);
  EXPECT_EQ(small().token_to_id("hello"), 262);
  EXPECT_EQ(small().id_to_token(256), "\xC4\xA0t");  // "Ġt"
  EXPECT_TRUE(small().is_special(265));
  EXPECT_FALSE(small().is_special(268));
}

TEST(SmallTokenizer, MergesApplyByRankNotByLength) {
  // "hello": h e l l o -> (h,e) rank 1 -> he l l o -> (l,l) rank 3 -> he ll o.
  // "hell"/"hello" need (e,ll) first, which "he" has already consumed.
  EXPECT_EQ(small().encode("hello"), (Ids{257, 259, 'o'}));
  // " the": (Ġ,t) rank 0, then (h,e) rank 1, then (Ġt,he) rank 2.
  EXPECT_EQ(small().encode(" the"), (Ids{258}));
  // "ell" + "o" from (e,l)? no such merge: e l l o -> (l,l) -> e ll o -> (e,ll) -> ell o.
  EXPECT_EQ(small().encode("ello"), (Ids{260, 'o'}));
}

TEST(SmallTokenizer, EqualRanksMergeLeftmostFirst) {
  EXPECT_EQ(small().encode("aaaaa"), (Ids{264, 264, 'a'}));
  EXPECT_EQ(small().encode("aaaa"), (Ids{264, 264}));
}

TEST(SmallTokenizer, SplitsByTheQwenRegexBeforeBpe) {
  // " the" is one piece (space joins the word), "the" alone is not merged with Ġ.
  EXPECT_EQ(small().encode("hello the"), (Ids{257, 259, 'o', 258}));
  // Digits are single pieces: "12" -> "1" "2".
  EXPECT_EQ(small().encode("12"), (Ids{'1', '2'}));
  // "  the": "\s+(?!\S)" takes one space, then " the".
  EXPECT_EQ(small().encode("  the"), (Ids{' ', 258}));  // Ġ is the id of byte 0x20
}

TEST(SmallTokenizer, NfcBeforeBpe) {
  // é is C3 A9 -> symbols Ã © -> merge rank 7 -> 263. The decomposed
  // e + U+0301 normalises to the same.
  EXPECT_EQ(small().encode("\xC3\xA9"), (Ids{263}));
  EXPECT_EQ(small().encode("e\xCC\x81"), (Ids{263}));
  EXPECT_EQ(small().decode(small().encode("e\xCC\x81")), "\xC3\xA9");
}

TEST(SmallTokenizer, AddedTokensAreCutOutFirst) {
  EXPECT_EQ(small().encode("<|im_start|>hello<|im_end|>"), (Ids{266, 257, 259, 'o', 267}));
  // Inside a word, and adjacent to each other.
  EXPECT_EQ(small().encode("a<think>b</think><|endoftext|>"), (Ids{'a', 268, 'b', 269, 265}));
  // Near misses are text.
  const Ids near = small().encode("<|im_start|");
  EXPECT_EQ(std::count(near.begin(), near.end(), 266), 0);
  // Split-special mode: special tokens become text, <think> (not special) stays.
  EncodeOptions plain;
  plain.recognize_special_tokens = false;
  const Ids ids = small().encode("<|im_end|><think>", plain);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 267), 0);
  EXPECT_EQ(ids.back(), 268);
  EXPECT_EQ(small().decode(ids), "<|im_end|><think>");
}

TEST(SmallTokenizer, AddedTokensAreNotNormalizedAcrossTheirBoundary) {
  // The pieces on each side of an added token are normalised separately (HF):
  // the combining mark after </think> stays a lone mark.
  const Ids ids = small().encode("e</think>\xCC\x81");
  EXPECT_EQ(ids[0], 'e');
  EXPECT_EQ(ids[1], 269);
  EXPECT_EQ(small().decode(ids), "e</think>\xCC\x81");
}

TEST(SmallTokenizer, DecodeSkipsSpecialOnRequest) {
  const Ids ids = small().encode("<|im_start|>hello<think><|im_end|>");
  EXPECT_EQ(small().decode(ids), "<|im_start|>hello<think><|im_end|>");
  EXPECT_EQ(small().decode(ids, true), "hello<think>");
}

TEST(SmallTokenizer, DecodeRepairsBrokenUtf8LikeFromUtf8Lossy) {
  // 0xC3 alone, then 'a': one U+FFFD for the maximal subpart.
  EXPECT_EQ(small().decode({0xC3, 'a'}), "\xEF\xBF\xBD" "a");
  // F0 9F 98 (incomplete emoji) at the end: one U+FFFD.
  EXPECT_EQ(small().decode({0xF0, 0x9F, 0x98}), "\xEF\xBF\xBD");
  // E0 80: E0 needs A0..BF next, so E0 and 80 are two maximal subparts.
  EXPECT_EQ(small().decode({0xE0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // ED A0 80 (a surrogate): ED then A0, 80 -> three replacements.
  EXPECT_EQ(small().decode({0xED, 0xA0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(small().decode({0xFF}), "\xEF\xBF\xBD");
}

TEST(SmallTokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  EXPECT_THROW(small().decode({270}), InvalidArgument);
  EXPECT_THROW(small().decode({-1}), InvalidArgument);
  try {
    small().decode({'a', 151936});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("151936 is not in the vocabulary (size 270)"), std::string::npos) << e.what();
  }
}

TEST(SmallTokenizer, InvalidUtf8IsRefusedWithItsOffset) {
  const char* bad[] = {"\xFF", "ab\xC0\xAF", "\xED\xA0\x80", "\xE4\xB8", "x\xF4\x90\x80\x80", "\x80", "\xF8\x88\x80\x80\x80"};
  for (const char* s : bad) EXPECT_THROW(small().encode(s), InvalidArgument) << s;
  try {
    small().encode("ab\xC0\xAF");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8: byte 0xc0 at offset 2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(small().encode(std::string("nul\0inside", 10)));
}

TEST(SmallTokenizer, EmptyAndWhitespaceOnly) {
  EXPECT_TRUE(small().encode("").empty());
  EXPECT_EQ(small().decode({}), "");
  EXPECT_EQ(small().decode(small().encode(" \t\r\n  \n")), " \t\r\n  \n");
}

TEST(SmallTokenizer, LongInputsDoNotExhaustTheRegexStack) {
  for (const std::string& s : {std::string(200000, 'a'), std::string(200000, ' ') + "x", std::string(100000, '\n'),
                               std::string(100000, '!'), std::string(50000, ' ')}) {
    const Ids ids = small().encode(s);
    EXPECT_EQ(small().decode(ids), s);
  }
}

TEST(SmallTokenizer, IgnoreMergesTakesWholeWordsFromTheVocab) {
  std::string json = test::small_tokenizer_json();
  json.replace(json.find("\"ignore_merges\":false"), 21, "\"ignore_merges\":true");
  const Tokenizer t = Tokenizer::from_json(json);
  EXPECT_EQ(t.encode("hello"), (Ids{262}));  // in the vocab: taken whole, merges ignored
  EXPECT_EQ(t.encode("hellos"), (Ids{257, 259, 'o', 's'}));  // not in the vocab: merged as usual
}

TEST(SmallTokenizer, MergesAsStringsOrPairs) {
  std::string json = test::small_tokenizer_json();
  const std::string strings = R"(["\u0120 t","h e","\u0120t he","l l","e ll","h ell","hell o","\u00C3 \u00A9","a a"])";
  const std::string pairs =
      R"([["\u0120","t"],["h","e"],["\u0120t","he"],["l","l"],["e","ll"],["h","ell"],["hell","o"],["\u00C3","\u00A9"],["a","a"]])";
  json.replace(json.find(strings), strings.size(), pairs);
  const Tokenizer t = Tokenizer::from_json(json);
  EXPECT_EQ(t.encode("hello the aaaaa"), small().encode("hello the aaaaa"));
}

TEST(SmallTokenizer, FlagsOfAddedTokens) {
  const std::string extra =
      R"(,{"id":270,"content":"<L>","single_word":false,"lstrip":true,"rstrip":false,"normalized":false,"special":true})"
      R"(,{"id":271,"content":"<R>","single_word":false,"lstrip":false,"rstrip":true,"normalized":false,"special":false})"
      R"(,{"id":272,"content":"word","single_word":true,"lstrip":false,"rstrip":false,"normalized":false,"special":false})"
      R"(,{"id":273,"content":"caf\u00e9","single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":false})";
  const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json(extra));
  EXPECT_EQ(t.encode("a  <L>b"), (Ids{'a', 270, 'b'}));
  EXPECT_EQ(t.encode("a<R> \t b"), (Ids{'a', 271, 'b'}));
  EXPECT_EQ(t.encode("word"), (Ids{272}));
  EXPECT_EQ(t.encode("(word)")[1], 272);
  const Ids inside = t.encode("swords");
  EXPECT_EQ(std::count(inside.begin(), inside.end(), 272), 0);
  // \w includes marks: a combining mark after "word" makes it part of a word.
  const Ids marked = t.encode("word\xCC\x81");
  EXPECT_EQ(std::count(marked.begin(), marked.end(), 272), 0);
  // normalized=true: matched after NFC, so the decomposed spelling matches too.
  EXPECT_EQ(t.encode("cafe\xCC\x81"), (Ids{273}));
  EXPECT_EQ(t.encode("caf\xC3\xA9"), (Ids{273}));
  // HF decodes an added token through the byte-level decoder: é (U+00E9) is the
  // symbol of byte 0xE9, which is not UTF-8 on its own.
  EXPECT_EQ(t.decode({273}), "caf\xEF\xBF\xBD");
}

// from_json refuses `json` with a FormatError whose message holds `words`.
void refuses(const std::string& json, const std::string& words) {
  try {
    Tokenizer::from_json(json);
    ADD_FAILURE() << "accepted: " << words;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SmallTokenizer, UnsupportedConfigurationsAreRefusedByName) {
  refuses(test::small_tokenizer_json("", R"({"type":"NFKC"})"), "unsupported normalizer");
  refuses(test::small_tokenizer_json("", R"({"type":"NFC"})", "\\\\w+"), "\\w");
  refuses(test::small_tokenizer_json("", R"({"type":"NFC"})", test::kQwenSplitRegexJson, R"(,"byte_fallback":true)"),
          "byte_fallback");
  refuses(test::small_tokenizer_json("", R"({"type":"NFC"})", test::kQwenSplitRegexJson, R"(,"dropout":"x")"),
          "unexpected structure");
  refuses("{}", "no \"model\"");
  refuses("not json", "tokenizer.json: invalid JSON");
  std::string no_merges = test::small_tokenizer_json();
  no_merges.replace(no_merges.find("\"h e\""), 5, "\"h q\"");
  refuses(no_merges, "merge part");
}

// HF gives an added token its id by content and only warns where the file
// disagrees; a file whose ids and contents disagree is refused (it was read
// one way by us and another by HF). So are ids that would size the per-id
// tables far past the file's tokens.
TEST(SmallTokenizer, IdsThatDisagreeWithContentsAreRefused) {
  const auto added = [](const std::string& id, const std::string& content) {
    return R"(,{"id":)" + id + R"(,"content":")" + content + R"(","special":false})";
  };
  refuses(test::small_tokenizer_json(added("97", "<x>")), "added token '<x>' has id 97, which is already 'a'");
  refuses(test::small_tokenizer_json(added("270", "aa")), "added token 'aa' has id 270 but is the vocab's token 264");
  refuses(test::small_tokenizer_json(added("270", "<d>") + added("271", "<d>")), "added token '<d>' is listed twice");
  refuses(test::small_tokenizer_json(added("270", "<y>") + added("270", "<z>")), "added token '<z>' has id 270, which is already '<y>'");
  refuses(test::small_tokenizer_json(added("4294967400", "<y>")), "added token id 4294967400 is not a non-negative int32");
  refuses(test::small_tokenizer_json(added("2000000000", "<y>")), "id 2000000000 is far past the file's 271 tokens");
  std::string dup = test::small_tokenizer_json();
  dup.replace(dup.find(R"("aa":264)"), 8, R"("aa":97)");
  refuses(dup, "vocab id 97 is given to both 'a' and 'aa'");
  // An added token that is the vocab's token of the same id is the usual case.
  const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json(added("264", "aa")));
  EXPECT_EQ(t.encode("aaa"), (Ids{264, 'a'}));
}

// Oniguruma (Ruby syntax, as HF compiles the Split pattern) matches ^ and $
// at line boundaries and reads (?m) as dot-matches-newline; PCRE2 does not.
TEST(SplitRegexTranslation, AnchorsAndOptionsOtherThanIAreRefused) {
  for (const char* p : {"^a|a+", "a$", "(?m).+", "(?s:.)", "(?x) a", "(?im:a)", "(?-m)a"})
    EXPECT_THROW(translate_oniguruma_pattern(p), FormatError) << p;
  for (const char* p : {"(?i:'s|'t)", "(?:ab)+", "\\s+(?!\\S)", "(?=a)b", "(?<=a)b", "(?<!a)b", "[$^a]", "\\$\\^",
                        "[^a]"})
    EXPECT_NO_THROW(translate_oniguruma_pattern(p)) << p;
}

TEST(SplitRegexTranslation, SpaceIsOnigurumasWhiteSpace) {
  EXPECT_EQ(translate_oniguruma_pattern("\\s+(?!\\S)"),
            "[\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}]+(?![^\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}])");
  EXPECT_EQ(translate_oniguruma_pattern("[^\\s\\p{L}]"), "[^\\t\\n\\x{0B}\\f\\r\\x{85}\\p{Z}\\p{L}]");
  EXPECT_THROW(translate_oniguruma_pattern("[^\\S]"), FormatError);
  // U+180E is not white space in Oniguruma (nor in Unicode since 6.3): a
  // letter-run regex piece "\u180Ex" forms, not a whitespace piece.
  SplitRegex re("\\s+|[^\\s]+");
  std::vector<std::string> pieces;
  const std::string text = "a\xE1\xA0\x8E" "b c";
  re.split(text, [&](size_t b, size_t e) { pieces.push_back(text.substr(b, e - b)); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"a\xE1\xA0\x8E" "b", " ", "c"}));
  EXPECT_TRUE(re.jit());
}

}  // namespace
}  // namespace wd::tok
