// Streaming detokenisation for generation: feed ids one at a time, get back
// the text that is final so far.
//
// Invariant: concatenating every push() result and then finish() gives exactly
// Tokenizer::decode(all ids, same skip flag). Bytes are held back only while
// they form the start of a valid UTF-8 character that later bytes may still
// complete (at most 3 bytes); a byte sequence that can no longer become valid
// is emitted at once as U+FFFD, exactly as decode() would replace it.
#pragma once

#include <string>

#include "warpdecode/tokenizer/tokenizer.h"

namespace wd::tok {

class StreamDecoder {
 public:
  // The tokenizer must outlive this decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Appends one token; returns the newly completed text (possibly empty).
  std::string push(TokenId id);
  // Ends the stream: returns U+FFFD if an incomplete character was pending,
  // else "". The decoder can be reused afterwards.
  std::string finish();
  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace wd::tok
