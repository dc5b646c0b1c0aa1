// The GPU backend of `warpdecode accuracy`: the real kernels (WarpDecodeMoe,
// ClassicalMoe) on synthetic weights generated on the device, or a given
// layer uploaded in each of its formats, one layer at a time. Every call is
// synchronous (the harness is not timed) and every CUDA call is checked;
// outputs are NaN-poisoned before each run so that an unwritten element
// shows as a non-finite error instead of a plausible one.
#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>

#include "accuracy/backend.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "moe/classical_rules.h"
#include "warpdecode/classical.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/warp_decode.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {
namespace {

class GpuBackend final : public Backend {
 public:
  GpuBackend(const MoeShape& shape, int max_batch, OutputFormat out)
      : shape_(shape), max_batch_(max_batch), out_(out), warp_(shape, max_batch), classical_(shape, max_batch) {
    WD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const size_t BH = size_t(max_batch) * shape.hidden, BK = size_t(max_batch) * shape.top_k;
    x_ = DeviceBuffer<uint16_t>(BH);
    ids_ = DeviceBuffer<int32_t>(BK);
    weights_ = DeviceBuffer<float>(BK);
    y_ = DeviceBuffer<float>(BH);  // FP32 output, or BF16 in its first half
  }
  ~GpuBackend() override { cudaStreamDestroy(stream_); }

  bool gpu() const override { return true; }

  std::string describe(Path p) const override {
    switch (p) {
      case Path::kWarp: return "GPU kernels: WarpDecodeMoe (moe_gate_up + moe_down)";
      case Path::kClassicalBf16: return "GPU kernels: ClassicalMoe, BF16 weights and activations";
      case Path::kClassicalFp8:
        return available(p) ? "GPU kernels: ClassicalMoe, W8A8 (FP8 activations per token and group of 128)"
                            : "not run: W8A8 needs H and I to be multiples of 128";
      case Path::kClassicalW8A16:
        return available(p) ? "GPU kernels: ClassicalMoe, W8A16 (MXFP8 weights decoded to BF16, BF16 activations)"
                            : "not run: W8A16 needs the sm_90a kernels";
    }
    return "";
  }

  bool available(Path p) const override {
    if (p == Path::kClassicalFp8) return classical_rules::w8a8_shape_ok(shape_);  // groups of 128
    return p != Path::kClassicalW8A16 ||
           ClassicalConfig::for_batch(shape_, 1, WeightFormat::kMXFP8, ClassicalMoe::wgmma_available(), true)
               .bf16_activations;
  }

  void set_layer(uint64_t seed, const std::vector<WeightFormat>& formats) override {
    drop_layer();
    SyntheticSpec spec;
    spec.seed = seed;
    hold(
        std::make_unique<DeviceMoeWeights>(
            DeviceMoeWeights::synthetic(shape_, spec, WeightFormat::kBF16, MxScaleRule::kNoSaturate, stream_)),
        formats,
        [&] { return DeviceMoeWeights::synthetic(shape_, spec, WeightFormat::kMXFP8, MxScaleRule::kNoSaturate, stream_); },
        [&] { return DeviceFp8BlockWeights::quantize(view(WeightFormat::kBF16), stream_); });
  }

  // Each format uploaded from the host copy `layer` gives, which is let go
  // before the next is asked for.
  void set_layer_weights(const LayerWeights& layer, const std::vector<WeightFormat>& formats) override {
    drop_layer();
    hold(std::make_unique<DeviceMoeWeights>(DeviceMoeWeights::upload(*given_layer(layer, WeightFormat::kBF16, shape_))),
         formats, [&] { return DeviceMoeWeights::upload(*given_layer(layer, WeightFormat::kMXFP8, shape_)); },
         [&] { return DeviceFp8BlockWeights::upload(*given_layer(layer, WeightFormat::kFP8Block128, shape_)); });
  }

  const std::vector<uint16_t>& router() const override { return router_; }

  HostExperts slice(WeightFormat f, const std::vector<int32_t>& ids) override {
    return slice_experts(view(f), ids, [this](void* dst, const void* src, size_t n) { copy_to_host(dst, src, n); });
  }

  PathRouting route(Path p, WeightFormat f, const uint16_t* x, int batch) override {
    check_batch(batch);
    const MoeWeightsView w = view(path_weights(p, f));
    upload(x_.data(), x, size_t(batch) * shape_.hidden);
    const size_t BK = size_t(batch) * shape_.top_k;
    WD_CUDA_CHECK(cudaMemsetAsync(ids_.data(), 0xFF, BK * sizeof(int32_t), stream_));
    WD_CUDA_CHECK(cudaMemsetAsync(weights_.data(), 0xFF, BK * sizeof(float), stream_));
    if (p == Path::kWarp) warp_.route(w, x_.data(), batch, ids_.data(), weights_.data(), stream_);
    else classical_.route(w, x_.data(), batch, ids_.data(), weights_.data(), stream_);
    PathRouting r;
    r.ids.resize(BK);
    std::vector<float> wf(BK);
    copy_to_host(r.ids.data(), ids_.data(), BK * sizeof(int32_t));
    copy_to_host(wf.data(), weights_.data(), BK * sizeof(float));
    r.weights.assign(wf.begin(), wf.end());
    for (size_t i = 0; i < BK; ++i)
      WD_CHECK(r.ids[i] >= 0 && r.ids[i] < shape_.experts, "accuracy: the GPU router of path ", to_string(p),
               " wrote expert id ", r.ids[i], " at slot ", i);
    return r;
  }

  std::vector<double> experts(Path p, WeightFormat f, const uint16_t* x, const PathRouting& r, int batch) override {
    check_batch(batch);
    WD_CHECK(path_runs(p, f) && available(p), "the ", to_string(p), " path does not run ", to_string(f),
             " requests on this device");
    const MoeWeightsView w = view(path_weights(p, f));
    const size_t BH = size_t(batch) * shape_.hidden, BK = size_t(batch) * shape_.top_k;
    WD_CHECK(r.ids.size() == BK && r.weights.size() == BK, "accuracy: routing of ", r.ids.size(), " slots for B·K = ", BK);
    upload(x_.data(), x, BH);
    upload(ids_.data(), r.ids.data(), BK);
    const std::vector<float> wf(r.weights.begin(), r.weights.end());
    upload(weights_.data(), wf.data(), BK);
    WD_CUDA_CHECK(cudaMemsetAsync(y_.data(), 0xFF, y_.bytes(), stream_));  // NaN poison
    const wd::OutputType type = out_ == OutputFormat::kBF16 ? wd::OutputType::kBF16 : wd::OutputType::kFP32;
    const MoeOutput out{y_.data(), type, nullptr};
    const RoutingView rv{batch, shape_.top_k, ids_.data(), weights_.data()};
    if (p == Path::kWarp) {
      warp_.experts(w, x_.data(), rv, out, stream_);
    } else {
      const bool a16 = p == Path::kClassicalW8A16;
      classical_.experts(w, x_.data(), rv, out,
                         ClassicalConfig::for_batch(shape_, batch, w.format, ClassicalMoe::wgmma_available(), a16),
                         stream_);
    }
    WD_CUDA_CHECK(cudaGetLastError());
    std::vector<double> y(BH);
    if (out_ == OutputFormat::kBF16) {
      std::vector<uint16_t> h(BH);
      copy_to_host(h.data(), y_.data(), BH * sizeof(uint16_t));
      for (size_t i = 0; i < BH; ++i) y[i] = bf16_to_float(h[i]);
    } else {
      std::vector<float> h(BH);
      copy_to_host(h.data(), y_.data(), BH * sizeof(float));
      for (size_t i = 0; i < BH; ++i) y[i] = h[i];
    }
    return y;
  }

 private:
  // The previous layer's memory freed before the next one is made.
  void drop_layer() {
    dense_.clear();
    block_.reset();
  }

  // Makes bf16 the current layer with every format in `formats`: MXFP8 from
  // make_mxfp8, FP8 block-128 from make_block (bf16 is current by then);
  // waits for the stream and keeps the router on the host.
  void hold(std::unique_ptr<DeviceMoeWeights> bf16, const std::vector<WeightFormat>& formats,
            const std::function<DeviceMoeWeights()>& make_mxfp8,
            const std::function<DeviceFp8BlockWeights()>& make_block) {
    dense_.emplace(WeightFormat::kBF16, std::move(bf16));
    for (WeightFormat f : formats) {
      if (f == WeightFormat::kMXFP8 && !dense_.count(f))
        dense_.emplace(f, std::make_unique<DeviceMoeWeights>(make_mxfp8()));
      if (f == WeightFormat::kFP8Block128 && !block_) block_ = std::make_unique<DeviceFp8BlockWeights>(make_block());
    }
    WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    router_.resize(size_t(shape_.experts) * shape_.hidden);
    copy_to_host(router_.data(), view(WeightFormat::kBF16).router, router_.size() * sizeof(uint16_t));
  }

  MoeWeightsView view(WeightFormat f) const {
    if (f == WeightFormat::kFP8Block128) {
      WD_CHECK(block_ != nullptr, "accuracy: the current layer is not held in fp8-block128");
      return block_->view();
    }
    const auto it = dense_.find(f);
    WD_CHECK(it != dense_.end(), "accuracy: the current layer is not held in ", to_string(f));
    return it->second->view();
  }

  void check_batch(int batch) const {
    WD_CHECK(batch >= 1 && batch <= max_batch_, "accuracy: batch = ", batch, " must be in [1, ", max_batch_, "]");
  }

  // Stream-ordered copies, waited for: the stream is non-blocking, so a plain
  // cudaMemcpy would not be ordered after the kernels.
  void copy_to_host(void* dst, const void* src, size_t bytes) {
    WD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  template <typename T>
  void upload(T* dst, const T* src, size_t n) {
    WD_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, stream_));
    WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  MoeShape shape_;
  int max_batch_;
  OutputFormat out_;
  cudaStream_t stream_ = nullptr;
  WarpDecodeMoe warp_;
  ClassicalMoe classical_;
  std::map<WeightFormat, std::unique_ptr<DeviceMoeWeights>> dense_;  // BF16, MXFP8
  std::unique_ptr<DeviceFp8BlockWeights> block_;
  std::vector<uint16_t> router_;
  DeviceBuffer<uint16_t> x_;
  DeviceBuffer<int32_t> ids_;
  DeviceBuffer<float> weights_;
  DeviceBuffer<float> y_;
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(const MoeShape& shape, int max_batch, OutputFormat out) {
  return std::make_unique<GpuBackend>(shape, max_batch, out);
}

}  // namespace wd::accuracy
