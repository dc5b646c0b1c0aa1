// Our ids, tokens' decodes and chat renderings against what Hugging Face
// tokenizers / transformers produced for the fixture (every case, no
// sampling). Skips with a message until the fixture is committed.
#include <gtest/gtest.h>

#include "fixture.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/split_regex.h"
#include "warpdecode/tokenizer/chat.h"
#include "warpdecode/tokenizer/stream_decoder.h"

namespace wd::tok {
namespace {

using nlohmann::json;
using test::expected;
using test::fixture_tokenizer;

std::string show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    char buf[8];
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += char(c);
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

TEST(TokenizerFixture, VersionsRecorded) {
  WD_REQUIRE_FIXTURE();
  ASSERT_TRUE(expected().contains("versions"));
  std::printf("fixture made with %s\n", expected()["versions"].dump().c_str());
  EXPECT_GT(expected()["cases"].size(), 300u);
}

TEST(TokenizerFixture, IdsEqualTheReferenceOnEveryString) {
  WD_REQUIRE_FIXTURE();
  size_t checked = 0, failed = 0;
  for (const json& c : expected()["cases"]) {
    const Tokenizer& tok = fixture_tokenizer(c["tokenizer"].get<std::string>());
    const std::string text = c["text"].get<std::string>();
    EncodeOptions opt;
    opt.recognize_special_tokens = !c["encode_special_tokens"].get<bool>();
    const auto want = c["ids"].get<std::vector<TokenId>>();
    const auto got = tok.encode(text, opt);
    ++checked;
    if (got != want) {
      ++failed;
      ADD_FAILURE() << c["tokenizer"] << " text \"" << show(text) << "\"\n  want " << json(want).dump()
                    << "\n  got  " << json(got).dump() << "\n  reference tokens " << c["tokens"].dump();
    }
  }
  std::printf("%zu strings checked, %zu differ\n", checked, failed);
}

// The Split regex alone: our pieces of NFC(text), in byte-level spelling,
// against the library's pre_tokenize_str (recorded for the main tokenizer).
TEST(TokenizerFixture, RegexPiecesEqualTheReference) {
  WD_REQUIRE_FIXTURE();
  const Tokenizer& tok = fixture_tokenizer("main");
  const SplitRegex regex(tok.split_regex());
  size_t checked = 0;
  for (const json& c : expected()["cases"]) {
    if (!c.contains("pieces")) continue;
    const std::string text = Tokenizer::nfc(c["text"].get<std::string>());
    std::vector<std::string> got;
    regex.split(text, [&](size_t b, size_t e) {
      std::string piece;
      for (size_t i = b; i < e; ++i) piece += byte_level::symbol_text(static_cast<uint8_t>(text[i]));
      got.push_back(piece);
    });
    EXPECT_EQ(got, c["pieces"].get<std::vector<std::string>>()) << show(text);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "fixture predates the recorded regex pieces; regenerate it";
  std::printf("%zu strings split\n", checked);
}

TEST(TokenizerFixture, DecodeEqualsTheReference) {
  WD_REQUIRE_FIXTURE();
  for (const json& c : expected()["cases"]) {
    const Tokenizer& tok = fixture_tokenizer(c["tokenizer"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << show(c["text"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>()) << show(c["text"].get<std::string>());
  }
  for (const json& c : expected()["decode_cases"]) {
    const Tokenizer& tok = fixture_tokenizer(c["tokenizer"].get<std::string>());
    const auto ids = c["ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tok.decode(ids, false), c["decoded"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>()) << c["ids"].dump();
    // Streaming gives the same text.
    for (bool skip : {false, true}) {
      StreamDecoder stream(tok, skip);
      std::string text;
      for (TokenId id : ids) text += stream.push(id);
      text += stream.finish();
      EXPECT_EQ(text, c[skip ? "decoded_skip_special" : "decoded"].get<std::string>()) << c["ids"].dump();
    }
  }
}

// decode(encode(s)) == NFC(s) wherever the reference says so too (added tokens
// with lstrip/rstrip drop whitespace, and pieces around an added token are
// normalised apart, so the reference's own decode is the judge elsewhere).
TEST(TokenizerFixture, RoundTripIsNfc) {
  WD_REQUIRE_FIXTURE();
  size_t nfc_cases = 0;
  for (const json& c : expected()["cases"]) {
    const Tokenizer& tok = fixture_tokenizer(c["tokenizer"].get<std::string>());
    const std::string text = c["text"].get<std::string>();
    EncodeOptions opt;
    opt.recognize_special_tokens = !c["encode_special_tokens"].get<bool>();
    const std::string round = tok.decode(tok.encode(text, opt));
    if (c["decoded"] == c["nfc"]) {
      ++nfc_cases;
      EXPECT_EQ(round, Tokenizer::nfc(text)) << show(text);
      EXPECT_EQ(Tokenizer::nfc(text), c["nfc"].get<std::string>()) << "NFC differs from Python's: " << show(text);
    }
  }
  EXPECT_GT(nfc_cases, 300u);
}

TEST(TokenizerFixture, ChatRenderingEqualsTransformers) {
  WD_REQUIRE_FIXTURE();
  const json& chat = expected()["chat"];
  if (!chat.contains("cases") || chat["cases"].empty())
    GTEST_SKIP() << "fixture has no chat goldens: " << chat.value("error", std::string("(no reason recorded)"));
  const Tokenizer& tok = fixture_tokenizer("main");
  size_t n = 0;
  for (const json& c : chat["cases"]) {
    if (c.contains("error")) {
      ADD_FAILURE() << "transformers failed on a chat case: " << c["error"];
      continue;
    }
    std::vector<ChatMessage> messages;
    for (const json& m : c["messages"]) {
      ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>(), std::nullopt, {}};
      if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
      messages.push_back(msg);
    }
    ChatOptions opt;
    opt.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (!c["enable_thinking"].is_null()) opt.enable_thinking = c["enable_thinking"].get<bool>();
    const std::string text = render_qwen3_chat(messages, opt);
    EXPECT_EQ(show(text), show(c["text"].get<std::string>())) << c["messages"].dump();
    EXPECT_EQ(tok.encode(text), c["ids"].get<std::vector<TokenId>>()) << c["messages"].dump();
    ++n;
  }
  EXPECT_GT(n, 10u);
}

TEST(TokenizerFixture, CheckpointFilesLoad) {
  WD_REQUIRE_FIXTURE();
  if (!std::ifstream(test::fixture_dir() + "/tokenizer_config.json").good())
    GTEST_SKIP() << "fixture has no tokenizer_config.json";
  const TextInterface ti = load_text_interface(test::fixture_dir());
  const auto im_end = ti.tokenizer.token_to_id("<|im_end|>");
  const auto eot = ti.tokenizer.token_to_id("<|endoftext|>");
  ASSERT_TRUE(im_end && eot);
  EXPECT_EQ(ti.generation.eos_token_ids, (std::vector<TokenId>{*im_end, *eot}));
  EXPECT_EQ(ti.stop_token_ids, (std::vector<TokenId>{*im_end, *eot}));
  EXPECT_EQ(ti.generation.top_k, 20);
  EXPECT_DOUBLE_EQ(*ti.generation.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*ti.generation.top_p, 0.95);
  EXPECT_EQ(ti.tokenizer_config.eos_token, std::optional<std::string>("<|im_end|>"));
  ASSERT_TRUE(ti.tokenizer_config.chat_template.has_value());
  EXPECT_EQ(classify_chat_template(*ti.tokenizer_config.chat_template), ChatTemplateKind::kQwen3Hybrid);
}

TEST(TokenizerFixture, QwenAddedTokensAsQwenShipsThem) {
  WD_REQUIRE_FIXTURE();
  const Tokenizer& tok = fixture_tokenizer("main");
  const auto& added = tok.added_tokens();
  ASSERT_EQ(added.size(), 26u);
  EXPECT_EQ(added[0].content, "<|endoftext|>");
  EXPECT_TRUE(added[0].special);
  EXPECT_EQ(added[24].content, "<think>");
  EXPECT_FALSE(added[24].special);
  for (const auto& a : added) EXPECT_FALSE(a.normalized || a.lstrip || a.rstrip || a.single_word) << a.content;
}

}  // namespace
}  // namespace wd::tok
