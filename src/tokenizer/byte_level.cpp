#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace wd::tok::byte_level {
namespace {

constexpr uint32_t kSymbolLimit = 0x144;  // one past the largest symbol

bool maps_to_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> symbol{};
  std::array<int16_t, kSymbolLimit> byte{};
  std::array<std::string, 256> text;
  Tables() {
    byte.fill(-1);
    uint32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      symbol[b] = maps_to_itself(b) ? b : next++;
      byte[symbol[b]] = int16_t(b);
      utf8::append(text[b], symbol[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t symbol_of(uint8_t b) { return tables().symbol[b]; }

int byte_of(uint32_t cp) { return cp < kSymbolLimit ? tables().byte[cp] : -1; }

const std::string& symbol_text(uint8_t b) { return tables().text[b]; }

bool token_to_bytes(std::string_view token, std::string* bytes) {
  bytes->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  size_t i = 0;
  while (i < token.size()) {
    size_t len = 0;
    if (utf8::step(p + i, token.size() - i, &len) != utf8::Step::kValid) return false;
    const int b = byte_of(utf8::decode(p + i, &len));
    if (b < 0) return false;
    bytes->push_back(char(b));
    i += len;
  }
  return true;
}

}  // namespace wd::tok::byte_level
