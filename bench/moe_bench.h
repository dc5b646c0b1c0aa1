// The MoE-layer timing harness behind `warpdecode bench-moe`.
//
// Method (docs/DESIGN.md "How we measure"): weights are generated on the
// device in enough copies (copies_for, where memory allows) that the calls
// between two uses of one copy read at least 8× the L2 even at B = 1, whose
// call reads only its K routed experts; each timed replay is a CUDA graph of
// calls_per_graph layer calls, call i using weight copy i mod copies and its
// own fresh random routing and activations, re-drawn before every replay.
// Per-layer time = replay time / calls (CUDA events), median / min / max over
// replays after warm-up.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clock_sampler.h"
#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "warpdecode/layout.h"
#include "warpdecode/warp_decode.h"

namespace wd::bench {

// Bytes one MoE layer call must read from memory: the weights and scales of
// each distinct expert routed to, plus the B·H BF16 activations. (The FP32
// intermediate h, B·K·I·4 bytes written and read once, is not counted: it is
// under 0.3% of the weight bytes at every preset and B ≤ 64.)
double unique_bytes(const MoeShape& s, WeightFormat f, double distinct_experts, int batch);

struct Timing {
  double us_median = 0, us_min = 0, us_max = 0;
};

struct StageTiming {
  std::string name;
  Timing time;
  double bytes = 0;  // mean bytes the stage must read per call
};

struct Measurement {
  int batch = 0;
  ClockReading clock;        // during the settle replays before the timed series (Options::clock)
  std::vector<StageTiming> stages;  // with Options::stages
  Timing experts;            // the two expert kernels, router excluded
  Timing with_router;        // router + the two kernels
  double distinct_experts = 0;  // mean over timed calls
  double unique_bytes = 0;      // mean over timed calls
};

// One implementation of the MoE layer as the harness times it. prepare() runs
// before graph capture (allocation allowed there); route() and experts() are
// captured and must be stream-ordered and allocation-free.
class LayerPath {
 public:
  virtual ~LayerPath() = default;
  virtual std::string name() const = 0;    // "warp", "classical", ...
  virtual std::string config() const = 0;  // the variant, for the tables
  virtual void prepare(const MoeShape& shape, int batch) = 0;
  virtual void route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids,
                     float* weights, cudaStream_t stream) = 0;
  virtual void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                       uint16_t* y, cudaStream_t stream) = 0;
  // Optional per-stage breakdown: the stages of experts(), each runnable on
  // its own (on whatever its inputs hold from the last full call), and the
  // bytes each must read.
  virtual std::vector<std::string> stages() const { return {}; }
  virtual void run_stage(int stage, const MoeWeightsView& w, const uint16_t* x,
                         const RoutingView& routing, uint16_t* y, cudaStream_t stream) {}
  virtual double stage_bytes(int stage, const MoeShape& s, WeightFormat f, double distinct_experts,
                             int batch) const { return 0; }
};

// Warp decode (WarpDecodeMoe) with a given kernel configuration.
class WarpPath : public LayerPath {
 public:
  explicit WarpPath(const WarpDecodeConfig& c) : config_(c) {}
  std::string name() const override { return "warp"; }
  std::string config() const override;
  void prepare(const MoeShape& shape, int batch) override;
  void route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
             cudaStream_t stream) override;
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, uint16_t* y,
               cudaStream_t stream) override;
  // The router alone is a stage too: "with router" minus "router excluded"
  // also differs in the routing (the router's picks against uniform random
  // ones), so it is not the router's cost.
  std::vector<std::string> stages() const override { return {"moe_gate_up", "moe_down", "router"}; }
  void run_stage(int stage, const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                 uint16_t* y, cudaStream_t stream) override;
  double stage_bytes(int stage, const MoeShape& s, WeightFormat f, double distinct_experts,
                     int batch) const override;

 private:
  WarpDecodeConfig config_;
  std::unique_ptr<WarpDecodeMoe> moe_;
  DeviceBuffer<int32_t> route_ids_;  // the router stage's output (B, K)
  DeviceBuffer<float> route_w_;
};

struct Options {
  int calls = 16;      // layer calls per graph
  int replays = 30;    // timed graph replays
  int warmup = 3;
  uint64_t seed = 1;
  bool with_router = true;
  bool stages = false;  // also time each stage of the path on its own
  // Routing of the timed calls: uniform random top-K (false), or balanced:
  // every expert takes the same number of a call's B·K entries (B·K / E
  // where E divides it, else within one), token b of a call the K
  // consecutive experts from (b·K + a per-call random shift) mod E. A
  // diagnostic of what the experts' uneven loads cost (the classical path's
  // last, mostly padding, token tile of an expert), not a routing a model
  // produces.
  bool balanced_routing = false;
  // Samples the SM clock and power while the graph is replayed back to back
  // before each layer's timed series: that settle then lasts ~250 ms and its
  // last 150 ms are sampled (null: no sampling, and a 20 ms settle).
  ClockSampler* clock = nullptr;
};

// The weight bytes a B = 1 call reads: its K experts'.
size_t batch_one_call_bytes(const MoeShape& shape, WeightFormat read_format);

// Weight copies for a shape whose calls read `read_format`: 1 + ceil(8·l2 /
// batch_one_call_bytes), so that between two uses of a
// copy the other copies' calls read at least 8× the L2 (at B = 1 a call reads
// far less than its layer: qwen3-30b-a3b MXFP8 39 MB, below the L2 of 50-60
// MiB, and one copy let a call find some of its experts in L2 from the last).
size_t copies_for(const MoeShape& shape, WeightFormat read_format, size_t l2_bytes);

// The calls of one timed graph: at least `calls`, and a multiple of the copies,
// so that each copy's uses are `copies` calls apart across replays too.
int calls_per_graph(int calls, int copies);

// Holds the weight copies of one (shape, format) on the device.
class MoeBench {
 public:
  // Allocates copies_for(shape, read format, l2) copies, within
  // memory_budget bytes. Throws if even one copy does not fit. options: what
  // each copy keeps besides the canonical tensors (counted in the budget).
  // read_format: what the timed calls read where a path converts the copies
  // (FP8 block-128 from BF16; counted in the budget too); default `format`.
  MoeBench(const MoeShape& shape, WeightFormat format, size_t l2_bytes, size_t memory_budget,
           uint64_t seed, cudaStream_t stream, const DeviceWeightsOptions& options = {},
           std::optional<WeightFormat> read_format = std::nullopt);
  ~MoeBench();

  // Times `path` at this batch on these weights (see the method above).
  Measurement run(int batch, LayerPath& path, const Options& opt);

  // The weights of copy i (cycled by the harness), for paths that derive
  // their own format from them at prepare time.
  const DeviceMoeWeights& weights(int i) const { return weights_[size_t(i) % weights_.size()]; }

  int copies() const { return int(weights_.size()); }
  const MoeShape& shape() const { return shape_; }
  size_t layer_bytes() const { return layer_bytes_; }

 private:
  MoeShape shape_;
  WeightFormat format_;
  size_t layer_bytes_ = 0;
  std::vector<DeviceMoeWeights> weights_;
  cudaStream_t stream_;
};

// A pair of CUDA events: time_us(s, f) is the stream time of the work f
// queues on s (it synchronises on the stop event).
struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    WD_CUDA_CHECK(cudaEventCreate(&start));
    WD_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  double time_us(cudaStream_t s, const std::function<void()>& f) {
    WD_CUDA_CHECK(cudaEventRecord(start, s));
    f();
    WD_CUDA_CHECK(cudaEventRecord(stop, s));
    WD_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    WD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return 1000.0 * ms;
  }
};

// Median/min/max of a sample.
Timing summarize(std::vector<double> us);

}  // namespace wd::bench
