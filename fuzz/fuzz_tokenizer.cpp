// libFuzzer target: the tokenizer (the fixture's tokenizer.json, a Qwen3
// vocabulary cut down by scripts/make_tokenizer_fixture.py) on arbitrary
// text and ids. For any input:
//   - encode() gives ids, or wd::InvalidArgument exactly when the input is
//     not valid UTF-8;
//   - with special tokens not recognised, decode(encode(s)) == NFC(s);
//   - a StreamDecoder fed the ids one at a time gives decode(ids), with and
//     without skipping special tokens;
//   - the input read as ids (4 bytes each) decodes to valid UTF-8, or
//     InvalidArgument exactly when an id is out of the vocabulary.
// A crash, a sanitizer report, another exception or a failed check (abort)
// is a finding.
//
// Build and smoke run: tests/model/CMakeLists.txt (ctest -R fuzz), when
// PCRE2 and utf8proc are found.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"
#include "warpdecode/error.h"
#include "warpdecode/tokenizer/stream_decoder.h"
#include "warpdecode/tokenizer/tokenizer.h"

namespace {

using wd::tok::TokenId;
using wd::tok::Tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::from_file(WD_FUZZ_TOKENIZER_JSON);
  return t;
}

bool valid_utf8(std::string_view s) { return wd::tok::utf8::find_invalid(s) == std::string_view::npos; }

void check_stream(const Tokenizer& t, const std::vector<TokenId>& ids, bool skip) {
  wd::tok::StreamDecoder stream(t, skip);
  std::string text;
  for (TokenId id : ids) text += stream.push(id);
  text += stream.finish();
  check(text == t.decode(ids, skip));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& t = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool recognize : {false, true}) {
    std::vector<TokenId> ids;
    try {
      ids = t.encode(text, wd::tok::EncodeOptions{recognize});
    } catch (const wd::InvalidArgument&) {
      check(!valid_utf8(text));
      break;
    }
    check(valid_utf8(text));
    for (TokenId id : ids) check(id >= 0 && size_t(id) < t.vocab_size());
    if (!recognize) check(t.decode(ids) == Tokenizer::nfc(text));
    for (bool skip : {false, true}) check_stream(t, ids, skip);
  }
  // The same bytes as ids.
  std::vector<TokenId> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  bool in_vocab = true;
  for (TokenId id : raw) in_vocab &= id >= 0 && size_t(id) < t.vocab_size();
  try {
    check(valid_utf8(t.decode(raw)));
    check(in_vocab);
  } catch (const wd::InvalidArgument&) {
    check(!in_vocab);
  }
  return 0;
}
