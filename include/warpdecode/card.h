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
// The device name (cudaDeviceProp::name) of the card each TableCard's
// measurements were taken on: "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H200".
const char* measured_device_name(TableCard c);
// Whether a device of this name is the very card table_card's defaults were
// measured on. Other variants of the same chip (H100 PCIe or NVL, H200 NVL,
// GH200) differ in memory, clocks or power limit, which move the crossovers
// and the two-tile starts: they take the nearest card's defaults, with a note.
bool measured_card(const std::string& device_name);
// "" for a measured card, else one line for the user: which card's defaults
// this one takes and how to measure its own crossover table.
std::string unmeasured_card_note(const std::string& device_name);

}  // namespace wd
