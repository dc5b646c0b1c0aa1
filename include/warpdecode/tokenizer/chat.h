// Chat prompts in Qwen3's ChatML, rendered natively (no Jinja), and the
// checkpoint's generation defaults.
//
// warpdecode does NOT execute the Jinja `chat_template` of tokenizer_config.json.
// It renders Qwen3's template (the hybrid-thinking one the Qwen3 and
// Qwen3-MoE checkpoints ship) with the same output, byte for byte, for:
//   - roles system (first or later), user, assistant;
//   - assistant history with <think>...</think> in its content or a separate
//     reasoning_content (kept only after the last user query, as Qwen3 does);
//   - add_generation_prompt, and enable_thinking true / false / unset
//     (false appends the empty "<think>\n\n</think>\n\n" block).
// Refused by name (wd::InvalidArgument): tools, tool calls, the "tool" role,
// any other role, non-text content. A checkpoint whose chat_template is not
// recognisably Qwen3's is refused with wd::FormatError (see docs/TOKENIZER.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // text only
  // Qwen3's optional assistant field; when absent, reasoning is taken from a
  // <think>...</think> block inside `content`, as the template does.
  std::optional<std::string> reasoning_content = std::nullopt;
  // Requests for what we do not render; non-empty is refused by name.
  std::vector<std::string> tool_calls = {};
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // nullopt = the template's default (not passed: thinking on).
  std::optional<bool> enable_thinking;
  // JSON schemas of tools; non-empty is refused by name.
  std::vector<std::string> tools;
};

// Qwen3 ChatML. Throws wd::InvalidArgument on unsupported requests.
std::string render_qwen3_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {});

// generation_config.json: the fields decode uses. Absent fields stay empty.
struct GenerationConfig {
  std::vector<TokenId> eos_token_ids;  // int or list in the file
  std::optional<TokenId> bos_token_id, pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<int> max_new_tokens;
};
GenerationConfig read_generation_config(const std::string& path);

// tokenizer_config.json: the fields the text interface uses.
struct TokenizerConfig {
  std::optional<std::string> eos_token, bos_token, pad_token;
  std::optional<std::string> chat_template;  // also read from chat_template.jinja beside it
  bool add_bos_token = false;
  bool split_special_tokens = false;
};
TokenizerConfig read_tokenizer_config(const std::string& path);

// Which chat template a checkpoint ships, as far as we can tell without Jinja.
// kNone: the checkpoint has none (we render Qwen3 ChatML).
enum class ChatTemplateKind { kQwen3Hybrid, kUnknown, kNone };
ChatTemplateKind classify_chat_template(const std::string& jinja_source);

// Everything a checkpoint directory says about its text interface:
// tokenizer.json, tokenizer_config.json (+ chat_template.jinja), and
// generation_config.json (optional).
struct TextInterface {
  Tokenizer tokenizer;
  TokenizerConfig tokenizer_config;
  GenerationConfig generation;
  // The stop ids: generation_config's eos ids, plus tokenizer_config's
  // eos_token if it is not among them.
  std::vector<TokenId> stop_token_ids;
  ChatTemplateKind chat_template = ChatTemplateKind::kNone;

  // Renders with Qwen3 ChatML and encodes (honouring split_special_tokens).
  // Throws wd::FormatError when the checkpoint's chat_template is not Qwen3's
  // (we would render another format than the model was trained on).
  std::vector<TokenId> encode_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const;
};
// Reads tokenizer.json, and tokenizer_config.json / generation_config.json
// when present. Plain encode / decode work whatever the chat template is.
TextInterface load_text_interface(const std::string& checkpoint_dir);

// Throws wd::FormatError naming `where` unless `kind` is one we render.
void require_qwen3_chat_template(ChatTemplateKind kind, const std::string& where);

}  // namespace wd::tok
