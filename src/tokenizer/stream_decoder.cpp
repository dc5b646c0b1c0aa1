#include "warpdecode/tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace wd::tok {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(TokenId id) {
  const std::string_view bytes = tokenizer_->token_bytes(id, skip_special_);  // validates the id
  pending_.append(bytes.data(), bytes.size());
  std::string out;
  const size_t used = utf8::append_lossy_prefix(out, pending_);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  utf8::append_lossy(out, pending_);
  pending_.clear();
  return out;
}

}  // namespace wd::tok
