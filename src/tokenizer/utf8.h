// UTF-8 helpers shared by the tokenizer: validation, code point iteration, and
// the lossy repair HF applies when decoding (Rust's String::from_utf8_lossy:
// each maximal subpart of an ill-formed sequence becomes one U+FFFD, the
// Unicode "best practice" of chapter 3, U+FFFD substitution).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace wd::tok::utf8 {

// Offset of the first byte that does not start a valid UTF-8 character
// (overlongs, surrogates and code points past U+10FFFF are invalid), or npos.
size_t find_invalid(std::string_view s);

enum class Step { kValid, kIncomplete, kInvalid };
// Classifies the bytes at s[0..n): kValid with *len = the character's length;
// kIncomplete when all n bytes are a valid start of a longer character
// (*len = n); kInvalid with *len = the maximal subpart to replace (>= 1).
// Requires n >= 1.
Step step(const unsigned char* s, size_t n, size_t* len);

// Appends `bytes` to `out`, replacing ill-formed parts with U+FFFD; an
// incomplete character at the end is ill-formed too.
void append_lossy(std::string& out, std::string_view bytes);

// Like append_lossy, but stops before a trailing incomplete character and
// returns how many bytes were consumed (bytes.size() minus 0..3).
size_t append_lossy_prefix(std::string& out, std::string_view bytes);

// Decodes the valid character at s (length from the lead byte); for text that
// find_invalid() accepted.
inline uint32_t decode(const unsigned char* s, size_t* len) {
  const unsigned c = s[0];
  if (c < 0x80) { *len = 1; return c; }
  if (c < 0xE0) { *len = 2; return ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu); }
  if (c < 0xF0) { *len = 3; return ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu); }
  *len = 4;
  return ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

void append(std::string& out, uint32_t code_point);

}  // namespace wd::tok::utf8
