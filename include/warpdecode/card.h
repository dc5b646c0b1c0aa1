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

}  // namespace wd
