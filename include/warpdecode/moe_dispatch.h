// One MoE entry point that picks, per call, warp decode (small batches) or
// the classical expert-centric path (large batches, prefill) from the number
// of tokens. The switch point is a crossover measured on the card by
// `warpdecode bench-moe --tune` and stored per shape and weight format in a
// JSON file; the built-in table holds the H200 measurement
// (bench/results/h200-crossover.json, docs/CLASSICAL.md).
//
// Formats warp decode does not stream (FP8 block-128) always go classical.
// MXFP8 weights uploaded tiled-only (DeviceWeightsOptions::tiled_only()) can
// be read by warp decode alone: a call the table sends to the classical path
// throws (MoeWeightsView::require_canonical) rather than change path.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "warpdecode/classical.h"
#include "warpdecode/layout.h"
#include "warpdecode/warp_decode.h"

namespace wd {

enum class MoePath { kWarp, kClassical };
const char* to_string(MoePath p);  // "warp", "classical"

struct CrossoverEntry {
  std::string preset;  // informative; lookups use the dimensions
  int hidden = 0, intermediate = 0, experts = 0, top_k = 0;
  WeightFormat format = WeightFormat::kBF16;
  int crossover = 0;   // classical from this batch on; kNever: warp decode at every measured batch
  static constexpr int kNever = -1;
};

class CrossoverTable {
 public:
  // The H200 measurement compiled in.
  static CrossoverTable built_in();
  // A file written by `bench-moe --tune`. Throws wd::FormatError when malformed.
  static CrossoverTable load(const std::string& path);
  // $WD_MOE_CROSSOVER when set (a file as above), else built_in().
  static CrossoverTable from_environment();

  void set(const CrossoverEntry& e);  // replaces the entry of the same shape and format
  const std::vector<CrossoverEntry>& entries() const { return entries_; }
  const std::string& source() const { return source_; }

  // The batch from which the classical path runs: the entry of this shape and
  // format if there is one; otherwise the table's measured crossovers for this
  // format scaled to the shape by tokens per expert (B·K/E), the quantity
  // that decides which path wins.
  int crossover(const MoeShape& s, WeightFormat f) const;

  // JSON text of the table (what load() reads; bench-moe --tune adds its
  // measurements beside the entries).
  std::string to_json() const;

 private:
  std::vector<CrossoverEntry> entries_;
  std::string source_ = "empty";
};

class MoeDispatch {
 public:
  MoeDispatch(const MoeShape& shape, int max_batch, CrossoverTable table = CrossoverTable::from_environment());
  ~MoeDispatch();

  MoePath choose(WeightFormat f, int batch) const;

  // Router + experts / experts alone, on the chosen path (same contracts as
  // WarpDecodeMoe and ClassicalMoe: stream-ordered, graph-capturable).
  void forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
               cudaStream_t stream) const;
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, const MoeOutput& out,
               cudaStream_t stream) const;

  const CrossoverTable& table() const { return table_; }
  const WarpDecodeMoe& warp() const { return *warp_; }
  const ClassicalMoe& classical() const { return *classical_; }

 private:
  MoeShape shape_;
  CrossoverTable table_;
  std::unique_ptr<WarpDecodeMoe> warp_;
  std::unique_ptr<ClassicalMoe> classical_;
};

}  // namespace wd
