#include "tokenizer/utf8.h"

namespace wd::tok::utf8 {
namespace {

// The valid range of the second byte after each lead byte (Unicode table 3-7);
// later continuation bytes are always 0x80..0xBF.
struct Lead {
  uint8_t length;       // 0: not a lead byte
  uint8_t lo, hi;       // second-byte range
};

constexpr Lead lead_of(unsigned c) {
  if (c < 0x80) return {1, 0, 0};
  if (c < 0xC2) return {0, 0, 0};
  if (c < 0xE0) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c < 0xF0) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c < 0xF4) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

const char kReplacement[] = "\xEF\xBF\xBD";

}  // namespace

Step step(const unsigned char* s, size_t n, size_t* len) {
  const Lead lead = lead_of(s[0]);
  if (lead.length == 0) { *len = 1; return Step::kInvalid; }
  if (lead.length == 1) { *len = 1; return Step::kValid; }
  for (size_t i = 1; i < lead.length; ++i) {
    if (i == n) { *len = n; return Step::kIncomplete; }
    const unsigned c = s[i];
    const bool ok = i == 1 ? (c >= lead.lo && c <= lead.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) { *len = i; return Step::kInvalid; }
  }
  *len = lead.length;
  return Step::kValid;
}

size_t find_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) { ++i; continue; }
    size_t len = 0;
    if (step(p + i, n - i, &len) != Step::kValid) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t append_lossy_prefix(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && p[run] < 0x80) ++run;
    out.append(bytes.data() + i, run - i);
    i = run;
    if (i == n) break;
    size_t len = 0;
    switch (step(p + i, n - i, &len)) {
      case Step::kValid: out.append(bytes.data() + i, len); break;
      case Step::kInvalid: out.append(kReplacement, 3); break;
      case Step::kIncomplete: return i;
    }
    i += len;
  }
  return n;
}

void append_lossy(std::string& out, std::string_view bytes) {
  if (append_lossy_prefix(out, bytes) != bytes.size()) out.append(kReplacement, 3);
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

}  // namespace wd::tok::utf8
