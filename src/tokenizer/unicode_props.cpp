#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/unicode_props.h"

#include <pcre2.h>

#include <string>

#include "tokenizer/utf8.h"
#include "warpdecode/error.h"

namespace wd::tok {
namespace {

class CharClass {
 public:
  explicit CharClass(const char* pattern) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &offset, nullptr);
    if (!code_) throw Error(detail::concat("PCRE2 lacks a Unicode property we need: ", pattern));
  }
  ~CharClass() { pcre2_code_free(code_); }
  CharClass(const CharClass&) = delete;
  CharClass& operator=(const CharClass&) = delete;

  bool matches(uint32_t cp) const {
    std::string s;
    utf8::append(s, cp);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
    pcre2_match_data_free(md);
    return rc > 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

}  // namespace

bool is_rust_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
  static const CharClass word("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]");
  return word.matches(cp);
}

bool is_white_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  static const CharClass space("\\p{White_Space}");
  return space.matches(cp);
}

}  // namespace wd::tok
