// NFC normalisation (utf8proc), with a pass-through for ASCII.
//
// Why the ASCII shortcut is exact: an ASCII character is a starter
// (canonical combining class 0) and is never the second element of a
// canonical composition, so NFC never moves or merges anything across it
// except into the ASCII character itself from the marks that follow it. Hence
// NFC(text) = NFC applied separately to each maximal non-ASCII run together
// with the one ASCII character before it, and ASCII elsewhere is unchanged.
#pragma once

#include <string>
#include <string_view>

namespace wd::tok {

// Appends NFC(text) to out. `text` must be valid UTF-8.
void append_nfc(std::string& out, std::string_view text);

}  // namespace wd::tok
