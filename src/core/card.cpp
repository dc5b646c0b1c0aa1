// Which measured card a device takes (warpdecode/card.h).
#include "warpdecode/card.h"

namespace wd {

const char* to_string(TableCard c) { return c == TableCard::kH100 ? "H100" : "H200"; }

TableCard table_card(const std::string& device_name) {
  return device_name.find("H100") != std::string::npos ? TableCard::kH100 : TableCard::kH200;
}

bool measured_card(const std::string& device_name) {
  return device_name.find("H100") != std::string::npos || device_name.find("H200") != std::string::npos;
}

std::string unmeasured_card_note(const std::string& device_name) {
  if (measured_card(device_name)) return "";
  const std::string taken = std::string("the ") + to_string(table_card(device_name)) + "'s defaults";
  if (device_name.empty()) return "no CUDA device: " + taken + " are shown";
  return device_name + " was not measured: it takes " + taken +
         " (warp decode's configuration; the dispatch's crossover table where no other is given): `warpdecode "
         "bench-moe --tune --tune-json FILE` measures this card's crossover, WD_MOE_CROSSOVER=FILE takes it";
}

}  // namespace wd
