// Access to the fixture made by scripts/make_tokenizer_fixture.py on a machine
// with Hugging Face tokenizers (tests/fixtures/tokenizer/). The environment
// variable WD_TOKENIZER_FIXTURE points the tests at another directory.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok::test {

inline std::string fixture_dir() {
  const char* env = std::getenv("WD_TOKENIZER_FIXTURE");
  return env && *env ? env : WD_TOKENIZER_FIXTURE_DIR;
}

inline bool fixture_present() { return std::ifstream(fixture_dir() + "/expected.json").good(); }

#define WD_REQUIRE_FIXTURE()                                                                                \
  do {                                                                                                      \
    if (!::wd::tok::test::fixture_present())                                                                \
      GTEST_SKIP() << "tokenizer fixture missing at " << ::wd::tok::test::fixture_dir()                     \
                   << ": run `python3 scripts/make_tokenizer_fixture.py tests/fixtures/tokenizer` on a "    \
                      "machine with Hugging Face tokenizers and commit its output";                         \
  } while (0)

inline const nlohmann::json& expected() {
  static const nlohmann::json j = [] {
    std::ifstream in(fixture_dir() + "/expected.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }();
  return j;
}

// The fixture's tokenizers by name ("main", "flags"), loaded once.
inline const Tokenizer& fixture_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) {
    const std::string file = expected()["tokenizer_files"][name].get<std::string>();
    slot = std::make_unique<Tokenizer>(Tokenizer::from_file(fixture_dir() + "/" + file));
  }
  return *slot;
}

}  // namespace wd::tok::test
