#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace wd::tok {
namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The code point ending at s[end) (end > 0).
uint32_t last_char(std::string_view s, size_t end, size_t* start) {
  size_t b = end - 1;
  while (b > 0 && is_continuation(s[b])) --b;
  size_t len;
  *start = b;
  return utf8::decode(reinterpret_cast<const unsigned char*>(s.data()) + b, &len);
}

uint32_t first_char(std::string_view s, size_t begin, size_t* len) {
  return utf8::decode(reinterpret_cast<const unsigned char*>(s.data()) + begin, len);
}

// Rust regex `\w$` on s[0..end) and `^\w` on s[begin..).
bool ends_with_word(std::string_view s, size_t end) {
  size_t b;
  return end > 0 && is_rust_word_char(last_char(s, end, &b));
}
bool starts_with_word(std::string_view s, size_t begin) {
  size_t len;
  return begin < s.size() && is_rust_word_char(first_char(s, begin, &len));
}

// Start of the whitespace run that ends at `end` (Rust regex `\s*$` on s[0..end)).
size_t space_leftmost_at_end(std::string_view s, size_t end) {
  while (end > 0) {
    size_t b;
    if (!is_white_space(last_char(s, end, &b))) break;
    end = b;
  }
  return end;
}

// End of the whitespace run that starts at `begin` (`^\s*` on s[begin..)).
size_t space_rightmost_at_start(std::string_view s, size_t begin) {
  while (begin < s.size()) {
    size_t len;
    if (!is_white_space(first_char(s, begin, &len))) break;
    begin += len;
  }
  return begin;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<Pattern> patterns) {
  for (auto& p : patterns)
    if (!p.text.empty()) patterns_.push_back(std::move(p));  // HF ignores empty contents
  for (uint32_t i = 0; i < patterns_.size(); ++i) {
    const auto b = static_cast<unsigned char>(patterns_[i].text[0]);
    by_first_byte_[b].push_back(i);
    first_byte_[b] = true;
  }
  for (auto& list : by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [this](uint32_t a, uint32_t b) {
      return patterns_[a].text.size() > patterns_[b].text.size();
    });
}

bool AddedTokenMatcher::next(std::string_view s, size_t from, size_t* begin, size_t* end,
                             const AddedToken** token) const {
  for (size_t i = from; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (!first_byte_[b]) continue;
    for (uint32_t k : by_first_byte_[b]) {
      const std::string& t = patterns_[k].text;
      if (t.size() <= s.size() - i && std::memcmp(s.data() + i, t.data(), t.size()) == 0) {
        *begin = i;
        *end = i + t.size();
        *token = patterns_[k].token;
        return true;
      }
    }
  }
  return false;
}

void AddedTokenMatcher::find(std::string_view s, bool recognize_special, std::vector<Split>& out) const {
  size_t start_offset = 0;
  size_t search = 0;
  size_t mbegin, mend;
  const AddedToken* token;
  while (search < s.size() && next(s, search, &mbegin, &mend, &token)) {
    search = mend;  // the matcher's own iteration, independent of the rules below
    if (!recognize_special && token->special) continue;
    size_t start = mbegin, stop = mend;
    if (token->single_word) {
      const bool space_before = start == 0 || !ends_with_word(s, start);
      const bool space_after = stop == s.size() || !starts_with_word(s, stop);
      if (!space_before || !space_after) continue;
    }
    if (token->lstrip) start = std::max(space_leftmost_at_end(s, start), start_offset);
    if (token->rstrip) stop = space_rightmost_at_start(s, stop);
    if (start_offset < start) out.push_back(Split{start_offset, start, nullptr});
    out.push_back(Split{start, stop, token});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back(Split{start_offset, s.size(), nullptr});
}

}  // namespace wd::tok
