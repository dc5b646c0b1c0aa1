#include "tokenizer/nfc.h"

#include <utf8proc.h>

#include <cstdlib>

#include "warpdecode/error.h"

namespace wd::tok {
namespace {

void append_nfc_utf8proc(std::string& out, std::string_view run) {
  utf8proc_uint8_t* mapped = nullptr;
  // No UTF8PROC_NULLTERM: the run's length is given, so U+0000 is kept as text.
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                          utf8proc_ssize_t(run.size()), &mapped,
                                          utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    std::free(mapped);
    throw InvalidArgument(detail::concat("NFC normalisation failed: ", utf8proc_errmsg(n)));
  }
  out.append(reinterpret_cast<const char*>(mapped), size_t(n));
  std::free(mapped);
}

}  // namespace

void append_nfc(std::string& out, std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    while (j < n && p[j] < 0x80) ++j;
    if (j == n) {
      out.append(text.data() + i, n - i);
      break;
    }
    // Non-ASCII at j: normalise [start, end) where start takes in the ASCII
    // character before it (marks may compose onto it) and end is the next
    // ASCII byte.
    const size_t start = j > i ? j - 1 : j;
    out.append(text.data() + i, start - i);
    size_t end = j;
    while (end < n && p[end] >= 0x80) ++end;
    append_nfc_utf8proc(out, text.substr(start, end - start));
    i = end;
  }
}

}  // namespace wd::tok
