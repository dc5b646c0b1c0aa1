// Warp decode on the GPU: the MoE layer in two kernels (moe_gate_up and
// moe_down, see docs/DESIGN.md), plus the router. Needs a CUDA build.
//
// Engine-ready: every call is stream-ordered, allocates nothing, never
// synchronises the host (unless WD_CHECK_ROUTING=1 asks experts() to check
// each routing: routing_check.h), and can be captured in a CUDA graph. All memory a
// forward call needs (the FP32 intermediate h, the routing of B tokens) is
// sized in the constructor for a maximum batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "warpdecode/card.h"
#include "warpdecode/layout.h"
#include "warpdecode/weights.h"

namespace wd {

enum class OutputType { kBF16, kFP32 };

struct MoeOutput {
  void* y = nullptr;               // (B, H) device, BF16 or FP32
  OutputType type = OutputType::kBF16;
  const void* residual = nullptr;  // optional (B, H), same type: y = residual + moe(x)
};

// What a DeviceMoeWeights keeps besides the canonical tensors.
struct DeviceWeightsOptions {
  // MXFP8: the down projection a second time, in the tiled layout that
  // moe_down_tc streams (warpdecode/down_tiling.h; the shape must take it:
  // H % 16 == 0, I % 64 == 0). Costs a third more weight memory (the down
  // tensor is a third of an expert); makes the tensor-core down kernel
  // 8-16 % faster and the layer 2-6 % (H200, docs/PERF_LOG.md v12). Off: the
  // kernels read the canonical tensors, with the same bits.
  bool tiled_mxfp8_down = true;
  // MXFP8: the gate_up projection a second time, in the tiled layout of
  // warpdecode/gate_up_tiling.h (I % 16 == 0, H % 64 == 0), which
  // moe_gate_up_tc streams when WarpDecodeConfig::tc_tiled_gate_up is set.
  // Costs two thirds more weight memory. Off by default.
  bool tiled_mxfp8_gate_up = false;
  // MXFP8: keep the canonical tensors. Off (both tiled copies on, a shape
  // both tilings take): each tensor is held once, tiled, so the layer costs
  // the canonical memory and runs at the tiled copies' speed; then only warp
  // decode's tensor-core kernels and, on sm_90a, the classical path's TMA
  // GEMM (BF16, and MXFP8 in W8A16) can read it; the scalar kernels and the
  // other classical configurations throw (MoeWeightsView::require_canonical). The canonical
  // tensors exist on the device while the copies are made (one layer at a
  // time), then are freed.
  bool canonical_mxfp8 = true;
  // BF16: both projections a second time, in their tiled layouts (the same
  // layouts over the rows' bytes), where the shape takes both (H % 64 == 0,
  // I % 64 == 0), which the tensor-core kernels then stream with the same
  // bits: twice the layer's memory, warp decode at the tiled-only speed, the
  // canonical tensors kept for every other path. Off by default.
  bool tiled_bf16 = false;
  // BF16: both projections held in their tiled layouts only (the canonical
  // tensors freed once tiled), the canonical memory; then the tensor-core
  // kernels read the weights, and the classical path's TMA GEMM on sm_90a
  // (ClassicalConfig::reads_tiled); the scalar kernels throw. Off by default.
  bool tiled_only_bf16 = false;

  // Both tiled copies and nothing else, in either format: the fastest warp
  // decode at the canonical memory (docs/DESIGN.md, "Tiled-only weights").
  static DeviceWeightsOptions tiled_only() {
    DeviceWeightsOptions o;
    o.tiled_mxfp8_down = true;
    o.tiled_mxfp8_gate_up = true;
    o.canonical_mxfp8 = false;
    o.tiled_only_bf16 = true;
    return o;
  }
  // Both tiled copies beside the canonical tensors, in either format: twice
  // the canonical memory, warp decode at the tiled-only speed, and every
  // other path (the scalar kernels, the classical path, hence MoeDispatch
  // above its crossover) still reads the weights.
  static DeviceWeightsOptions tiled_beside_canonical() {
    DeviceWeightsOptions o;
    o.tiled_mxfp8_down = true;
    o.tiled_mxfp8_gate_up = true;
    o.tiled_bf16 = true;
    return o;
  }
};

// Device copy of one layer's weights, in the canonical layout of layout.h
// plus what DeviceWeightsOptions asks for (or, tiled-only, the tiled copies
// alone, BF16 or MXFP8). Throws wd::InvalidArgument on options the shape or format
// cannot take.
class DeviceMoeWeights {
 public:
  // Uploads host weights (BF16 or MXFP8).
  static DeviceMoeWeights upload(const MoeWeights& host, const DeviceWeightsOptions& options = {});
  // Uploads weights described by a host view (e.g. a checkpoint's expert
  // stack, include/warpdecode/model/expert_stack.h). BF16 or MXFP8.
  static DeviceMoeWeights upload(const MoeWeightsView& host, const DeviceWeightsOptions& options = {});
  // Generates synthetic weights on the device (bit-identical to
  // MoeWeights::synthetic(...) and, for MXFP8, to_mxfp8(rule)).
  static DeviceMoeWeights synthetic(const MoeShape& shape, const SyntheticSpec& spec,
                                    WeightFormat format, MxScaleRule rule, cudaStream_t stream,
                                    const DeviceWeightsOptions& options = {});
  DeviceMoeWeights(DeviceMoeWeights&&) noexcept;
  DeviceMoeWeights& operator=(DeviceMoeWeights&&) noexcept;
  ~DeviceMoeWeights();

  MoeWeightsView view() const;
  size_t bytes() const;  // device bytes held (router included)

 private:
  DeviceMoeWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The two kernel families (see WarpDecodeConfig). A layer object runs one
// family per weight format, fixed at construction: batch invariance (a
// token's output bits independent of the rest of the batch, B included)
// holds for everything one object computes. kAuto picks by measurement
// (WarpDecodeConfig::default_family).
enum class KernelFamily { kAuto, kScalar, kTensorCores };
const char* to_string(KernelFamily f);

// Per-call tuning of the two kernels. Two families: the scalar kernels
// (tensor_cores = false; every other knob below) and the tensor-core kernels
// (tensor_cores = true; only programmatic_launch, evict_first,
// tc_deep_loads, tc_tiled_down, tc_tiled_gate_up, tc_gate_up_two_tiles and
// tc_down_pairs apply). All
// configurations of one family compute the same bits (batch invariance holds
// across them); the two families sum in different orders, so their bits differ
// (both are FP32-accurate). The tensor-core kernels need H % 256 == 0 and
// I % 64 == 0 (every Qwen3-MoE shape): tensor_cores_fit().
// The defaults (WarpDecodeConfig::for_batch) come from measurements recorded
// in docs/PERF_LOG.md.
struct WarpDecodeConfig {
  int gate_up_tokens_per_pass = 1;   // 1 or 4: tokens sharing one load of an expert's rows
  int gate_up_neurons_per_warp = 1;  // neuron pairs a warp computes in turn
  int down_rows_per_warp = 1;        // 1 or 4 outputs per warp in moe_down
  bool mx8_int_decode = false;       // MXFP8: integer decoder, or the hardware convert
  bool programmatic_launch = false;  // moe_down overlaps the tail of moe_gate_up (PDL)
  int gate_up_prefetch = 0;          // neuron pairs a gate_up warp keeps requested into L2 ahead
  int down_prefetch = 0;             // routed experts a down warp keeps requested into L2 ahead
  bool evict_first = false;          // streamed weight loads marked evict-first in L2
  bool gate_up_narrow = false;       // one token per pass: half-size load rounds, 24 warps per SM
  bool down_stage_h = false;         // moe_down blocks stage their token's h (K·I FP32) in shared memory
  bool tensor_cores = false;         // the tensor-core kernels (moe_tc.cuh) instead of the scalar ones
  bool tc_deep_loads = false;        // tensor cores, MXFP8: gate_up rounds of two chunks (moe_gate_up_tc.cu)
  bool tc_tiled_down = false;        // tensor cores, MXFP8: moe_down_tc streams the view's tiled down
                                     // weights (warpdecode/down_tiling.h) where it has them
  bool tc_tiled_gate_up = false;     // tensor cores, MXFP8: moe_gate_up_tc streams the view's tiled gate_up
                                     // weights (warpdecode/gate_up_tiling.h) where it has them
  bool tc_down_pairs = false;        // tensor cores: moe_down_tc's general walk with two warps a K slice where
                                     // it takes them (MXFP8 on the tiled copy with narrow scales, 1, 4 or 10
                                     // units of I a warp, any B: kernels::down_tc_pairs_fit); the same bits
  bool tc_gate_up_two_tiles = false;  // tensor cores: moe_gate_up_tc's passes of two n8 tiles (16 of an expert's
                                     // tokens against one decoded weight fragment) where it takes them (the
                                     // tiled gate_up copy without deep loads); the same bits
  // The measured default of a family (kScalar or kTensorCores; kAuto is
  // resolved with max_batch = batch) for a layer shape, batch size and format.
  // tiled_gate_up: the weights hold the tiled gate_up copy (MoeWeightsView::
  // gate_up_tiled; BF16: both tiled copies, tiled-only weights), which the
  // tensor cores then read, with their own deep-round rule;
  // WarpDecodeMoe::default_config(batch, view) passes it. card: the card
  // whose measurements decide where they differ by card (gate_up's two-tile
  // passes); WarpDecodeMoe passes its device's (table_card of its name).
  static WarpDecodeConfig for_batch(const MoeShape& shape, int batch, WeightFormat format,
                                    KernelFamily family = KernelFamily::kAuto, bool tiled_gate_up = false,
                                    TableCard card = TableCard::kH200);
  // Where gate_up's two-tile passes start for a shape on a card, in routing
  // entries an expert (B·K / E), doubled to stay integral: for_batch turns
  // them on from 2·B·K >= this · E (where the kernel takes them).
  static int gate_up_two_tiles_from_x2(const MoeShape& shape, WeightFormat format, TableCard card);
  // What kAuto resolves to for a layer object serving up to max_batch tokens
  // (measured on the H200, docs/PERF_LOG.md v9): the tensor cores wherever
  // the shape fits them, in both formats and at every max_batch; else the
  // scalar kernels. (The format and max_batch are kept as arguments: the
  // measured choice depended on them until v8.)
  static KernelFamily default_family(const MoeShape& shape, WeightFormat format, int max_batch);
  // Whether the tensor-core kernels take this shape.
  static bool tensor_cores_fit(const MoeShape& shape);
  // Whether tc_deep_loads changes the kernel that runs (MXFP8, and an H the
  // deep rounds take); elsewhere it is ignored.
  static bool tc_deep_loads_apply(const MoeShape& shape, WeightFormat format);
  std::string label() const;         // e.g. "gu4x1p1/dn4p2/cvt/ef/pdl", "tc/ef/pdl/tiled/tgu/2t"
};

class WarpDecodeMoe {
 public:
  static constexpr int kMaxBatch = kWarpDecodeMaxBatch;  // the largest max_batch a layer object takes
  // Sizes the workspace for up to max_batch tokens (1 to kMaxBatch) and fixes the kernel
  // family (kAuto: WarpDecodeConfig::default_family per weight format).
  // Throws on invalid shapes, for kTensorCores on shapes they do not take,
  // and for a max_batch past largest_batch(shape, family).
  WarpDecodeMoe(const MoeShape& shape, int max_batch, KernelFamily family = KernelFamily::kAuto);
  // The largest max_batch (at most kMaxBatch) the family's kernels take at
  // this shape in both formats: a gate_up block lists its B·K routing entries
  // in shared memory (tensor cores: B·K <= 51200, e.g. B <= 3200 at K = 16;
  // the scalar kernels also stage tokens there). kMaxBatch on every Qwen3
  // preset.
  static int largest_batch(const MoeShape& shape, KernelFamily family = KernelFamily::kAuto);
  ~WarpDecodeMoe();
  WarpDecodeMoe(const WarpDecodeMoe&) = delete;
  WarpDecodeMoe& operator=(const WarpDecodeMoe&) = delete;

  // Router: x (B, H) BF16 -> ids (B, K) int32, weights (B, K) FP32 (device).
  // Uses the object's workspace (as experts() does): calls on one object
  // must be ordered on one stream.
  void route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
             cudaStream_t stream) const;

  // The two expert kernels with a given routing (device pointers).
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
               const MoeOutput& out, cudaStream_t stream) const;
  // Which of the two kernels experts() launches: both, or one alone (the
  // benchmark's per-kernel breakdown; moe_down alone reads h as it is).
  enum class Kernels { kBoth, kGateUp, kDown };
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
               const MoeOutput& out, const WarpDecodeConfig& config, cudaStream_t stream,
               Kernels which = Kernels::kBoth) const;

  // Router + experts; the routing is kept in the workspace (routing_ids()/...).
  void forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
               cudaStream_t stream) const;

  const int32_t* routing_ids() const;    // (max_batch, K), valid after forward()
  const float* routing_weights() const;  // (max_batch, K)
  // h (max_batch, K, I): FP32 from the scalar kernels; from the tensor-core
  // kernels each (token, slot) row is I BF16 hi then I BF16 lo (h = hi + lo).
  float* intermediate() const;
  const MoeShape& shape() const { return shape_; }
  int max_batch() const { return max_batch_; }
  // The family this object runs for weights of a format (never kAuto).
  KernelFamily family(WeightFormat format) const;
  // The configuration experts() without a config uses at a batch size.
  WarpDecodeConfig default_config(int batch, WeightFormat format) const;
  // The default for these weights (whether they hold the tiled gate_up copy):
  // what experts() without a config runs.
  WarpDecodeConfig default_config(int batch, const MoeWeightsView& w) const;

 private:
  MoeShape shape_;
  int max_batch_;
  KernelFamily family_;
  TableCard card_;  // whose measured defaults it runs: table_card of the device current at construction
  struct Workspace;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace wd
