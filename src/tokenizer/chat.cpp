// Qwen3 ChatML rendered natively, and the checkpoint files around it.
//
// render_qwen3_chat follows Qwen3's Jinja template statement by statement
// (for text content): Python's str.strip/lstrip/rstrip('\n') and
// str.split(sep)[0] / [-1] are reproduced by the helpers below. Goldens
// rendered by transformers from the real template are in the fixture
// (tests/fixtures/tokenizer/expected.json, "chat").
#include "warpdecode/tokenizer/chat.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/json_read.h"
#include "core/read_file.h"
#include "warpdecode/error.h"

namespace wd::tok {

using nlohmann::json;

namespace {

std::string lstrip_newlines(const std::string& s) {
  const size_t b = s.find_first_not_of('\n');
  return b == std::string::npos ? std::string() : s.substr(b);
}
std::string rstrip_newlines(const std::string& s) {
  const size_t e = s.find_last_not_of('\n');
  return e == std::string::npos ? std::string() : s.substr(0, e + 1);
}
std::string strip_newlines(const std::string& s) { return lstrip_newlines(rstrip_newlines(s)); }

// Python's s.split(sep)[0] and s.split(sep)[-1].
std::string before_first(const std::string& s, const std::string& sep) {
  const size_t p = s.find(sep);
  return p == std::string::npos ? s : s.substr(0, p);
}
std::string after_last(const std::string& s, const std::string& sep) {
  const size_t p = s.rfind(sep);
  return p == std::string::npos ? s : s.substr(p + sep.size());
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

json read_json(const std::string& path) {
  return json_read::parse(read_file(path), path);
}

// A token field of tokenizer_config.json: a string, or {"content": ...}, or null.
std::optional<std::string> token_field(const json& cfg, const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw FormatError(detail::concat("tokenizer_config.json: '", key, "' is neither a string nor {\"content\": ...}"));
}

}  // namespace

std::string render_qwen3_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  if (!options.tools.empty())
    throw InvalidArgument("chat: tools are not supported (warpdecode renders Qwen3 ChatML without tool "
                          "definitions and does not execute the Jinja chat_template)");
  if (messages.empty()) throw InvalidArgument("chat: no messages (Qwen3's template needs at least one)");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool")
      throw InvalidArgument(detail::concat("chat: message ", i, " has role 'tool': tool messages are not supported"));
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      throw InvalidArgument(detail::concat("chat: message ", i, " has role '", m.role,
                                           "'; supported roles are system, user and assistant"));
    if (!m.tool_calls.empty())
      throw InvalidArgument(detail::concat("chat: message ", i, " has tool calls: tool calls are not supported"));
  }

  std::string out;
  if (!messages.empty() && messages[0].role == "system")
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";

  // The last user message that is not a wrapped tool response ("the query");
  // reasoning is rendered only for assistant turns after it.
  const long n = long(messages.size());
  long last_query = n - 1;
  for (long i = n - 1; i >= 0; --i) {
    const ChatMessage& m = messages[size_t(i)];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }

  for (long i = 0; i < n; ++i) {
    const ChatMessage& m = messages[size_t(i)];
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string content = m.content;
      std::string reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (content.find("</think>") != std::string::npos) {
        reasoning = lstrip_newlines(after_last(rstrip_newlines(before_first(content, "</think>")), "<think>"));
        content = lstrip_newlines(after_last(content, "</think>"));
      }
      const bool last = i == n - 1;
      if (i > last_query && (last || !reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" + strip_newlines(reasoning) + "\n</think>\n\n" +
               lstrip_newlines(content);
      else
        out += "<|im_start|>assistant\n" + content;
      out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (options.enable_thinking.has_value() && !*options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

ChatTemplateKind classify_chat_template(const std::string& t) {
  // Markers of Qwen3's hybrid-thinking template, as they appear in its Jinja
  // source (with "\n" written as backslash-n). A template missing any of them
  // renders differently from what we render.
  const char* markers[] = {
      "<|im_start|>",
      "<|im_end|>",
      "enable_thinking is defined and enable_thinking is false",
      "<think>\\n\\n</think>\\n\\n",
      "reasoning_content",
      "last_query_index",
      "'<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n')",
  };
  for (const char* m : markers)
    if (t.find(m) == std::string::npos) return ChatTemplateKind::kUnknown;
  return ChatTemplateKind::kQwen3Hybrid;
}

GenerationConfig read_generation_config(const std::string& path) {
  const json j = read_json(path);
  if (!j.is_object()) throw FormatError(detail::concat(path, " is not a JSON object"));
  GenerationConfig g;
  auto id_of = [&](const json& v, const char* key) {
    if (!v.is_number_integer()) throw FormatError(detail::concat(path, ": '", key, "' holds a non-integer id"));
    return v.get<TokenId>();
  };
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    if (e.is_array())
      for (const json& v : e) g.eos_token_ids.push_back(id_of(v, "eos_token_id"));
    else
      g.eos_token_ids.push_back(id_of(e, "eos_token_id"));
  }
  if (j.contains("bos_token_id") && !j["bos_token_id"].is_null()) g.bos_token_id = id_of(j["bos_token_id"], "bos_token_id");
  if (j.contains("pad_token_id") && !j["pad_token_id"].is_null()) g.pad_token_id = id_of(j["pad_token_id"], "pad_token_id");
  try {
    if (j.contains("do_sample") && !j["do_sample"].is_null()) g.do_sample = j["do_sample"].get<bool>();
    if (j.contains("temperature") && !j["temperature"].is_null()) g.temperature = j["temperature"].get<double>();
    if (j.contains("top_p") && !j["top_p"].is_null()) g.top_p = j["top_p"].get<double>();
    if (j.contains("top_k") && !j["top_k"].is_null()) g.top_k = j["top_k"].get<int>();
    if (j.contains("repetition_penalty") && !j["repetition_penalty"].is_null())
      g.repetition_penalty = j["repetition_penalty"].get<double>();
    if (j.contains("max_new_tokens") && !j["max_new_tokens"].is_null()) g.max_new_tokens = j["max_new_tokens"].get<int>();
  } catch (const json::exception& e) {
    throw FormatError(detail::concat(path, ": a sampling field has the wrong type: ", e.what()));
  }
  return g;
}

namespace {

TokenizerConfig parse_tokenizer_config(const json& j, const std::string& path) {
  TokenizerConfig c;
  c.eos_token = token_field(j, "eos_token");
  c.bos_token = token_field(j, "bos_token");
  c.pad_token = token_field(j, "pad_token");
  if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) c.add_bos_token = j["add_bos_token"].get<bool>();
  if (j.contains("split_special_tokens") && j["split_special_tokens"].is_boolean())
    c.split_special_tokens = j["split_special_tokens"].get<bool>();
  if (j.contains("chat_template") && !j["chat_template"].is_null()) {
    const json& t = j["chat_template"];
    if (t.is_string()) {
      c.chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const json& e : t)
        if (e.is_object() && e.value("name", std::string()) == "default" && e.contains("template"))
          c.chat_template = e["template"].get<std::string>();
      if (!c.chat_template)
        throw FormatError(detail::concat(path, ": chat_template is a list without a \"default\" entry"));
    } else {
      throw FormatError(detail::concat(path, ": chat_template is neither a string nor a list"));
    }
  }
  const size_t slash = path.find_last_of('/');
  const std::string jinja = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "chat_template.jinja";
  if (!c.chat_template && is_regular_file(jinja)) c.chat_template = read_file(jinja);
  return c;
}

}  // namespace

TokenizerConfig read_tokenizer_config(const std::string& path) {
  try {
    return parse_tokenizer_config(read_json(path), path);
  } catch (const json::exception& e) {
    throw FormatError(detail::concat(path, ": unexpected structure: ", e.what()));
  }
}

void require_qwen3_chat_template(ChatTemplateKind kind, const std::string& where) {
  if (kind == ChatTemplateKind::kUnknown)
    throw FormatError(detail::concat(
        where, ": the chat_template is not Qwen3's hybrid-thinking ChatML template; warpdecode does not execute "
               "Jinja chat templates and renders only Qwen3 ChatML natively (docs/TOKENIZER.md)"));
}

std::vector<TokenId> TextInterface::encode_chat(const std::vector<ChatMessage>& messages,
                                                const ChatOptions& options) const {
  require_qwen3_chat_template(chat_template, "tokenizer_config.json");
  EncodeOptions eo;
  eo.recognize_special_tokens = !tokenizer_config.split_special_tokens;
  return tokenizer.encode(render_qwen3_chat(messages, options), eo);
}

TextInterface load_text_interface(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  TextInterface ti{Tokenizer::from_file(base + "tokenizer.json"), {}, {}, {}};
  if (is_regular_file(base + "tokenizer_config.json")) ti.tokenizer_config = read_tokenizer_config(base + "tokenizer_config.json");
  if (ti.tokenizer_config.chat_template) ti.chat_template = classify_chat_template(*ti.tokenizer_config.chat_template);
  if (ti.tokenizer_config.add_bos_token)
    throw FormatError(detail::concat(base, "tokenizer_config.json: add_bos_token=true is not supported (Qwen adds none)"));
  if (is_regular_file(base + "generation_config.json")) ti.generation = read_generation_config(base + "generation_config.json");
  ti.stop_token_ids = ti.generation.eos_token_ids;
  if (ti.tokenizer_config.eos_token) {
    const auto id = ti.tokenizer.token_to_id(*ti.tokenizer_config.eos_token);
    if (!id)
      throw FormatError(detail::concat(base, "tokenizer_config.json: eos_token '", *ti.tokenizer_config.eos_token,
                                       "' is not in the vocabulary"));
    if (std::find(ti.stop_token_ids.begin(), ti.stop_token_ids.end(), *id) == ti.stop_token_ids.end())
      ti.stop_token_ids.push_back(*id);
  }
  for (TokenId id : ti.stop_token_ids)
    if (id < 0 || size_t(id) >= ti.tokenizer.vocab_size())
      throw FormatError(detail::concat(base, "generation_config.json: stop id ", id, " is outside the vocabulary"));
  return ti;
}

}  // namespace wd::tok
