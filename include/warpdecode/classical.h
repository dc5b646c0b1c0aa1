// The classical, expert-centric MoE path on the GPU: the 8 stages that
// production engines (vLLM fused_moe, SGLang) run, as separate kernels:
//
//   1 router GEMM        logits (B, E) = x · router^T          (tensor cores)
//   2 top-k              softmax, top-K, renormalisation
//   3 align              per-expert counts, each expert's rows padded to the
//                        GEMM tile height T, sorted rows, expert of each block
//   4 permute            x rows gathered into the expert-sorted padded buffer
//                        (W8A8: quantized to FP8 per token and group of 128)
//   5 gate_up GEMM       grouped GEMM over the expert blocks (tensor cores)
//   6 silu·up            (W8A8: FP8 per token and group of 128 again)
//   7 down GEMM          grouped GEMM (tensor cores)
//   8 combine            un-permute, Σ_k w_k · partial_k per token
//
// Formats: BF16 weights with BF16 activations; W8A8 with FP8 block-128
// weights (the official Qwen3 FP8 checkpoints) or MXFP8 weights, FP32
// accumulation, scales applied per K block (see docs/CLASSICAL.md). And,
// not what the engines run, W8A16 (ClassicalConfig::bf16_activations):
// MXFP8 weights with BF16 activations, as warp decode reads them.
//
// Engine-ready like WarpDecodeMoe: stream-ordered, no allocation and no host
// synchronisation inside a call (the workspace is sized for max_batch in the
// constructor), capturable in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warpdecode/classical_config.h"
#include "warpdecode/layout.h"
#include "warpdecode/warp_decode.h"
#include "warpdecode/weights.h"

namespace wd {

// Device copy of one layer's weights in FP8 block-128 (router BF16), for the
// classical path (warp decode streams BF16 or MXFP8).
class DeviceFp8BlockWeights {
 public:
  // Uploads host weights already in FP8 block-128 (MoeWeights::to_fp8_block128).
  static DeviceFp8BlockWeights upload(const MoeWeights& host);
  // Quantizes BF16 device weights on the device (bit-identical to the host
  // conversion).
  static DeviceFp8BlockWeights quantize(const MoeWeightsView& bf16_device, cudaStream_t stream);
  DeviceFp8BlockWeights(DeviceFp8BlockWeights&&) noexcept;
  DeviceFp8BlockWeights& operator=(DeviceFp8BlockWeights&&) noexcept;
  ~DeviceFp8BlockWeights();

  MoeWeightsView view() const;
  size_t bytes() const;

 private:
  DeviceFp8BlockWeights();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class ClassicalStage { kRouterGemm, kTopK, kAlign, kPermute, kGateUp, kSiluMul, kDown, kCombine };
const char* to_string(ClassicalStage s);  // "router_gemm", "topk", "align", ...
constexpr int kClassicalStages = 8;

// Device pointers into the workspace, as the last call left it (tests and
// per-stage inspection). Rows are the expert-sorted padded rows.
struct ClassicalWorkspaceView {
  const float* logits;           // (max_batch, E) stage 1
  const int32_t* ids;            // (max_batch, K) stage 2 (forward only)
  const float* weights;          // (max_batch, K)
  const int32_t* counts;         // (E) stage 3
  const int32_t* offsets;        // (E+1)
  const int32_t* sorted_entries; // (max_rows) entry b·K+k of each row, -1 = padding
  const int32_t* block_expert;   // (max_rows / 8)
  const int32_t* entry_row;      // (max_batch·K)
  const int32_t* meta;           // [0] blocks in use, [1] rows in use
  const void* a;                 // (max_rows, H) stage 4: E4M3 in W8A8, else BF16 (unwritten when gathers_rows;
                                 // W8A16: K in a16_k_position order)
  const float* a_scales;         // (max_rows, H/128)
  const uint16_t* gate_up;       // (max_rows, 2I) stage 5, BF16
  const void* h;                 // (max_rows, I) stage 6: BF16 (BF16; W8A16 in a16_k_position order), or E4M3 in W8A8
  const float* h_scales;         // (max_rows, I/128)
  const uint16_t* partials;      // (max_rows, H) stage 7, BF16 (unweighted)
  int max_rows;
};

class ClassicalMoe {
 public:
  // Sizes the workspace for up to max_batch tokens (any T). Throws on invalid
  // shapes.
  ClassicalMoe(const MoeShape& shape, int max_batch);
  ~ClassicalMoe();
  ClassicalMoe(const ClassicalMoe&) = delete;
  ClassicalMoe& operator=(const ClassicalMoe&) = delete;

  // Stages 1-2: x (B, H) BF16 -> ids (B, K) int32, weights (B, K) FP32 (device).
  void route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
             cudaStream_t stream) const;

  // Weights: the canonical tensors, or tiled-only BF16 weights
  // (DeviceWeightsOptions::tiled_only()) where the configuration reads them
  // (ClassicalConfig::reads_tiled; the calls without a configuration take
  // ClassicalConfig::for_tiled_copies for them).
  //
  // Stages 3-8 with a given routing (device pointers).
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, const MoeOutput& out,
               cudaStream_t stream) const;
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, const MoeOutput& out,
               const ClassicalConfig& config, cudaStream_t stream) const;

  // Stages 1-8; the routing is kept in the workspace.
  void forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
               cudaStream_t stream) const;
  void forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
               const ClassicalConfig& config, cudaStream_t stream) const;

  // One stage on its own, on whatever its inputs hold. kRouterGemm and kTopK
  // read x and write the workspace's logits / ids / weights (routing.batch
  // tokens); the others are the stages of experts().
  void run_stage(ClassicalStage stage, const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                 const MoeOutput& out, const ClassicalConfig& config, cudaStream_t stream) const;

  // Throws wd::InvalidArgument where a call with weights of this format at
  // this batch and configuration would be refused (batch past max_batch, a
  // configuration the GEMMs or this device do not take): every stage checks
  // it, and experts() and forward() before their first launch; MoeDispatch
  // before it un-tiles weights for the call.
  void check_call(WeightFormat format, int batch, const ClassicalConfig& config) const;

  // Throws wd::InvalidArgument unless x, out.y and out.residual (if any)
  // are non-null device pointers the stages can take: 16-byte aligned, as
  // permute reads x and combine writes y and reads the residual 16 bytes at
  // a time. experts() and forward() check it before their first launch,
  // MoeDispatch before it un-tiles weights for the call.
  static void check_io(const uint16_t* x, const MoeOutput& out);

  ClassicalWorkspaceView workspace() const;
  const int32_t* routing_ids() const;
  const float* routing_weights() const;
  const MoeShape& shape() const { return shape_; }
  int max_batch() const { return max_batch_; }

  // Whether this device runs the wgmma GEMM (sm_90 with an sm_90a build).
  static bool wgmma_available();

 private:
  MoeShape shape_;
  int max_batch_;
  bool sm90a_;  // wgmma_available() when built: the device this object's workspace lives on
  struct Workspace;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace wd
