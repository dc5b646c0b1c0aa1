// The two Unicode character tests HF's added-token rules use, with the
// meaning of Rust's `regex` crate, from PCRE2's Unicode tables:
//   word  = \w  = Alphabetic | M | Nd | Pc | Join_Control
//   space = \s  = White_Space
#pragma once

#include <cstdint>

namespace wd::tok {

bool is_rust_word_char(uint32_t code_point);
bool is_white_space(uint32_t code_point);

}  // namespace wd::tok
