// Which measured card a device takes (warpdecode/card.h).
#include "warpdecode/card.h"

namespace wd {

const char* to_string(TableCard c) { return c == TableCard::kH100 ? "H100" : "H200"; }

TableCard table_card(const std::string& device_name) {
  return device_name.find("H100") != std::string::npos ? TableCard::kH100 : TableCard::kH200;
}

}  // namespace wd
