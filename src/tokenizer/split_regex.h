// The Split pre-tokenizer's regular expression, run with PCRE2 (JIT).
//
// HF `tokenizers` runs these patterns with Oniguruma. The two engines agree on
// the constructs byte-level BPE patterns use (alternation, classes, \p{L},
// \p{N}, (?i:...), greedy repeats, (?!...)) except \s: Oniguruma's Unicode \s
// is U+0009-000D, U+0085 and the Z categories (= the White_Space property),
// while PCRE2's \s with UCP also takes U+180E (MONGOLIAN VOWEL SEPARATOR, a
// format character). So the pattern is translated, \s -> that exact set and \S
// -> its complement, and constructs whose meaning differs between the engines
// and that we have not checked (\w \W \d \D \b \B \h \v \R \X, POSIX classes)
// are refused rather than guessed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace wd::tok {

class SplitRegex {
 public:
  // Throws wd::FormatError naming the unsupported construct or PCRE2's error.
  explicit SplitRegex(const std::string& oniguruma_pattern);
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;
  ~SplitRegex();

  // Calls piece(begin, end) for each split of `text` (valid UTF-8) in order,
  // with HF's Isolated behaviour: every match is a split, and so is every
  // non-empty stretch between matches. Empty matches split nothing.
  template <typename F>
  void split(std::string_view text, F&& piece) const {
    Scratch scratch(*this);
    size_t pos = 0, gap = 0;
    size_t begin = 0, end = 0;
    while (pos < text.size() && next_match(scratch.data, text, pos, &begin, &end)) {
      if (begin > gap) piece(gap, begin);
      if (end > begin) {
        piece(begin, end);
        gap = pos = end;
      } else {
        // An empty match splits there (HF does too) and the search steps one
        // character on. Qwen's pattern has no empty match.
        gap = begin;
        pos = begin + 1;
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
    if (gap < text.size()) piece(gap, text.size());
  }

  // The PCRE2 pattern actually compiled (after the \s translation).
  const std::string& pcre2_pattern() const { return translated_; }
  bool jit() const;

 private:
  // PCRE2 match data, taken from a pool for the duration of one split().
  struct Scratch {
    explicit Scratch(const SplitRegex& r) : regex(r), data(r.acquire()) {}
    ~Scratch() { regex.release(data); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    const SplitRegex& regex;
    void* data;
  };
  void* acquire() const;
  void release(void* match_data) const;
  bool next_match(void* match_data, std::string_view text, size_t from, size_t* begin, size_t* end) const;
  struct State;
  std::unique_ptr<State> state_;
  std::string translated_;
};

// Exposed for tests: the \s translation alone.
std::string translate_oniguruma_pattern(const std::string& pattern);

}  // namespace wd::tok
