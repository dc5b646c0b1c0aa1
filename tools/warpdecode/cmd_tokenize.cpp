// warpdecode tokenize: text -> ids, ids -> text, and Qwen3 ChatML prompts, with
// the tokenizer of a checkpoint (a tokenizer.json, or the checkpoint
// directory holding it).
//
//   warpdecode tokenize --tokenizer DIR_OR_FILE TEXT...      one line of ids per TEXT
//   warpdecode tokenize --tokenizer ... --tokens TEXT        one "id<TAB>token" line per token
//   warpdecode tokenize --tokenizer ... --decode ID...       the text of the ids
//   warpdecode tokenize --tokenizer ... --chat [--system S] [--no-thinking] TEXT...
//        each TEXT is a user turn; prints the ids of the rendered prompt
//        (with --text, the prompt itself). No TEXT: read stdin as one text.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "tools/warpdecode/commands.h"
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/chat.h"
#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::cli {
namespace {

struct Opts {
  std::string tokenizer;
  std::vector<std::string> args;
  std::string system;
  bool decode = false, chat = false, text = false, tokens = false, skip_special = false;
  bool thinking = false, no_thinking = false, split_special = false;
};

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The directory part of a file path ("." for a bare name).
std::string directory_of(const std::string& file) {
  const size_t slash = file.find_last_of('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

std::string join_ids(const std::vector<tok::TokenId>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  return line;
}

std::vector<tok::TokenId> parse_ids(const std::vector<std::string>& args) {
  std::vector<tok::TokenId> ids;
  for (const std::string& a : args) {
    size_t pos = 0;
    long long v = -1;
    try {
      v = std::stoll(a, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != a.size() || v < 0 || v > INT32_MAX)
      throw InvalidArgument(detail::concat("--decode takes token ids (non-negative integers), got '", a, "'"));
    ids.push_back(tok::TokenId(v));
  }
  return ids;
}

void run(const Opts& o) {
  if (o.thinking && o.no_thinking) throw InvalidArgument("--thinking and --no-thinking exclude each other");
  if (o.decode && o.chat) throw InvalidArgument("--decode and --chat exclude each other");
  if ((o.thinking || o.no_thinking || !o.system.empty() || o.text) && !o.chat)
    throw InvalidArgument("--system, --thinking, --no-thinking and --text apply to --chat");
  if (o.skip_special && !o.decode) throw InvalidArgument("--skip-special applies to --decode");
  if (o.tokens && (o.decode || o.text))
    throw InvalidArgument("--tokens prints encoded ids: not with --decode or --text");

  // A directory is a checkpoint; a file is a tokenizer.json whose directory
  // may hold the checkpoint's tokenizer_config.json. The chat template is
  // checked only when a chat prompt is asked for.
  const bool dir = is_directory(o.tokenizer);
  const std::string ckpt = dir ? o.tokenizer : directory_of(o.tokenizer);
  const tok::Tokenizer t = tok::Tokenizer::from_file(dir ? ckpt + "/tokenizer.json" : o.tokenizer);
  tok::TokenizerConfig config;
  const std::string config_path = ckpt + "/tokenizer_config.json";
  struct stat st {};
  if (stat(config_path.c_str(), &st) == 0) config = tok::read_tokenizer_config(config_path);
  if (o.chat && config.chat_template)
    tok::require_qwen3_chat_template(tok::classify_chat_template(*config.chat_template), config_path);
  tok::EncodeOptions eo;
  eo.recognize_special_tokens = !(o.split_special || config.split_special_tokens);

  // One line of ids, or with --tokens one 'id<TAB>token' line per token.
  auto print_ids = [&](const std::vector<tok::TokenId>& ids) {
    if (!o.tokens) {
      std::printf("%s\n", join_ids(ids).c_str());
      return;
    }
    for (tok::TokenId id : ids) std::printf("%d\t%s\n", id, t.id_to_token(id).c_str());
  };

  // CLI11 reads an argument in brackets as a list ("[1,2]" as the two texts
  // "1" and "2"): such an argument is refused, not encoded as something else.
  const std::vector<std::string>& argv = command_args();
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    const bool option_value = argv[i - 1] == "--tokenizer" || argv[i - 1] == "--system";
    if (!option_value && a.size() >= 2 && a.front() == '[' && a.back() == ']')
      throw InvalidArgument("the argument '" + a + "' is in brackets, which the option parser reads as a list; "
                            "give such a text on stdin");
  }
  std::vector<std::string> texts = o.args;
  if (texts.empty()) {
    if (o.decode) throw InvalidArgument("--decode needs token ids");
    texts.push_back(std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()));
  }

  if (o.decode) {
    // Whole, NUL bytes included (an id may decode to one).
    const std::string text = t.decode(parse_ids(texts), o.skip_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  if (o.chat) {
    std::vector<tok::ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system, std::nullopt, {}});
    for (const std::string& s : texts) messages.push_back({"user", s, std::nullopt, {}});
    tok::ChatOptions co;
    if (o.thinking) co.enable_thinking = true;
    if (o.no_thinking) co.enable_thinking = false;
    const std::string prompt = tok::render_qwen3_chat(messages, co);
    if (o.text)
      std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    else
      print_ids(t.encode(prompt, eo));
    return;
  }
  for (const std::string& s : texts) print_ids(t.encode(s, eo));
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenize", "Encode text to token ids, decode ids, or render a Qwen3 ChatML prompt");
  cmd->add_option("--tokenizer", opts->tokenizer, "tokenizer.json, or a checkpoint directory holding it")
      ->required();
  cmd->add_option("args", opts->args, "texts to encode (ids with --decode); none: read stdin");
  cmd->add_flag("--decode", opts->decode, "decode the given ids to text");
  cmd->add_flag("--skip-special", opts->skip_special, "with --decode: leave out special tokens");
  cmd->add_flag("--tokens", opts->tokens, "print one 'id<TAB>token' line per token (encoding, --chat included)");
  cmd->add_flag("--split-special", opts->split_special, "encode special-token text as plain text");
  cmd->add_flag("--chat", opts->chat, "render each text as a user turn of a Qwen3 ChatML prompt and encode it");
  cmd->add_option("--system", opts->system, "with --chat: a system message");
  cmd->add_flag("--thinking", opts->thinking, "with --chat: enable_thinking=true");
  cmd->add_flag("--no-thinking", opts->no_thinking, "with --chat: enable_thinking=false (empty think block)");
  cmd->add_flag("--text", opts->text, "with --chat: print the rendered prompt instead of its ids");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace wd::cli
