// The measurements behind `warpdecode accuracy` (docs/ACCURACY.md).
//
// One layer (measure_layer): for each seed, synthetic weights (BF16, and the
// requested FP8 format quantized from them; or one given layer for every
// seed, in each format as its source has it, Common::layer) and inputs
// (B, H) BF16, Gaussian or with outlier channels. The routing is the FP64
// reference router's, given to every path, so that all three compute the
// same experts and only their arithmetic differs. Each path's output is
// judged against wd::reference::moe_experts in FP64 on the weights that
// path ran (dequantized exactly): warp decode on BF16 or MXFP8, the
// classical BF16 path on BF16, the classical FP8 path on the requested FP8
// format. The error the weight quantization adds is the FP64 layer on the
// FP8 weights against the FP64 layer on the BF16 weights they came from (an
// FP8 checkpoint's own block-128 weights are its exact values and its BF16
// weights their rounding: there the figure is what that rounding moves the
// layer).
//
// Drift (measure_drift): N layers, each with its own synthetic weights
// (seeded per layer, generated when the walk reaches it), residual
// connections and an RMSNorm (unit gain, eps 1e-6) before each MoE block:
//   r_0 = x;  r_{l+1} = r_l + moe_l(bf16(rmsnorm(r_l)))
// The FP64 stack keeps r in FP64 and runs the FP64 reference (its router
// too); each path keeps its own r (FP32 or BF16, --residual), routes with its
// own router and runs its own experts. Every path and stack rounds the MoE
// input to BF16, as the kernels take BF16 activations (and as
// wd::model::ReferenceModel does). Reported per depth: ‖r_path − r_FP64‖ /
// ‖r_FP64‖ against the FP64 stack on the path's weights, and how many tokens
// the path routed to a different expert set than that stack.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/backend.h"
#include "accuracy/stats.h"
#include "warpdecode/layout.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {

constexpr int kPaths = 4;  // indexed by int(Path)
constexpr Path kAllPaths[kPaths] = {Path::kWarp, Path::kClassicalBf16, Path::kClassicalFp8, Path::kClassicalW8A16};

const char* to_string(InputKind k);  // "gaussian", "outliers"
InputKind parse_input_kind(const std::string& s);

enum class ResidualFormat { kFP32, kBF16 };
const char* to_string(ResidualFormat r);
ResidualFormat parse_residual_format(const std::string& s);

// Seeds of run seed `base`, sample s: the weights of layer l, and the inputs.
uint64_t layer_seed(uint64_t base, int s, int layer);
uint64_t input_seed(uint64_t base, int s, int batch);

struct Common {
  std::string preset;  // label for the records
  MoeShape shape;
  std::vector<WeightFormat> formats{WeightFormat::kMXFP8};
  std::vector<int> batches{1, 8, 32};
  std::vector<InputKind> inputs{InputKind::kGaussian, InputKind::kOutliers};
  int seeds = 8;
  uint64_t seed = 1;
  OutputFormat output = OutputFormat::kBF16;  // what the backend's paths write (for the records)
  // A given layer of `shape` (e.g. a checkpoint's) instead of synthetic
  // weights, in BF16 and each format measured (backend.h): measure_layer
  // then holds it for every seed, and each seed draws only new inputs.
  // measure_drift refuses it (its stack is synthetic). Empty: synthetic.
  LayerWeights layer;
};

struct PathStats {
  bool runs = false;
  WeightFormat weights = WeightFormat::kBF16;
  Summary rel_l2, max_rel;
};

struct LayerRecord {
  std::string preset, source;
  MoeShape shape;
  WeightFormat format = WeightFormat::kMXFP8;
  int batch = 0;
  InputKind inputs = InputKind::kGaussian;
  int seeds = 0;
  OutputFormat output = OutputFormat::kBF16;
  std::array<PathStats, kPaths> paths;
  Summary weight_quant, weight_quant_max;  // count 0 for BF16 requests
  Summary ratio_fp8_over_warp;             // worst = smallest
  Summary ratio_bf16_over_warp;
};

// Optional progress lines (seed done, time), e.g. to stderr.
using Progress = std::function<void(const std::string&)>;

std::vector<LayerRecord> measure_layer(Backend& backend, const Common& opt, const Progress& progress = {});

struct DriftOptions : Common {
  int layers = 4;
  ResidualFormat residual = ResidualFormat::kFP32;
};

struct DriftRecord {
  std::string preset, source;
  MoeShape shape;
  WeightFormat format = WeightFormat::kMXFP8;
  int batch = 0;
  InputKind inputs = InputKind::kGaussian;
  int seeds = 0, layers = 0;
  OutputFormat output = OutputFormat::kBF16;
  ResidualFormat residual = ResidualFormat::kFP32;
  std::array<bool, kPaths> runs{};
  std::array<WeightFormat, kPaths> weights{};
  // Per depth 1..layers (index depth-1):
  std::array<std::vector<Summary>, kPaths> rel_l2;
  std::vector<Summary> weight_quant, ratio_fp8_over_warp, ratio_bf16_over_warp;
  std::array<std::vector<double>, kPaths> reroutes;  // tokens per layer (mean over the seeds whose stream is still finite there; NaN if none) routed to a different expert set
};

std::vector<DriftRecord> measure_drift(Backend& backend, const DriftOptions& opt, const Progress& progress = {});

// The JSON records of docs/ACCURACY.md, issue 5's fields first.
using Json = nlohmann::ordered_json;
Json to_json(const LayerRecord& r);
Json to_json(const DriftRecord& r);

}  // namespace wd::accuracy
