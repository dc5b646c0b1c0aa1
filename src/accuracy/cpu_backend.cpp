// The CPU models of the three paths (see backend.h), and what all backends share.
#include <cstring>
#include <map>
#include <memory>

#include "accuracy/backend.h"
#include "kernels/tc_shape.h"
#include "moe/classical_rules.h"
#include "warpdecode/classical_config.h"
#include "warpdecode/classical_reference.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {

const char* to_string(Path p) {
  switch (p) {
    case Path::kWarp: return "warp";
    case Path::kClassicalBf16: return "classical_bf16";
    case Path::kClassicalFp8: return "classical_fp8";
    case Path::kClassicalW8A16: return "classical_w8a16";
  }
  return "?";
}

const char* to_string(OutputFormat t) { return t == OutputFormat::kBF16 ? "bf16" : "fp32"; }

OutputFormat parse_output_format(const std::string& s) {
  if (s == "bf16") return OutputFormat::kBF16;
  if (s == "fp32") return OutputFormat::kFP32;
  throw InvalidArgument(detail::concat("unknown output type '", s, "' (allowed: bf16, fp32)"));
}

WeightFormat path_weights(Path p, WeightFormat requested) {
  switch (p) {
    case Path::kWarp: return requested == WeightFormat::kBF16 ? WeightFormat::kBF16 : WeightFormat::kMXFP8;
    case Path::kClassicalBf16: return WeightFormat::kBF16;
    case Path::kClassicalFp8: return requested;
    case Path::kClassicalW8A16: return WeightFormat::kMXFP8;
  }
  return requested;
}

bool path_runs(Path p, WeightFormat requested) {
  if (p == Path::kClassicalW8A16) return requested == WeightFormat::kMXFP8;
  return p != Path::kClassicalFp8 || requested != WeightFormat::kBF16;
}

LayerWeights converted_layer(std::shared_ptr<const MoeWeights> bf16) {
  WD_CHECK(bf16 != nullptr && bf16->format() == WeightFormat::kBF16, "converted_layer: a BF16 layer is needed");
  return [bf16](WeightFormat f) -> std::shared_ptr<const MoeWeights> {
    switch (f) {
      case WeightFormat::kBF16: return bf16;
      case WeightFormat::kMXFP8: return std::make_shared<const MoeWeights>(bf16->to_mxfp8());
      case WeightFormat::kFP8Block128: return std::make_shared<const MoeWeights>(bf16->to_fp8_block128());
    }
    throw InvalidArgument("converted_layer: unknown weight format");
  };
}

std::shared_ptr<const MoeWeights> given_layer(const LayerWeights& layer, WeightFormat f, const MoeShape& shape) {
  std::shared_ptr<const MoeWeights> w = layer(f);
  WD_CHECK(w != nullptr, "accuracy: the given layer has no ", to_string(f), " weights");
  const MoeShape& g = w->shape();
  WD_CHECK(w->format() == f, "accuracy: the given layer's ", to_string(f), " weights are ", to_string(w->format()));
  WD_CHECK(g.hidden == shape.hidden && g.intermediate == shape.intermediate && g.experts == shape.experts &&
               g.top_k == shape.top_k && g.norm_topk_prob == shape.norm_topk_prob,
           "accuracy: the given layer's shape (H=", g.hidden, " I=", g.intermediate, " E=", g.experts, " K=", g.top_k,
           ") is not the backend's (H=", shape.hidden, " I=", shape.intermediate, " E=", shape.experts, " K=",
           shape.top_k, ")");
  return w;
}

void round_output(std::vector<double>& y, OutputFormat out) {
  for (double& v : y) v = out == OutputFormat::kBF16 ? double(bf16_to_float(float_to_bf16(float(v)))) : double(float(v));
}

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const MoeShape& shape, OutputFormat out, int threads) : shape_(shape), out_(out), threads_(threads) {
    shape.validate();
  }

  bool gpu() const override { return false; }

  // W8A8 quantizes activations in groups of 128: H and I multiples of 128.
  // W8A16 where the GPU runs it on an sm_90a device (its TMA tile fits the
  // shape; gpu_backend.cpp asks the same of this device): a model of a path
  // the GPU cannot run is no figure of it.
  bool available(Path p) const override {
    if (p == Path::kClassicalW8A16)
      return ClassicalConfig::for_batch(shape_, 1, WeightFormat::kMXFP8, /*sm90a=*/true, true).bf16_activations;
    return p != Path::kClassicalFp8 || classical_rules::w8a8_shape_ok(shape_);
  }

  std::string describe(Path p) const override {
    switch (p) {
      case Path::kWarp:
        return warp_precision() == reference::Precision::kFP32SplitH
                   ? "CPU model: FP32-accumulating reference with h split into BF16 hi + lo as the tensor-core "
                     "kernels hold it (reference::moe_experts, kFP32SplitH)"
                   : "CPU model: FP32-accumulating reference, as the scalar kernels (reference::moe_experts, kFP32)";
      case Path::kClassicalBf16: return "CPU model: classical-path reference, BF16 (reference::classical_experts)";
      case Path::kClassicalFp8:
        return available(p) ? "CPU model: classical-path reference, W8A8 (reference::classical_experts)"
                            : "not run: W8A8 needs H and I to be multiples of 128";
      case Path::kClassicalW8A16:
        return available(p) ? "CPU model: classical-path reference, W8A16 (reference::classical_experts, BF16 "
                              "activations)"
                            : "not run: W8A16 runs on the TMA tile, which this shape does not fit";
    }
    return "";
  }

  void set_layer(uint64_t seed, const std::vector<WeightFormat>& formats) override {
    SyntheticSpec spec;
    spec.seed = seed;
    set_layer_weights(converted_layer(std::make_shared<const MoeWeights>(MoeWeights::synthetic(shape_, spec))),
                      formats);
  }

  // Holds the given layer's own tensors (no copy).
  void set_layer_weights(const LayerWeights& layer, const std::vector<WeightFormat>& formats) override {
    layers_.clear();
    layers_.emplace(WeightFormat::kBF16, given_layer(layer, WeightFormat::kBF16, shape_));
    for (WeightFormat f : formats)
      if (!layers_.count(f)) layers_.emplace(f, given_layer(layer, f, shape_));
  }

  const std::vector<uint16_t>& router() const override { return layer(WeightFormat::kBF16).router; }

  HostExperts slice(WeightFormat f, const std::vector<int32_t>& ids) override {
    return slice_experts(layer(f).view(), ids, [](void* dst, const void* src, size_t n) { std::memcpy(dst, src, n); });
  }

  PathRouting route(Path p, WeightFormat f, const uint16_t* x, int batch) override {
    reference::Routing r = reference::router(layer(path_weights(p, f)).view(), x, batch);
    return PathRouting{std::move(r.ids), std::move(r.weights)};
  }

  std::vector<double> experts(Path p, WeightFormat f, const uint16_t* x, const PathRouting& r, int batch) override {
    WD_CHECK(path_runs(p, f), "the ", to_string(p), " path does not run ", to_string(f), " requests");
    const MoeWeightsView w = layer(path_weights(p, f)).view();
    std::vector<double> y =
        p == Path::kWarp
            ? reference::moe_experts(w, x, r.ids.data(), r.weights.data(), batch, warp_precision(), threads_)
            : reference::classical_experts(w, x, r.ids.data(), r.weights.data(), batch, threads_,
                                           silu_fused_on_h200(p, f, batch), p == Path::kClassicalW8A16);
    round_output(y, out_);
    return y;
  }

 private:
  // Warp decode runs its tensor-core kernels wherever the shape fits them
  // (WarpDecodeConfig::default_family, every format and batch), else the
  // scalar ones: their h is FP32, the tensor cores' a BF16 hi + lo pair.
  reference::Precision warp_precision() const {
    return kernels::tensor_core_shape_ok(shape_.hidden, shape_.intermediate) ? reference::Precision::kFP32SplitH
                                                                             : reference::Precision::kFP32;
  }

  // A classical path fuses SiLU·up into its gate_up GEMM where the H200
  // (sm_90a) configuration for this batch does: the configuration the GPU
  // backend runs (ClassicalConfig::for_batch on the path's weights).
  bool silu_fused_on_h200(Path p, WeightFormat requested, int batch) const {
    return ClassicalConfig::for_batch(shape_, batch, path_weights(p, requested), true, p == Path::kClassicalW8A16)
        .fuse_silu;
  }

  const MoeWeights& layer(WeightFormat f) const {
    const auto it = layers_.find(f);
    WD_CHECK(it != layers_.end(), "accuracy: the current layer is not held in ", to_string(f));
    return *it->second;
  }

  MoeShape shape_;
  OutputFormat out_;
  int threads_;
  std::map<WeightFormat, std::shared_ptr<const MoeWeights>> layers_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const MoeShape& shape, OutputFormat out, int threads) {
  return std::make_unique<CpuBackend>(shape, out, threads);
}

}  // namespace wd::accuracy
