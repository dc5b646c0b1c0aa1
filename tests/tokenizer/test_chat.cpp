// Qwen3 ChatML rendering: golden strings worked out from Qwen3's template
// (the fixture adds goldens rendered by transformers itself), refusals by
// name, and the checkpoint's config files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "small_tokenizer.h"
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/chat.h"

namespace wd::tok {
namespace {

ChatMessage msg(const std::string& role, const std::string& content) { return ChatMessage{role, content, std::nullopt, {}}; }

ChatOptions thinking(std::optional<bool> on, bool gen = true) {
  ChatOptions o;
  o.add_generation_prompt = gen;
  o.enable_thinking = on;
  return o;
}

TEST(Qwen3Chat, GenerationPromptWithThinkingUnsetOnOff) {
  const std::vector<ChatMessage> m = {msg("user", "Hello!")};
  const std::string user = "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(render_qwen3_chat(m, thinking(std::nullopt)), user);
  EXPECT_EQ(render_qwen3_chat(m, thinking(true)), user);
  EXPECT_EQ(render_qwen3_chat(m, thinking(false)), user + "<think>\n\n</think>\n\n");
  EXPECT_EQ(render_qwen3_chat(m, thinking(false, false)), "<|im_start|>user\nHello!<|im_end|>\n");
}

TEST(Qwen3Chat, SystemFirstAndLater) {
  const std::vector<ChatMessage> m = {msg("system", "S1"), msg("user", "U"), msg("system", "S2"), msg("assistant", "A")};
  EXPECT_EQ(render_qwen3_chat(m, thinking(false)),
            "<|im_start|>system\nS1<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>system\nS2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(Qwen3Chat, ReasoningIsDroppedBeforeTheLastQueryAndKeptAfter) {
  const std::string think = "<think>\nThe user greets me.\n</think>\n\nHello!";
  // Before the last user message: the think block is removed.
  EXPECT_EQ(render_qwen3_chat({msg("user", "Hi"), msg("assistant", think), msg("user", "Again")}, thinking(false)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // After it (the final answer): kept, re-spaced.
  EXPECT_EQ(render_qwen3_chat({msg("user", "Hi"), msg("assistant", think)}, thinking(std::nullopt, false)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets me.\n</think>\n\n"
            "Hello!<|im_end|>\n");
  // The last assistant message gets an empty think block even without one.
  EXPECT_EQ(render_qwen3_chat({msg("user", "Hi"), msg("assistant", "Plain.")}, thinking(std::nullopt, false)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nPlain.<|im_end|>\n");
}

TEST(Qwen3Chat, ReasoningContentFieldAndNewlineStripping) {
  ChatMessage a = msg("assistant", "\n\nAnswer");
  a.reasoning_content = "\n\nsome reasoning\n\n";
  EXPECT_EQ(render_qwen3_chat({msg("user", "Q"), a}, thinking(std::nullopt, false)),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nsome reasoning\n</think>\n\nAnswer<|im_end|>\n");
  // Not last, after the query, with reasoning: kept; without: plain.
  ChatMessage r1 = msg("assistant", "A1");
  r1.reasoning_content = "R1";
  EXPECT_EQ(render_qwen3_chat({msg("user", "Q"), r1, msg("assistant", "A2")}, thinking(std::nullopt, false)),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR1\n</think>\n\nA1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
  EXPECT_EQ(render_qwen3_chat({msg("user", "Q"), msg("assistant", "A1"), msg("assistant", "A2")},
                              thinking(std::nullopt, false)),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
  // Several think tags: reasoning is after the last <think> before the first </think>,
  // content after the last </think>.
  EXPECT_EQ(render_qwen3_chat({msg("user", "Q"), msg("assistant", "<think>a<think>\nb\n</think>x</think>\n\ny")},
                              thinking(std::nullopt, false)),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nb\n</think>\n\ny<|im_end|>\n");
}

TEST(Qwen3Chat, WrappedToolResponsesAreNotQueries) {
  // A user message that is a wrapped tool response does not count as the
  // query, so the assistant after the real query keeps its reasoning.
  EXPECT_EQ(render_qwen3_chat({msg("user", "Q"), msg("assistant", "<think>r</think>a"),
                               msg("user", "<tool_response>\nok\n</tool_response>")},
                              thinking(std::nullopt, false)),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\na<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n");
}

TEST(Qwen3Chat, RefusesWhatItDoesNotRenderByName) {
  auto refuses = [](const std::vector<ChatMessage>& m, const ChatOptions& o, const std::string& words) {
    try {
      render_qwen3_chat(m, o);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  ChatOptions tools;
  tools.tools = {R"({"name":"get_weather"})"};
  refuses({msg("user", "x")}, tools, "tools are not supported");
  refuses({msg("user", "x"), msg("tool", "42")}, {}, "tool messages are not supported");
  ChatMessage call = msg("assistant", "");
  call.tool_calls = {R"({"name":"f","arguments":{}})"};
  refuses({msg("user", "x"), call}, {}, "tool calls are not supported");
  refuses({msg("developer", "x")}, {}, "role 'developer'");
  refuses({}, {}, "no messages");
}

TEST(Qwen3Chat, EncodesWithSpecialTokens) {
  const Tokenizer t = Tokenizer::from_json(test::small_tokenizer_json());
  const auto ids = t.encode(render_qwen3_chat({msg("user", "hello")}, thinking(false)));
  EXPECT_EQ(ids.front(), 266);  // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 267), 1);  // <|im_end|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 268), 1);  // <think>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 269), 1);  // </think>
}

TEST(Qwen3Chat, ClassifiesTemplates) {
  EXPECT_EQ(classify_chat_template("{{ messages }}"), ChatTemplateKind::kUnknown);
  const std::string qwen3 =
      "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}<|im_start|><|im_end|>"
      "{{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') }}"
      "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}";
  EXPECT_EQ(classify_chat_template(qwen3), ChatTemplateKind::kQwen3Hybrid);
}

// A scratch checkpoint directory with the given files.
class Checkpoint {
 public:
  Checkpoint() {
    char tmpl[] = "/tmp/wd_tok_ckpt_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~Checkpoint() {
    for (const auto& f : files_) std::remove((dir_ + "/" + f).c_str());
    rmdir(dir_.c_str());
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    files_.push_back(name);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

TEST(TextInterface, ReadsGenerationAndTokenizerConfigs) {
  Checkpoint c;
  c.write("tokenizer.json", test::small_tokenizer_json());
  c.write("generation_config.json",
          R"({"bos_token_id": 265, "do_sample": true, "eos_token_id": [267, 265], "pad_token_id": 265,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})");
  c.write("tokenizer_config.json", R"({"eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"},
              "bos_token": null, "add_bos_token": false, "split_special_tokens": false})");
  const TextInterface ti = load_text_interface(c.dir());
  EXPECT_EQ(ti.generation.eos_token_ids, (std::vector<TokenId>{267, 265}));
  EXPECT_EQ(ti.stop_token_ids, (std::vector<TokenId>{267, 265}));
  EXPECT_EQ(ti.generation.top_k, 20);
  EXPECT_DOUBLE_EQ(*ti.generation.top_p, 0.95);
  EXPECT_EQ(ti.tokenizer_config.pad_token, std::optional<std::string>("<|endoftext|>"));
  EXPECT_FALSE(ti.tokenizer_config.bos_token.has_value());
  EXPECT_EQ(ti.chat_template, ChatTemplateKind::kNone);  // none shipped: Qwen3 ChatML
  const auto ids = ti.encode_chat({msg("user", "hello")});
  EXPECT_EQ(ids.front(), 266);
}

TEST(TextInterface, EosTokenJoinsTheStopIdsAndSingleEosIdIsRead) {
  Checkpoint c;
  c.write("tokenizer.json", test::small_tokenizer_json());
  c.write("generation_config.json", R"({"eos_token_id": 265})");
  c.write("tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  const TextInterface ti = load_text_interface(c.dir());
  EXPECT_EQ(ti.stop_token_ids, (std::vector<TokenId>{265, 267}));
}

TEST(TextInterface, RefusesAForeignChatTemplateSayingJinjaIsNotExecuted) {
  Checkpoint c;
  c.write("tokenizer.json", test::small_tokenizer_json());
  c.write("tokenizer_config.json", R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"})");
  const TextInterface ti = load_text_interface(c.dir());
  EXPECT_EQ(ti.chat_template, ChatTemplateKind::kUnknown);
  EXPECT_EQ(ti.tokenizer.encode(" the"), (std::vector<TokenId>{258}));  // plain text still works
  try {
    ti.encode_chat({msg("user", "hello")});
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("does not execute Jinja"), std::string::npos) << e.what();
  }
}

TEST(TextInterface, ChatTemplateListTakesTheDefaultEntry) {
  Checkpoint c;
  c.write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"},
                                                         {"name": "default", "template": "y"}]})");
  EXPECT_EQ(read_tokenizer_config(c.dir() + "/tokenizer_config.json").chat_template, std::optional<std::string>("y"));
  c.write("bad_config.json", R"({"eos_token": 5})");
  EXPECT_THROW(read_tokenizer_config(c.dir() + "/bad_config.json"), FormatError);
}

TEST(TextInterface, ReadsChatTemplateJinjaFile) {
  Checkpoint c;
  c.write("tokenizer.json", test::small_tokenizer_json());
  c.write("tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  c.write("chat_template.jinja", "{{ not qwen }}");
  EXPECT_EQ(load_text_interface(c.dir()).chat_template, ChatTemplateKind::kUnknown);
}

}  // namespace
}  // namespace wd::tok
