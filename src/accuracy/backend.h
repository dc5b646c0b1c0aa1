// Where `warpdecode accuracy` runs the three MoE paths it compares:
//
//   path            GPU backend (CUDA device)         CPU backend (no device)
//   warp decode     WarpDecodeMoe (router + kernels)  reference::moe_experts, FP32 accumulation
//   classical BF16  ClassicalMoe on BF16 weights      reference::classical_experts (BF16)
//   classical FP8   ClassicalMoe W8A8 (MXFP8 or       reference::classical_experts (W8A8)
//                   FP8 block-128 weights)
//   classical W8A16 ClassicalMoe W8A16 (MXFP8         reference::classical_experts (W8A16)
//                   weights, BF16 activations; sm_90a)
//
// The CPU backend runs CPU *models* of the paths (the FP32 reference stands
// for warp decode's FP32 accumulation; the classical CPU reference makes every
// rounding the GPU path makes), so that the command works, and is tested, on
// machines without a GPU. Its numbers are labelled "cpu-model" everywhere.
// Its routers are the FP64 reference router.
//
// A backend holds one layer at a time: synthetic weights of a seed, in every
// format asked for, generated on the device or on the host (bit-identical,
// see weights.h), or a given layer in each format its source has (e.g. a
// checkpoint's); and copies the routed experts to the host for the judge.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/experts.h"
#include "warpdecode/layout.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {

enum class Path { kWarp, kClassicalBf16, kClassicalFp8, kClassicalW8A16 };
const char* to_string(Path p);  // "warp", "classical_bf16", "classical_fp8", "classical_w8a16"

// What the paths write: BF16 (what an engine keeps) or FP32.
enum class OutputFormat { kBF16, kFP32 };
const char* to_string(OutputFormat t);
OutputFormat parse_output_format(const std::string& s);

// A given layer, in each format its source has it: called once for BF16 and
// once for every other format a backend is asked to hold, as the backend
// needs it (each format may be loaded afresh; the GPU backend uploads one and
// lets it go before asking for the next). A checkpoint's source
// (cli::LayerSource::weights) gives BF16 and MXFP8 as its loader converts the
// checkpoint's values, and an FP8 checkpoint's own block-128 bytes and scales.
using LayerWeights = std::function<std::shared_ptr<const MoeWeights>(WeightFormat)>;

// A BF16 layer and its conversions as set_layer makes them
// (MoeWeights::to_mxfp8, to_fp8_block128), converted when asked for.
LayerWeights converted_layer(std::shared_ptr<const MoeWeights> bf16);

struct PathRouting {
  std::vector<int32_t> ids;     // (B, K)
  std::vector<double> weights;  // (B, K)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool gpu() const = 0;
  virtual std::string source() const { return gpu() ? "gpu" : "cpu-model"; }
  // One line naming what runs each path, for the command's header.
  virtual std::string describe(Path p) const = 0;
  // Whether this backend runs the path at all (the GPU backend runs W8A16
  // only where the device has the sm_90a kernels).
  virtual bool available(Path p) const { return true; }

  // Makes the layer of `seed` current (SyntheticSpec{seed}, default stddev),
  // in BF16 and every format in `formats`.
  virtual void set_layer(uint64_t seed, const std::vector<WeightFormat>& formats) = 0;
  // Makes the given layer current: layer(kBF16) and layer(f) for every f
  // in `formats`, each of the backend's shape and of format f
  // (given_layer).
  virtual void set_layer_weights(const LayerWeights& layer, const std::vector<WeightFormat>& formats) = 0;
  // The current layer's router (E, H), BF16, on the host.
  virtual const std::vector<uint16_t>& router() const = 0;
  // Host copies of the experts `ids` of the current layer in format f.
  virtual HostExperts slice(WeightFormat f, const std::vector<int32_t>& ids) = 0;

  // The path's own router on x (B, H) BF16.
  virtual PathRouting route(Path p, WeightFormat f, const uint16_t* x, int batch) = 0;
  // The path's expert computation on weights in format f with the given
  // routing: y (B, H), as the path writes it (BF16 or FP32), widened.
  virtual std::vector<double> experts(Path p, WeightFormat f, const uint16_t* x, const PathRouting& r,
                                      int batch) = 0;
};

// The weights a path runs for a requested format: warp decode streams BF16
// or MXFP8 (MXFP8 is its FP8 format, also for an fp8-block128 request); the
// classical BF16 path runs BF16; the classical FP8 path runs the request
// (MXFP8 or FP8 block-128; none for a BF16 request); classical W8A16 runs
// MXFP8 requests only. path_runs says whether the path runs for a request
// (the backend's available() too: runs()).
WeightFormat path_weights(Path p, WeightFormat requested);
bool path_runs(Path p, WeightFormat requested);

// The CPU models; threads <= 0 uses every hardware thread.
std::unique_ptr<Backend> make_cpu_backend(const MoeShape& shape, OutputFormat out, int threads = 0);

#ifdef WD_HAVE_CUDA
// The GPU kernels on the current CUDA device, sized for batches up to max_batch.
std::unique_ptr<Backend> make_gpu_backend(const MoeShape& shape, int max_batch, OutputFormat out);
#endif

// The layer `layer` gives for format f, checked: throws InvalidArgument
// unless it is a layer of `shape` (H, I, E, K and norm_topk_prob) in format
// f. What set_layer_weights holds.
std::shared_ptr<const MoeWeights> given_layer(const LayerWeights& layer, WeightFormat f, const MoeShape& shape);

// y rounded as a path of this output type writes it.
void round_output(std::vector<double>& y, OutputFormat out);

}  // namespace wd::accuracy
