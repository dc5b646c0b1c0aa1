// The classical expert-centric path in the bench-moe harness (a LayerPath),
// its table rows beside warp decode, and the crossover tuning behind
// `bench-moe --tune` (docs/CLASSICAL.md).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "moe_bench.h"
#include "warpdecode/classical.h"
#include "warpdecode/moe_dispatch.h"
#include "warpdecode/untiled_weights.h"

namespace wd::bench {

// The format the harness must hold for a format the path runs: FP8 block-128
// is derived by the classical path from BF16 copies at prepare time (the
// harness's device weights are BF16 or MXFP8).
WeightFormat held_format(WeightFormat run_format);

// Bytes each classical stage must move per call (read + written), from the
// shape, format, configuration (W8A16's BF16 activations, SiLU·up fused,
// rows gathered), distinct experts and B (padding rows not counted).
double classical_stage_bytes(ClassicalStage s, const MoeShape& shape, WeightFormat f, const ClassicalConfig& config,
                             double distinct_experts, int batch);

class ClassicalPath : public LayerPath {
 public:
  // bench: the harness holding the weights (for FP8 block-128 copies);
  // run_format: the format this path runs; config: fixed, or for_batch();
  // untile: each call first un-tiles the held copy's tiled copies into one
  // canonical scratch (UntiledWeights, as MoeDispatch does for tiled-only
  // weights) and runs on that: its time includes the un-tiling.
  ClassicalPath(const MoeBench& bench, WeightFormat run_format, std::optional<ClassicalConfig> config = {},
                bool untile = false);
  ~ClassicalPath() override;

  std::string name() const override { return "classical"; }
  std::string config() const override;
  void prepare(const MoeShape& shape, int batch) override;
  void route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
             cudaStream_t stream) override;
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, uint16_t* y,
               cudaStream_t stream) override;
  std::vector<std::string> stages() const override;
  void run_stage(int stage, const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, uint16_t* y,
                 cudaStream_t stream) override;
  double stage_bytes(int stage, const MoeShape& s, WeightFormat f, double distinct_experts, int batch) const override;

 private:
  MoeWeightsView mine(const MoeWeightsView& held) const;  // the weights this path runs for a held copy

  const MoeBench& bench_;
  WeightFormat format_;
  std::optional<ClassicalConfig> fixed_;
  ClassicalConfig config_;
  std::unique_ptr<ClassicalMoe> moe_;
  std::vector<DeviceFp8BlockWeights> converted_;  // per held copy, FP8 block-128 only
  bool untile_ = false;
  std::unique_ptr<UntiledWeights> untiled_;
};

// Times the classical path at batch B on the harness's weights (their shape;
// `preset` labels the row), prints its row (and stages) in bench-moe's table
// format, and returns the JSON record.
// warp_us > 0 adds the ratio warp decode / classical (µs of classical over µs
// of warp: > 1 where warp decode is faster).
nlohmann::json classical_row(MoeBench& mb, const std::string& preset, WeightFormat f, int batch, const Options& opt,
                             double warp_us, double read_tbps, double* us_out = nullptr,
                             std::optional<ClassicalConfig> config = std::nullopt);

// bench-moe --tune: for each preset and format, times both paths over a
// ladder of batch sizes, finds the crossover (crossover_from_ladder: the
// smallest B from which the classical path stays faster by at least
// kCrossoverMargin), prints the ladder, and writes the crossover
// table (CrossoverTable JSON with the ladders and the header) to json_path.
void tune_crossover(const std::vector<std::string>& presets, const std::vector<WeightFormat>& formats,
                    const std::vector<int>& ladder, size_t l2_bytes, const Options& opt, cudaStream_t stream,
                    const nlohmann::json& header, const std::string& json_path);

// bench-moe --tune-untiled: the same on tiled-only weights
// (DeviceWeightsOptions::tiled_only()): warp decode on them against the
// classical path on them, reading them as they are where it can
// (classical_reads_tiled_only), else un-tiled first (ClassicalPath with
// untile), in the configuration MoeDispatch gives it (MXFP8 also in
// W8A16); written as CrossoverEntry::untiled entries ("warp_weights":
// "tiled-only", "classical_reads": "tiled" or "untiled").
// always_untile: the classical side un-tiles the weights even where it reads
// them as they are (the table's "classical_reads": "untiled" entries, which
// the dispatch uses where it cannot).
void tune_untiled_crossover(const std::vector<std::string>& presets, const std::vector<WeightFormat>& formats,
                            const std::vector<int>& ladder, size_t l2_bytes, const Options& opt, cudaStream_t stream,
                            const nlohmann::json& header, const std::string& json_path, bool always_untile = false);

// The ladder --tune uses by default.
std::vector<int> default_tune_ladder();

}  // namespace wd::bench
