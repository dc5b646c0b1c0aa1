// `warpdecode tokenize` as a user runs it, on the hand-built tokenizer
// written to a scratch file.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "small_tokenizer.h"

#include "test_support.h"

namespace {

using Result = wd::test::CliResult;

Result run(const std::string& args) { return wd::test::run_cli(WD_CLI_PATH, args); }

class CliTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/wd_tok_cli_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/tokenizer.json";
    std::ofstream(path_) << wd::tok::test::small_tokenizer_json();
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove((dir_ + "/tokenizer_config.json").c_str());
    rmdir(dir_.c_str());
  }
  std::string tok() const { return "tokenize --tokenizer " + path_ + " "; }
  std::string dir_, path_;
};

TEST_F(CliTokenize, HelpListsIt) {
  const Result r = run("--help");
  EXPECT_NE(r.output.find("tokenize"), std::string::npos) << r.output;
}

TEST_F(CliTokenize, EncodesEachTextOnItsOwnLine) {
  const Result r = run(tok() + "'hello the' aaaaa");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "257 259 111 258\n264 264 97\n");
}

TEST_F(CliTokenize, ReadsStdinWithoutText) {
  const Result r = run("tokenize --tokenizer " + path_ + " < /dev/null; printf ' the' | " + WD_CLI_PATH + " " + tok());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "\n258\n");
}

TEST_F(CliTokenize, Decodes) {
  const Result r = run(tok() + "--decode 266 257 259 111 258 267");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "<|im_start|>hello the<|im_end|>\n");
  EXPECT_EQ(run(tok() + "--decode --skip-special 266 257 259 111 267").output, "hello\n");
}

// Decoded text is written whole: the small tokenizer's id 0 is byte 0.
TEST_F(CliTokenize, DecodesANulByte) {
  const Result r = run(tok() + "--decode 97 0 98");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, std::string("a\0b\n", 4));
}

// CLI11 reads an argument in brackets as a list ("[1,2]" as the texts "1"
// and "2"): refused, where it was encoded as two other texts.
TEST_F(CliTokenize, RefusesATextInBrackets) {
  for (const char* args : {"-- '[1,2]'", "'[x]'", "--decode '[97,98]'"}) {
    const Result r = run(tok() + args);
    EXPECT_NE(r.status, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("is in brackets"), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_EQ(run(tok() + "'[x'").status, 0);
  EXPECT_EQ(run("tokenize --tokenizer " + path_ + " < /dev/null").status, 0);
}

TEST_F(CliTokenize, ShowsTokens) {
  const Result r = run(tok() + "--tokens ' the'");
  EXPECT_EQ(r.output, "258\t\xC4\xA0the\n");
  // The rendered chat prompt's tokens too, one line each, from <|im_start|>.
  const Result chat = run(tok() + "--chat --tokens hello");
  EXPECT_EQ(chat.status, 0) << chat.output;
  EXPECT_EQ(chat.output.rfind("266\t<|im_start|>\n", 0), 0u) << chat.output;
  EXPECT_EQ(chat.output.find(' '), std::string::npos) << chat.output;  // not one line of ids
}

TEST_F(CliTokenize, RendersAChatPrompt) {
  Result r = run(tok() + "--chat --text --system 'Be brief.' --no-thinking hello");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  r = run(tok() + "--chat hello");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("266 ", 0), 0u) << r.output;  // starts with <|im_start|>
}

TEST_F(CliTokenize, ACheckpointWithAnotherChatTemplateEncodesButRefusesChat) {
  std::ofstream(dir_ + "/tokenizer_config.json") << R"({"chat_template": "{{ messages }}"})";
  Result r = run("tokenize --tokenizer " + dir_ + " ' the'");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "258\n");
  r = run("tokenize --tokenizer " + dir_ + " --chat hi");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("does not execute Jinja chat templates"), std::string::npos) << r.output;
}

TEST_F(CliTokenize, ErrorsAreOneLineAndNonZero) {
  Result r = run("tokenize --tokenizer /nonexistent/tokenizer.json hi");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("warpdecode: error: tokenizer: cannot read '/nonexistent/tokenizer.json': No such file or "
                          "directory"),
            std::string::npos)
      << r.output;
  r = run(tok() + "\"$(printf '\\377')\"");  // a lone 0xFF byte
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("not valid UTF-8"), std::string::npos) << r.output;
  r = run(tok() + "--decode 99999");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("not in the vocabulary"), std::string::npos) << r.output;
  r = run(tok() + "--decode abc");
  EXPECT_NE(r.output.find("--decode takes token ids"), std::string::npos) << r.output;
  r = run(tok() + "--no-thinking hi");
  EXPECT_NE(r.output.find("apply to --chat"), std::string::npos) << r.output;
  // Flags of another mode are refused, not ignored.
  r = run(tok() + "--skip-special hello");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--skip-special applies to --decode"), std::string::npos) << r.output;
  for (const char* mode : {"--decode 266", "--chat --text hello"}) {
    r = run(tok() + "--tokens " + mode);
    EXPECT_NE(r.status, 0) << mode;
    EXPECT_NE(r.output.find("--tokens prints encoded ids"), std::string::npos) << mode << ": " << r.output;
  }
}

}  // namespace
