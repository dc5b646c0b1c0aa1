#include "moe_bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/median.h"
#include "kernels/synthetic.cuh"
#include "warpdecode/error.h"

namespace wd::bench {

double unique_bytes(const MoeShape& s, WeightFormat f, double distinct_experts, int batch) {
  return distinct_experts * double(expert_bytes(s, f)) + 2.0 * batch * s.hidden;
}

Timing summarize(std::vector<double> us) {
  WD_CHECK(!us.empty(), "no timings");
  const auto [lo, hi] = std::minmax_element(us.begin(), us.end());
  return Timing{median(us), *lo, *hi};
}

size_t batch_one_call_bytes(const MoeShape& s, WeightFormat read_format) {
  return size_t(std::min(s.top_k, s.experts)) * expert_bytes(s, read_format);
}

size_t copies_for(const MoeShape& s, WeightFormat read_format, size_t l2_bytes) {
  const size_t call_bytes = batch_one_call_bytes(s, read_format);
  return 1 + (8 * l2_bytes + call_bytes - 1) / call_bytes;
}

int calls_per_graph(int calls, int copies) {
  WD_CHECK(calls >= 1 && copies >= 1, "bench: calls = ", calls, ", copies = ", copies, " must be >= 1");
  const int n = std::max(calls, copies);
  return (n + copies - 1) / copies * copies;
}

MoeBench::MoeBench(const MoeShape& shape, WeightFormat format, size_t l2_bytes,
                   size_t memory_budget, uint64_t seed, cudaStream_t stream, const DeviceWeightsOptions& options,
                   std::optional<WeightFormat> read_format)
    : shape_(shape), format_(format), stream_(stream) {
  const WeightFormat read = read_format.value_or(format);
  layer_bytes_ = size_t(shape.experts) * expert_bytes(shape, format);
  // The tiled copies, where kept: the down third and the gate_up two thirds
  // again; tiled-only weights hold each tensor once.
  size_t held = layer_bytes_;
  if (format == WeightFormat::kMXFP8 && options.canonical_mxfp8) {
    if (options.tiled_mxfp8_down) held += layer_bytes_ / 3;
    if (options.tiled_mxfp8_gate_up) held += layer_bytes_ / 3 * 2;
  }
  if (format == WeightFormat::kBF16 && options.tiled_bf16 && !options.tiled_only_bf16) held += layer_bytes_;
  // A path that reads another format converts each copy (ClassicalPath: FP8
  // block-128 from BF16): those bytes are held too.
  if (read != format) held += size_t(shape.experts) * expert_bytes(shape, read);
  WD_CHECK(held <= memory_budget, "bench: one copy of the layer (", held >> 20,
           " MiB) does not fit in the memory budget (", memory_budget >> 20, " MiB)");
  const size_t copies = std::min(copies_for(shape, read, l2_bytes), memory_budget / held);
  for (size_t c = 0; c < copies; ++c) {
    SyntheticSpec spec;
    spec.seed = seed + 7919 * c;
    weights_.push_back(DeviceMoeWeights::synthetic(shape, spec, format, MxScaleRule::kNoSaturate, stream, options));
  }
  WD_CUDA_CHECK(cudaStreamSynchronize(stream));
}

MoeBench::~MoeBench() = default;

namespace {

// A token's K routing weights, softmax-like: K draws of draw_weight, then
// divided by their sum (normalize_weights). Both routings draw them so.
float draw_weight(std::mt19937_64& g) { return 0.05f + float(g() % 1000) / 1000.0f; }
void normalize_weights(float* w, int K, float sum) {
  for (int k = 0; k < K; ++k) w[k] /= sum;
}

// Uniform random top-K (K distinct experts per token), softmax-like weights.
void draw_routing(std::mt19937_64& g, int B, int E, int K, int32_t* ids, float* w) {
  std::vector<int32_t> perm(E);
  for (int b = 0; b < B; ++b) {
    std::iota(perm.begin(), perm.end(), 0);
    float sum = 0;
    for (int k = 0; k < K; ++k) {
      std::swap(perm[k], perm[k + g() % (E - k)]);
      ids[b * K + k] = perm[k];
      sum += w[b * K + k] = draw_weight(g);
    }
    normalize_weights(w + b * K, K, sum);
  }
}

// Balanced (Options::balanced_routing): calls of B tokens, each spreading
// its B·K entries evenly over the E experts; the same weights as above.
void draw_balanced_routing(std::mt19937_64& g, int calls, int B, int E, int K, int32_t* ids, float* w) {
  for (int c = 0; c < calls; ++c) {
    const int shift = int(g() % uint64_t(E));
    for (int b = 0; b < B; ++b) {
      const size_t t = size_t(c) * B + b;
      float sum = 0;
      for (int k = 0; k < K; ++k) {
        ids[t * K + k] = int32_t((int64_t(b) * K + k + shift) % E);
        sum += w[t * K + k] = draw_weight(g);
      }
      normalize_weights(w + t * K, K, sum);
    }
  }
}

// The routing of `calls` calls of B tokens: balanced or uniform (Options).
void draw_calls(std::mt19937_64& g, bool balanced, int calls, int B, int E, int K, int32_t* ids, float* w) {
  if (balanced) draw_balanced_routing(g, calls, B, E, K, ids, w);
  else draw_routing(g, calls * B, E, K, ids, w);
}

int distinct(const int32_t* ids, int n) { return int(std::set<int32_t>(ids, ids + n).size()); }

class Graph {
 public:
  Graph(cudaStream_t s, const std::function<void()>& body) {
    WD_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      body();
    } catch (...) {
      cudaGraph_t g;
      cudaStreamEndCapture(s, &g);
      throw;
    }
    WD_CUDA_CHECK(cudaStreamEndCapture(s, &graph_));
    WD_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~Graph() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  void launch(cudaStream_t s) { WD_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

 private:
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
};

// Replays `graph` for about 20 ms of GPU time before a timed series, so that
// it is timed at the clocks of sustained work (a decode loop's). Without it
// a short graph (B = 1: a few hundred µs) timed right after host-side setup
// ran up to 8 % slower than an identical configuration timed after it
// (docs/PERF_LOG.md v9, run 3).
// With a sampler, the replays run for about 250 ms and the SM clock and
// power are read during their last 150 ms: the clock a decode loop of this
// graph holds. (NVML's clock and power readings change about every 100 ms
// on an H200: a 20 ms window reads the state before it; session 30.)
ClockReading settle_clocks(Graph& graph, cudaStream_t s, Events& ev, ClockSampler* clock = nullptr) {
  const double t = ev.time_us(s, [&] { graph.launch(s); });
  const double window_us = clock ? 250000.0 : 20000.0;
  const int n = std::clamp(int(window_us / std::max(t, 1.0)), 1, clock ? 20000 : 1000);
  // Sampling starts 100 ms (host time) after the first launch: while later
  // launches are still being queued if the launch queue blocks, else after
  // a sleep with the queued replays still running.
  const auto start = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  bool sampling = false;
  for (int i = 0; i < n; ++i) {
    graph.launch(s);
    if (clock && !sampling && std::chrono::steady_clock::now() >= start) {
      clock->start(2000);
      sampling = true;
    }
  }
  if (clock && !sampling) {
    std::this_thread::sleep_until(start);
    clock->start(2000);
  }
  WD_CUDA_CHECK(cudaStreamSynchronize(s));
  return clock ? clock->stop() : ClockReading{};
}

}  // namespace

std::string WarpPath::config() const { return config_.label(); }

void WarpPath::run_stage(int stage, const MoeWeightsView& w, const uint16_t* x,
                         const RoutingView& routing, uint16_t* y, cudaStream_t stream) {
  if (stage == 2) {
    moe_->route(w, x, routing.batch, route_ids_.data(), route_w_.data(), stream);
    return;
  }
  moe_->experts(w, x, routing, MoeOutput{y, OutputType::kBF16, nullptr}, config_, stream,
                stage == 0 ? WarpDecodeMoe::Kernels::kGateUp : WarpDecodeMoe::Kernels::kDown);
}

double WarpPath::stage_bytes(int stage, const MoeShape& s, WeightFormat f, double distinct,
                             int batch) const {
  if (stage == 2) return 2.0 * s.experts * s.hidden + 2.0 * batch * s.hidden;  // router and x, BF16
  const double elem = f == WeightFormat::kBF16 ? 2.0 : 1.0 + 1.0 / kMxBlock;
  const double rows = stage == 0 ? 2.0 * s.intermediate : double(s.hidden);
  const double cols = stage == 0 ? double(s.hidden) : double(s.intermediate);
  return distinct * rows * cols * elem + (stage == 0 ? 2.0 * batch * s.hidden : 0.0);
}

void WarpPath::prepare(const MoeShape& shape, int batch) {
  moe_ = std::make_unique<WarpDecodeMoe>(shape, batch);
  route_ids_ = DeviceBuffer<int32_t>(size_t(batch) * shape.top_k);
  route_w_ = DeviceBuffer<float>(size_t(batch) * shape.top_k);
}

void WarpPath::route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids,
                     float* weights, cudaStream_t stream) {
  moe_->route(w, x, batch, ids, weights, stream);
}

void WarpPath::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                       uint16_t* y, cudaStream_t stream) {
  moe_->experts(w, x, routing, MoeOutput{y, OutputType::kBF16, nullptr}, config_, stream);
}

Measurement MoeBench::run(int B, LayerPath& path, const Options& opt) {
  const int H = shape_.hidden, K = shape_.top_k, E = shape_.experts, N = calls_per_graph(opt.calls, copies());
  path.prepare(shape_, B);
  const size_t BK = size_t(B) * K, BH = size_t(B) * H;
  DeviceBuffer<int32_t> ids(BK * N);
  DeviceBuffer<float> rw(BK * N);
  DeviceBuffer<uint16_t> x(BH * N), y(BH);
  std::vector<int32_t> ids_h(BK * N);
  std::vector<float> rw_h(BK * N);
  std::mt19937_64 g(opt.seed * 1000003 + B);
  Events ev;
  Measurement m;
  m.batch = B;

  auto fresh_inputs = [&](uint64_t round) {
    SyntheticSpec spec;
    spec.seed = opt.seed + round * 131 + B;
    spec.stddev = 1.0f;
    kernels::synthetic_bf16(x.data(), x.size(), spec, SyntheticTensor::kInput, stream_);
  };
  auto view = [&](int i) { return weights_[size_t(i) % weights_.size()].view(); };

  // Router excluded: explicit fresh routing per call, re-drawn per replay.
  {
    Graph graph(stream_, [&] {
      for (int i = 0; i < N; ++i)
        path.experts(view(i), x.data() + BH * i, RoutingView{B, K, ids.data() + BK * i, rw.data() + BK * i},
                     y.data(), stream_);
    });
    std::vector<double> us;
    double distinct_sum = 0;
    for (int r = -opt.warmup; r < opt.replays; ++r) {
      draw_calls(g, opt.balanced_routing, N, B, E, K, ids_h.data(), rw_h.data());
      WD_CUDA_CHECK(cudaMemcpyAsync(ids.data(), ids_h.data(), ids.bytes(), cudaMemcpyHostToDevice, stream_));
      WD_CUDA_CHECK(cudaMemcpyAsync(rw.data(), rw_h.data(), rw.bytes(), cudaMemcpyHostToDevice, stream_));
      fresh_inputs(uint64_t(r + opt.warmup));
      WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (r == -opt.warmup) m.clock = settle_clocks(graph, stream_, ev, opt.clock);  // on the first routing: ids must be valid
      const double t = ev.time_us(stream_, [&] { graph.launch(stream_); }) / N;
      if (r < 0) continue;
      us.push_back(t);
      for (int i = 0; i < N; ++i) distinct_sum += distinct(ids_h.data() + BK * i, int(BK));
    }
    m.experts = summarize(us);
    m.distinct_experts = distinct_sum / (double(opt.replays) * N);
    m.unique_bytes = unique_bytes(shape_, format_, m.distinct_experts, B);

    // Each stage alone, on the same fresh-routing method.
    const auto names = path.stages();
    for (int st = 0; opt.stages && st < int(names.size()); ++st) {
      Graph stage_graph(stream_, [&] {
        for (int i = 0; i < N; ++i)
          path.run_stage(st, view(i), x.data() + BH * i,
                         RoutingView{B, K, ids.data() + BK * i, rw.data() + BK * i}, y.data(), stream_);
      });
      std::vector<double> sus;
      for (int r = -opt.warmup; r < opt.replays; ++r) {
        draw_calls(g, opt.balanced_routing, N, B, E, K, ids_h.data(), rw_h.data());
        WD_CUDA_CHECK(cudaMemcpyAsync(ids.data(), ids_h.data(), ids.bytes(), cudaMemcpyHostToDevice, stream_));
        WD_CUDA_CHECK(cudaMemcpyAsync(rw.data(), rw_h.data(), rw.bytes(), cudaMemcpyHostToDevice, stream_));
        WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
        if (r == -opt.warmup) settle_clocks(stage_graph, stream_, ev);
        const double t = ev.time_us(stream_, [&] { stage_graph.launch(stream_); }) / N;
        if (r >= 0) sus.push_back(t);
      }
      m.stages.push_back(StageTiming{names[st], summarize(sus),
                                     path.stage_bytes(st, shape_, format_, m.distinct_experts, B)});
    }
  }

  // With the router: routing computed on the device from fresh activations.
  if (opt.with_router) {
    Graph graph(stream_, [&] {
      for (int i = 0; i < N; ++i) {
        path.route(view(i), x.data() + BH * i, B, ids.data() + BK * i, rw.data() + BK * i, stream_);
        path.experts(view(i), x.data() + BH * i, RoutingView{B, K, ids.data() + BK * i, rw.data() + BK * i},
                     y.data(), stream_);
      }
    });
    std::vector<double> us;
    for (int r = -opt.warmup; r < opt.replays; ++r) {
      fresh_inputs(uint64_t(r + opt.warmup) + 100000);
      WD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (r == -opt.warmup) settle_clocks(graph, stream_, ev);
      const double t = ev.time_us(stream_, [&] { graph.launch(stream_); }) / N;
      if (r >= 0) us.push_back(t);
    }
    m.with_router = summarize(us);
  }
  return m;
}

}  // namespace wd::bench
