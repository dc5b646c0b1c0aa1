// Which measured card a device takes (warpdecode/card.h).
#include "warpdecode/card.h"

namespace wd {

const char* to_string(TableCard c) { return c == TableCard::kH100 ? "H100" : "H200"; }

TableCard table_card(const std::string& device_name) {
  return device_name.find("H100") != std::string::npos ? TableCard::kH100 : TableCard::kH200;
}

const char* measured_device_name(TableCard c) {
  return c == TableCard::kH100 ? "NVIDIA H100 80GB HBM3" : "NVIDIA H200";
}

bool measured_card(const std::string& device_name) {
  return device_name == measured_device_name(table_card(device_name));
}

std::string unmeasured_card_note(const std::string& device_name) {
  if (measured_card(device_name)) return "";
  const TableCard card = table_card(device_name);
  const std::string taken = std::string("the ") + to_string(card) + "'s defaults";
  if (device_name.empty()) return "no CUDA device: " + taken + " are shown";
  return device_name + " was not measured: it takes " + taken + " (measured on an " + measured_device_name(card) +
         "; warp decode's configuration, and the dispatch's crossover table where no other is given): `warpdecode "
         "bench-moe --tune --tune-json FILE` measures this card's crossover, WD_MOE_CROSSOVER=FILE takes it";
}

}  // namespace wd
