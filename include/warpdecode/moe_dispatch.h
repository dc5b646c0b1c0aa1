// One MoE entry point that picks, per call, warp decode (small batches) or
// the classical expert-centric path (large batches, prefill) from the number
// of tokens. The switch point is a crossover measured on the card by
// `warpdecode bench-moe --tune` and stored per shape and weight format in a
// JSON file; the built-in table holds the H200 measurement
// (bench/results/h200-crossover.json, docs/CLASSICAL.md).
//
// Formats warp decode does not stream (FP8 block-128) always go classical.
// The crossover is a speed measurement: above it MXFP8 weights run the
// classical W8A8 path, which quantizes the activations to FP8
// (docs/ACCURACY.md: 18-26× warp decode's error on one qwen3-30b-a3b layer).
// DispatchPolicy::kBf16Activations keeps BF16 activations instead: warp
// decode, or, above a crossover measured for it, the classical path in W8A16
// (ClassicalConfig::bf16_activations: MXFP8 weights decoded to BF16, the
// TMA tile on sm_90a).
// Weights that hold tiled copies beside the canonical tensors
// (DeviceWeightsOptions::tiled_beside_canonical()) make warp decode faster;
// the table holds a crossover measured on such an upload too, and the
// dispatch uses it for them (CrossoverEntry::tiled_warp).
// Weights uploaded tiled-only (DeviceWeightsOptions::tiled_only()): the
// classical path reads them as they are on sm_90a (BF16; MXFP8 in W8A16,
// the configuration the dispatch then gives it; its TMA GEMM loads
// each weight box from the tiled copy; classical_reads_tiled_only), and the
// dispatch sends them to it from a crossover measured on such an upload
// (CrossoverEntry::untiled). Others (MXFP8, or without the sm_90a kernels)
// can be read by warp decode alone: the dispatch runs warp decode on them at every
// batch it takes, past the crossover too (slower there than the classical
// path on a canonical upload, never wrong: warp decode is correct up to
// WarpDecodeMoe::largest_batch, kMaxBatch on the Qwen3 shapes), and refuses a batch past warp decode's maximum
// with an error that names the upload — unless it holds an un-tiling
// scratch (untile_tiled_only): then from a crossover measured for that
// (CrossoverEntry::untiled) it un-tiles the layer into the scratch and runs
// the classical path on it, at any batch.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "warpdecode/classical.h"
#include "warpdecode/dispatch_rules.h"
#include "warpdecode/layout.h"
#include "warpdecode/untiled_weights.h"
#include "warpdecode/warp_decode.h"

namespace wd {

class MoeDispatch {
 public:
  MoeDispatch(const MoeShape& shape, int max_batch, CrossoverTable table = device_table(),
              DispatchPolicy policy = DispatchPolicy::kFastest);
  // The default table: $WD_MOE_CROSSOVER when set, else the built-in table
  // of the current device's card (table_card of its name: the H100's on an
  // H100, the H200's elsewhere).
  static CrossoverTable device_table();
  ~MoeDispatch();

  // copies: weight_copies of the weights forward() and experts() are given.
  MoePath choose(WeightFormat f, int batch, WeightCopies copies = WeightCopies::kCanonical) const;
  DispatchPolicy policy() const { return policy_; }

  // Set-up (not inside a forward call: it allocates): hold one layer's
  // canonical scratch of format f (UntiledWeights, untiled_bytes()), so that
  // tiled-only weights of that format take the classical path from the
  // table's untiled crossover on and past warp decode's maximum batch, each
  // such call un-tiling its layer into the scratch first. Calls for other
  // formats and uploads are unaffected. One format at a time (a second call
  // replaces the scratch). Throws wd::InvalidArgument for a format or shape
  // without tiled copies. Where classical_reads_tiled_only (BF16, and MXFP8
  // in W8A16, on sm_90a) it allocates nothing: no scratch is needed.
  void untile_tiled_only(WeightFormat f);
  bool untiles(WeightFormat f) const;  // whether untile_tiled_only(f) holds a scratch
  size_t untiled_bytes() const;        // its device memory (0 without)

  // Router + experts / experts alone, on the chosen path (same contracts as
  // WarpDecodeMoe and ClassicalMoe: stream-ordered, graph-capturable; a call
  // either path refuses launches nothing). Batch invariance holds within a
  // path: a token's bits do not depend on the rest of the batch while the
  // batch stays on one side of the crossover, but the two paths round
  // differently (and the classical W8A8 path quantizes activations), so a
  // batch that crosses it changes them. An engine that needs one token's
  // output to be the same at every batch pins the path (WarpDecodeMoe up to
  // its largest batch).
  void forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
               cudaStream_t stream) const;
  void experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, const MoeOutput& out,
               cudaStream_t stream) const;

  const CrossoverTable& table() const { return table_; }
  const WarpDecodeMoe& warp() const { return *warp_; }
  const ClassicalMoe& classical() const { return *classical_; }

 private:
  MoeShape shape_;
  CrossoverTable table_;
  DispatchPolicy policy_;
  std::unique_ptr<WarpDecodeMoe> warp_;
  std::unique_ptr<ClassicalMoe> classical_;
  std::unique_ptr<UntiledWeights> untiled_;
  // Fixed for the object's life, so computed once here rather than up to
  // three times a call: whether this device runs the sm_90a classical
  // kernels, and per WeightFormat whether the classical path reads its
  // tiled-only weights as they are (classical_reads_tiled_only).
  bool sm90a_;
  std::array<bool, std::size(kWeightFormats)> reads_tiled_only_;
  bool reads_tiled_only(WeightFormat f) const { return reads_tiled_only_[static_cast<size_t>(f)]; }
  // The weights the classical path reads for w: w, or tiled-only w un-tiled.
  MoeWeightsView classical_weights(const MoeWeightsView& w, cudaStream_t stream) const;
};

}  // namespace wd
