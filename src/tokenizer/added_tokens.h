// Finding added tokens in text, as HF's AddedVocabulary does it.
//
// Matching is leftmost-longest over all patterns (HF: Aho-Corasick,
// MatchKind::LeftmostLongest), non-overlapping, left to right. Each match is
// then judged in order, exactly like HF's find_matches:
//   - single_word: dropped if a word character (Rust regex \w: Alphabetic,
//     M, Nd, Pc, Join_Control) touches it on either side;
//   - lstrip: the split starts at the first of the whitespace (Unicode
//     White_Space) run before it, but not before the previous split's end;
//   - rstrip: the split takes in the whitespace run after it;
//   - special tokens are dropped when special tokens are not recognised.
// A dropped match is not retried shorter or later: scanning resumes after it,
// as HF's iterator does.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {

class AddedTokenMatcher {
 public:
  struct Pattern {
    std::string text;         // what to find (content, or NFC(content) if normalized)
    const AddedToken* token;  // must outlive the matcher
  };
  explicit AddedTokenMatcher(std::vector<Pattern> patterns);
  AddedTokenMatcher() = default;

  // A stretch of `sentence`: an added token (token != nullptr) or plain text.
  struct Split {
    size_t begin, end;
    const AddedToken* token;
  };
  // Appends the splits covering `sentence` (none for an empty sentence).
  void find(std::string_view sentence, bool recognize_special, std::vector<Split>& out) const;
  bool empty() const { return patterns_.empty(); }

 private:
  // Leftmost-longest match at or after `from`; false if none.
  bool next(std::string_view s, size_t from, size_t* begin, size_t* end, const AddedToken** token) const;

  std::vector<Pattern> patterns_;
  // Pattern indices by first byte, longest first.
  std::vector<std::vector<uint32_t>> by_first_byte_ = std::vector<std::vector<uint32_t>>(256);
  bool first_byte_[256] = {};
};

}  // namespace wd::tok
