// The MoE-layer timing harness behind `warpdecode bench-moe`.
//
// Method (docs/DESIGN.md "How we measure"): weights are generated on the
// device in enough copies that their total is at least 8× the L2 (where
// memory allows); each timed replay is a CUDA graph of `calls` layer calls,
// call i using weight copy i mod copies and its own fresh random routing and
// activations, re-drawn before every replay. Per-layer time = replay time /
// calls (CUDA events), median / min / max over replays after warm-up.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

struct Measurement {
  int batch = 0;
  Timing experts;            // the two expert kernels, router excluded
  Timing with_router;        // router + the two kernels
  double distinct_experts = 0;  // mean over timed calls
  double unique_bytes = 0;      // mean over timed calls
};

struct Options {
  int calls = 16;      // layer calls per graph
  int replays = 30;    // timed graph replays
  int warmup = 3;
  uint64_t seed = 1;
  bool with_router = true;
};

// Holds the weight copies of one (shape, format) on the device.
class MoeBench {
 public:
  // Allocates ceil(8·l2 / layer bytes) copies (at least 1), within
  // memory_budget bytes. Throws if even one copy does not fit.
  MoeBench(const MoeShape& shape, WeightFormat format, size_t l2_bytes, size_t memory_budget,
           uint64_t seed, cudaStream_t stream);
  ~MoeBench();

  Measurement run(int batch, const WarpDecodeConfig& config, const Options& opt);

  int copies() const { return int(weights_.size()); }
  size_t layer_bytes() const { return layer_bytes_; }

 private:
  MoeShape shape_;
  WeightFormat format_;
  size_t layer_bytes_ = 0;
  std::vector<DeviceMoeWeights> weights_;
  cudaStream_t stream_;
};

// Median/min/max of a sample.
Timing summarize(std::vector<double> us);

}  // namespace wd::bench
