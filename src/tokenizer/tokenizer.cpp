// Tokenizer: loading tokenizer.json and the encode / decode pipelines (see the
// header for the pipeline and what is accepted).
#include "warpdecode/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <mutex>
#include <unordered_map>

#include "core/json_read.h"
#include "core/read_file.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/utf8.h"
#include "warpdecode/error.h"

namespace wd::tok {

using nlohmann::json;

struct Tokenizer::Impl {
  // Per id (size = vocab_size): the text tokenizer.json gives it, whether it is
  // assigned at all, whether it is special, and the bytes decode() emits.
  std::vector<std::string> tokens;
  std::vector<uint8_t> assigned, special, skip_special;
  std::string decode_bytes;
  std::vector<size_t> decode_offset;  // size + 1

  std::unordered_map<std::string, TokenId> added_by_content, model_by_token;
  std::vector<AddedToken> added;
  bool nfc = false;
  std::string regex_source;
  std::unique_ptr<SplitRegex> regex;
  std::unique_ptr<BpeModel> bpe;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  mutable std::mutex bpe_mutex;  // the BPE word cache

  void check_id(TokenId id) const {
    if (id < 0 || size_t(id) >= tokens.size() || !assigned[size_t(id)])
      throw InvalidArgument(detail::concat("token id ", id, " is not in the vocabulary (size ", tokens.size(), ")"));
  }
};

namespace {

[[noreturn]] void unsupported(const std::string& what, const json& value, const std::string& supported) {
  std::string v = value.dump();
  if (v.size() > 200) v = v.substr(0, 200) + "...";
  throw FormatError(detail::concat("tokenizer.json: unsupported ", what, " ", v, " (warpdecode supports ",
                                   supported, ")"));
}

std::string type_of(const json& node) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) return "";
  return node["type"].get<std::string>();
}

bool flag(const json& node, const char* key, bool fallback) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_boolean()) throw FormatError(detail::concat("tokenizer.json: '", key, "' is not a boolean"));
  return node[key].get<bool>();
}

bool parse_normalizer(const json& n) {
  if (n.is_null()) return false;
  const std::string t = type_of(n);
  if (t == "NFC") return true;
  if (t == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    bool nfc = false;
    for (const json& sub : n["normalizers"]) {
      if (type_of(sub) != "NFC") unsupported("normalizer", sub, "none or NFC");
      nfc = true;
    }
    return nfc;
  }
  unsupported("normalizer", n, "none or NFC");
}

// Returns the Split regex of Sequence[Split(Regex, Isolated), ByteLevel(no prefix space, no regex)].
std::string parse_pre_tokenizer(const json& p) {
  const std::string shape = "pre_tokenizer Sequence[Split(Regex, behavior Isolated, invert false), "
                            "ByteLevel(add_prefix_space false, use_regex false)] as Qwen2/Qwen3 ship it";
  if (type_of(p) != "Sequence" || !p.contains("pretokenizers") || !p["pretokenizers"].is_array() ||
      p["pretokenizers"].size() != 2)
    unsupported("pre_tokenizer", p, shape);
  const json& split = p["pretokenizers"][0];
  const json& bytes = p["pretokenizers"][1];
  if (type_of(split) != "Split") unsupported("pre_tokenizer step", split, shape);
  if (!split.contains("pattern") || !split["pattern"].is_object() || !split["pattern"].contains("Regex") ||
      !split["pattern"]["Regex"].is_string())
    unsupported("Split pattern", split.value("pattern", json()), "a {\"Regex\": ...} pattern");
  if (split.value("behavior", std::string()) != "Isolated")
    unsupported("Split behavior", split.value("behavior", json()), "Isolated");
  if (flag(split, "invert", false)) unsupported("Split invert", split["invert"], "false");
  if (type_of(bytes) != "ByteLevel") unsupported("pre_tokenizer step", bytes, shape);
  if (flag(bytes, "add_prefix_space", true)) unsupported("ByteLevel add_prefix_space", bytes, "false");
  if (flag(bytes, "use_regex", true)) unsupported("ByteLevel use_regex", bytes, "false");
  return split["pattern"]["Regex"].get<std::string>();
}

void check_pipeline_rest(const json& doc) {
  if (type_of(doc.value("decoder", json())) != "ByteLevel")
    unsupported("decoder", doc.value("decoder", json()), "ByteLevel");
  const json pp = doc.value("post_processor", json());
  if (!pp.is_null() && type_of(pp) != "ByteLevel")
    unsupported("post_processor", pp, "none or ByteLevel (which adds no tokens)");
  if (!doc.value("truncation", json()).is_null()) unsupported("truncation", doc["truncation"], "none");
  if (!doc.value("padding", json()).is_null()) unsupported("padding", doc["padding"], "none");
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const FormatError& e) {
    throw FormatError(detail::concat("tokenizer: ", e.what()));
  }
  try {
    return from_json(text);
  } catch (const FormatError& e) {
    throw FormatError(detail::concat(path, ": ", e.what()));
  }
}

Tokenizer Tokenizer::from_json(std::string_view text) {
  const json doc = json_read::parse(text, "tokenizer.json");
  if (!doc.is_object() || !doc.contains("model")) throw FormatError("tokenizer.json has no \"model\"");
  try {
    return from_document(doc);
  } catch (const json::exception& e) {  // a field of the wrong JSON type
    throw FormatError(detail::concat("tokenizer.json: unexpected structure: ", e.what()));
  }
}

Tokenizer Tokenizer::from_document(const nlohmann::json& doc) {
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;

  // --- pipeline --------------------------------------------------------------
  t.nfc = parse_normalizer(doc.value("normalizer", json()));
  t.regex_source = parse_pre_tokenizer(doc.value("pre_tokenizer", json()));
  check_pipeline_rest(doc);
  t.regex = std::make_unique<SplitRegex>(t.regex_source);

  // --- model -----------------------------------------------------------------
  const json& model = doc["model"];
  if (type_of(model) != "BPE") unsupported("model", json(type_of(model)), "BPE");
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    unsupported("BPE dropout", model["dropout"], "none");
  if (flag(model, "byte_fallback", false)) unsupported("BPE byte_fallback", model["byte_fallback"], "false");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      unsupported(std::string("BPE ") + key, model[key], "null or \"\"");
  }
  const bool ignore_merges = flag(model, "ignore_merges", false);
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw FormatError("tokenizer.json: model has no vocab");
  if (!model.contains("merges") || !model["merges"].is_array())
    throw FormatError("tokenizer.json: model has no merges list");

  TokenId max_id = -1;
  std::vector<std::pair<std::string, TokenId>> vocab;
  vocab.reserve(model["vocab"].size());
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX)
      throw FormatError(detail::concat("tokenizer.json: vocab id of ", it.key(), " is not a non-negative int32"));
    const TokenId id = it.value().get<TokenId>();
    if (utf8::find_invalid(it.key()) != std::string_view::npos)
      throw FormatError("tokenizer.json: a vocab token is not valid UTF-8");
    vocab.emplace_back(it.key(), id);
    t.model_by_token.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  const json& added = doc.value("added_tokens", json::array());
  if (!added.is_array()) throw FormatError("tokenizer.json: added_tokens is not a list");
  for (const json& a : added) {
    AddedToken tok;
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      throw FormatError(detail::concat("tokenizer.json: malformed added token ", a.dump()));
    if (a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() > INT32_MAX)
      throw FormatError(detail::concat("tokenizer.json: added token id ", a["id"].dump(), " is not a non-negative int32"));
    tok.id = a["id"].get<TokenId>();
    tok.content = a["content"].get<std::string>();
    if (utf8::find_invalid(tok.content) != std::string_view::npos)
      throw FormatError("tokenizer.json: an added token is not valid UTF-8");
    // HF gives an added token its id by content (the model token's id, else
    // the next free one) and only warns where the file's id differs: a file
    // whose ids disagree with its contents is refused, not read two ways.
    if (t.added_by_content.count(tok.content))
      throw FormatError(detail::concat("tokenizer.json: added token '", tok.content, "' is listed twice"));
    if (const auto m = t.model_by_token.find(tok.content); m != t.model_by_token.end() && m->second != tok.id)
      throw FormatError(detail::concat("tokenizer.json: added token '", tok.content, "' has id ", tok.id,
                                       " but is the vocab's token ", m->second));
    tok.special = flag(a, "special", false);
    tok.normalized = flag(a, "normalized", !tok.special);
    tok.lstrip = flag(a, "lstrip", false);
    tok.rstrip = flag(a, "rstrip", false);
    tok.single_word = flag(a, "single_word", false);
    max_id = std::max(max_id, tok.id);
    t.added_by_content[tok.content] = tok.id;
    t.added.push_back(std::move(tok));
  }

  // Ids need not be dense, but every per-id table below is max_id + 1 long.
  const size_t tokens = vocab.size() + t.added.size();
  if (size_t(max_id) >= 2 * tokens + 1024)
    throw FormatError(detail::concat("tokenizer.json: id ", max_id, " is far past the file's ", tokens,
                                     " tokens (ids are indexes: a table that large is refused)"));

  // --- per-id tables (decode) -------------------------------------------------
  // HF decodes an id through the ByteLevel decoder from its "decoding string":
  // the model token, an added token's content, or, for a normalized added
  // token whose content NFC changes, that NFC form (HF's normalized cache).
  // skip_special_tokens drops an id when its decoding string is the content of
  // a special added token (HF looks the string up, not the id).
  const size_t size = size_t(max_id) + 1;
  t.tokens.assign(size, std::string());
  t.assigned.assign(size, 0);
  t.special.assign(size, 0);
  t.skip_special.assign(size, 0);
  std::vector<std::string> decoding(size);
  for (const auto& [token, id] : vocab) {
    if (t.assigned[size_t(id)])
      throw FormatError(detail::concat("tokenizer.json: vocab id ", id, " is given to both '", t.tokens[size_t(id)],
                                       "' and '", token, "'"));
    t.tokens[size_t(id)] = token;
    decoding[size_t(id)] = token;
    t.assigned[size_t(id)] = 1;
  }
  std::unordered_map<std::string, bool> special_contents;
  // An added token is a model token of the same content and id, or has an id
  // of its own (HF's ids by content, checked above and here).
  for (const AddedToken& a : t.added) {
    if (t.assigned[size_t(a.id)] && t.tokens[size_t(a.id)] != a.content)
      throw FormatError(detail::concat("tokenizer.json: added token '", a.content, "' has id ", a.id,
                                       ", which is already '", t.tokens[size_t(a.id)], "'"));
    t.tokens[size_t(a.id)] = a.content;
    decoding[size_t(a.id)] = a.content;
    if (a.normalized && t.nfc) {
      decoding[size_t(a.id)].clear();
      append_nfc(decoding[size_t(a.id)], a.content);
    }
    t.assigned[size_t(a.id)] = 1;
    t.special[size_t(a.id)] = a.special;
    if (a.special) special_contents[a.content] = true;
  }
  t.decode_offset.assign(size + 1, 0);
  std::string bytes;
  for (size_t id = 0; id < size; ++id) {
    t.decode_offset[id] = t.decode_bytes.size();
    t.skip_special[id] = special_contents.count(decoding[id]) > 0;
    // The ByteLevel decoder: a token all of whose characters are byte-level
    // symbols gives those bytes; any other token gives its own UTF-8.
    if (byte_level::token_to_bytes(decoding[id], &bytes))
      t.decode_bytes += bytes;
    else
      t.decode_bytes += decoding[id];
  }
  t.decode_offset[size] = t.decode_bytes.size();

  // --- BPE ---------------------------------------------------------------------
  TokenId byte_ids[256];
  for (int b = 0; b < 256; ++b) {
    auto it = t.model_by_token.find(byte_level::symbol_text(uint8_t(b)));
    if (it == t.model_by_token.end())
      throw FormatError(detail::concat("tokenizer.json: the vocab lacks the byte-level symbol of byte ", b,
                                       ", so some text could not be encoded"));
    byte_ids[b] = it->second;
  }
  std::vector<BpeModel::VocabEntry> entries;
  if (ignore_merges) {
    for (const auto& [token, id] : vocab)
      if (byte_level::token_to_bytes(token, &bytes)) entries.push_back({bytes, id});
  }
  std::vector<BpeModel::Merge> merges;
  merges.reserve(model["merges"].size());
  auto vocab_id = [&](const std::string& tok) {
    auto it = t.model_by_token.find(tok);
    if (it == t.model_by_token.end())
      throw FormatError(detail::concat("tokenizer.json: merge part '", tok, "' is not in the vocab"));
    return it->second;
  };
  for (const json& m : model["merges"]) {
    std::string left, right;
    if (m.is_string()) {  // "a b", the format of older files (and of Qwen's)
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw FormatError(detail::concat("tokenizer.json: merge '", s, "' is not two tokens separated by a space"));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw FormatError(detail::concat("tokenizer.json: malformed merge ", m.dump()));
    }
    merges.push_back({vocab_id(left), vocab_id(right), vocab_id(left + right)});
  }
  t.bpe = std::make_unique<BpeModel>(byte_ids, std::move(entries), merges, ignore_merges);

  // --- added-token matchers ------------------------------------------------------
  std::vector<AddedTokenMatcher::Pattern> raw, normalized;
  for (const AddedToken& a : t.added) {
    if (a.normalized) {
      std::string pattern;
      if (t.nfc)
        append_nfc(pattern, a.content);
      else
        pattern = a.content;
      normalized.push_back({pattern, &a});
    } else {
      raw.push_back({a.content, &a});
    }
  }
  t.raw_matcher = AddedTokenMatcher(std::move(raw));
  t.normalized_matcher = AddedTokenMatcher(std::move(normalized));
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& t = *impl_;
  const size_t bad = utf8::find_invalid(text);
  if (bad != std::string_view::npos)
    throw InvalidArgument(detail::concat("text is not valid UTF-8: byte 0x", std::hex,
                                         unsigned(static_cast<unsigned char>(text[bad])), std::dec, " at offset ",
                                         bad, " (the reference tokenizer takes only Unicode text)"));
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 8);
  std::vector<AddedTokenMatcher::Split> outer, inner;
  std::string normalized;
  const bool special = options.recognize_special_tokens;

  std::lock_guard<std::mutex> lock(t.bpe_mutex);
  auto encode_plain = [&](std::string_view piece) {
    t.regex->split(piece, [&](size_t b, size_t e) { t.bpe->encode_piece(piece.substr(b, e - b), ids); });
  };
  auto encode_unmatched = [&](std::string_view piece) {
    std::string_view norm = piece;
    if (t.nfc) {
      normalized.clear();
      append_nfc(normalized, piece);
      norm = normalized;
    }
    if (t.normalized_matcher.empty()) {
      encode_plain(norm);
      return;
    }
    inner.clear();
    t.normalized_matcher.find(norm, special, inner);
    for (const auto& s : inner) {
      if (s.token)
        ids.push_back(s.token->id);
      else
        encode_plain(norm.substr(s.begin, s.end - s.begin));
    }
  };

  if (t.raw_matcher.empty()) {
    encode_unmatched(text);
    return ids;
  }
  t.raw_matcher.find(text, special, outer);
  for (const auto& s : outer) {
    if (s.token)
      ids.push_back(s.token->id);
    else
      encode_unmatched(text.substr(s.begin, s.end - s.begin));
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::string bytes;
  for (TokenId id : ids) {
    t.check_id(id);
    bytes += token_bytes(id, skip_special_tokens);
  }
  std::string out;
  out.reserve(bytes.size());
  utf8::append_lossy(out, bytes);
  return out;
}

std::string_view Tokenizer::token_bytes(TokenId id, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  t.check_id(id);
  if (skip_special_tokens && t.skip_special[size_t(id)]) return {};
  return std::string_view(t.decode_bytes).substr(t.decode_offset[size_t(id)],
                                                 t.decode_offset[size_t(id) + 1] - t.decode_offset[size_t(id)]);
}

size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }

const std::string& Tokenizer::id_to_token(TokenId id) const {
  impl_->check_id(id);
  return impl_->tokens[size_t(id)];
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
  if (auto it = impl_->model_by_token.find(key); it != impl_->model_by_token.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
  impl_->check_id(id);
  return impl_->special[size_t(id)];
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

const std::string& Tokenizer::split_regex() const { return impl_->regex_source; }

std::string Tokenizer::nfc(std::string_view text) {
  const size_t bad = utf8::find_invalid(text);
  if (bad != std::string_view::npos)
    throw InvalidArgument(detail::concat("text is not valid UTF-8 at offset ", bad));
  std::string out;
  append_nfc(out, text);
  return out;
}

}  // namespace wd::tok
