// The Qwen2/Qwen3 tokenizer: byte-level BPE read from a Hugging Face
// tokenizer.json, giving the same ids as the HF `tokenizers` library.
//
// Pipeline of encode(text), in HF's order:
//   1. added tokens with normalized=false are cut out of the raw text
//      (leftmost-longest, then their single_word / lstrip / rstrip rules);
//   2. each remaining piece is NFC-normalised on its own, and added tokens
//      with normalized=true are cut out of the normalised piece;
//   3. each remaining piece is split by the tokenizer's Split regex
//      (Qwen's, behaviour Isolated), then byte-level BPE runs on each split
//      (merges applied by rank, leftmost first among equal ranks).
// decode(ids) maps every token back through the byte-level table (an added
// token whose text is not all byte-level characters gives its UTF-8 bytes, and
// a normalized added token decodes from its NFC form, as HF 0.23 does),
// concatenates the bytes, and replaces each maximal invalid UTF-8 subsequence
// with U+FFFD (Rust's from_utf8_lossy, which HF uses).
//
// What is accepted from tokenizer.json (anything else is refused by name, with
// a wd::FormatError): model BPE (no dropout, no byte_fallback, empty or null
// continuing_subword_prefix / end_of_word_suffix, ignore_merges either way);
// normalizer null or NFC; pre_tokenizer Split(Regex, Isolated) followed by
// ByteLevel(add_prefix_space=false, use_regex=false); decoder ByteLevel;
// post_processor null or ByteLevel; no truncation or padding.
//
// Thread safety: encode() and decode() may be called from several threads; the
// word cache is shared under a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wd::tok {

using TokenId = int32_t;

struct EncodeOptions {
  // false = HF's `encode_special_tokens = True` / transformers'
  // `split_special_tokens=True`: tokens flagged special are not recognised in
  // the text and are encoded as plain text. Non-special added tokens (e.g.
  // <think>) are always recognised, as in HF.
  bool recognize_special_tokens = true;
};

// An entry of tokenizer.json's "added_tokens", with HF's flags.
struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class Tokenizer {
 public:
  // Reads and validates a tokenizer.json. Throws wd::FormatError naming the
  // unsupported or malformed part.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(std::string_view json_text);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8 (HF's input is a Python str, which cannot hold
  // anything else); invalid UTF-8 throws wd::InvalidArgument naming the first
  // bad byte's offset.
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // Every id must be < vocab_size() (HF skips unknown ids silently; we refuse
  // them with wd::InvalidArgument, since one is always a caller bug, e.g. a
  // sampled id from the padded rows of the embedding).
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const;

  // The bytes one token contributes to decode(), before the UTF-8 repair
  // (empty if skipped; throws on a bad id, like decode). For StreamDecoder.
  std::string_view token_bytes(TokenId id, bool skip_special_tokens = false) const;

  // One past the largest id (model vocab and added tokens).
  size_t vocab_size() const;
  // The token's text as tokenizer.json spells it (byte-level characters for
  // model tokens, the content for added tokens); throws on a bad id.
  const std::string& id_to_token(TokenId id) const;
  // Looks up added tokens first, then the model vocab (as HF does).
  std::optional<TokenId> token_to_id(std::string_view token) const;
  bool is_special(TokenId id) const;
  const std::vector<AddedToken>& added_tokens() const;
  // The Split regex as read from tokenizer.json.
  const std::string& split_regex() const;

  // NFC as the tokenizer applies it (utf8proc), exposed for tests and tools.
  static std::string nfc(std::string_view text);

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static Tokenizer from_document(const nlohmann::json& doc);
  std::unique_ptr<Impl> impl_;
};

}  // namespace wd::tok
