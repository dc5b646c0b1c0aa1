// The cards whose measurements are compiled in: the dispatch's built-in
// crossover tables (CrossoverTable::built_in) and the per-card defaults of
// warp decode's configuration (WarpDecodeConfig::for_batch). Host logic only.
#pragma once

#include <string>

namespace wd {

enum class TableCard { kH200, kH100 };
const char* to_string(TableCard c);  // "H200", "H100"
// The measured card a device of this name (cudaDeviceProp::name) takes:
// kH100 for a name with "H100" in it (measured on an H100 SXM, 80GB HBM3;
// other H100 variants take it as the nearest measured card), kH200 for every
// other name and for "" (no device).
TableCard table_card(const std::string& device_name);
// Whether a device of this name was measured itself (an H100 or an H200), so
// that table_card's defaults are its own and not the nearest card's.
bool measured_card(const std::string& device_name);
// "" for a measured card, else one line for the user: which card's defaults
// this one takes and how to measure its own crossover table.
std::string unmeasured_card_note(const std::string& device_name);

}  // namespace wd
