// GPT-2's byte-level alphabet, as HF's ByteLevel pre-tokenizer and decoder use
// it: every byte maps to one printable character so that any byte string is a
// string of vocabulary symbols. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to
// the code point of the same value; the other 68 bytes, in increasing order,
// to U+0100, U+0101, ... U+0143. So every symbol is below U+0144.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace wd::tok::byte_level {

// The symbol (code point) of a byte.
uint32_t symbol_of(uint8_t byte);
// The byte of a symbol, or -1 if the code point is not a byte-level symbol.
int byte_of(uint32_t code_point);
// UTF-8 text of the symbol of each byte, e.g. "\xC4\xA0" ("Ġ") for 0x20.
const std::string& symbol_text(uint8_t byte);

// Maps a vocabulary token (byte-level characters, valid UTF-8) to the bytes it
// stands for. Returns false if some character is not a byte-level symbol (the
// token cannot come out of byte-level BPE; HF's decoder then keeps its UTF-8).
bool token_to_bytes(std::string_view token, std::string* bytes);

}  // namespace wd::tok::byte_level
