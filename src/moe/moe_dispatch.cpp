// Warp decode / classical dispatch by batch size. See warpdecode/moe_dispatch.h
// (its rules: dispatch_rules.cpp).
#include "warpdecode/moe_dispatch.h"

#include <algorithm>

#include "kernels/classical_fits.h"
#include "warpdecode/error.h"

namespace wd {

MoeDispatch::MoeDispatch(const MoeShape& shape, int max_batch, CrossoverTable table, DispatchPolicy policy)
    : shape_(shape), table_(std::move(table)), policy_(policy), sm90a_(ClassicalMoe::wgmma_available()) {
  // Warp decode up to the largest batch its kernels take (kMaxBatch on the
  // Qwen3 shapes); the classical path past it.
  warp_ = std::make_unique<WarpDecodeMoe>(shape, std::min(max_batch, WarpDecodeMoe::largest_batch(shape)));
  classical_ = std::make_unique<ClassicalMoe>(shape, max_batch);
  for (WeightFormat f : kWeightFormats)
    reads_tiled_only_[static_cast<size_t>(f)] = classical_reads_tiled_only(shape_, f, sm90a_);
}

MoeDispatch::~MoeDispatch() = default;

CrossoverTable MoeDispatch::device_table() {
  return CrossoverTable::from_environment(kernels::device_table_card());
}

MoePath MoeDispatch::choose(WeightFormat f, int batch, WeightCopies copies) const {
  // Whether W8A16 runs here at all (kBf16Activations' classical side).
  const bool w8a16 = w8a16_runs(shape_, f, batch, sm90a_);
  // Tiled-only weights: the classical path takes them where it reads them
  // as they are (the TMA GEMM: BF16, MXFP8 in W8A16) or with an un-tiling
  // scratch, each from its own crossover.
  return choose_path(table_, shape_, f, batch, warp_->max_batch(), policy_, w8a16, copies,
                     tiled_only_classical(reads_tiled_only(f), untiles(f)));
}

void MoeDispatch::untile_tiled_only(WeightFormat f) {
  // The classical path reads these as they are (BF16, and MXFP8 in W8A16, on
  // sm_90a): a scratch would never be read.
  if (reads_tiled_only(f)) return;
  UntiledWeights::check(shape_, f);  // a refused format keeps the scratch held before
  untiled_.reset();  // one scratch at a time: free the old one before allocating
  untiled_ = std::make_unique<UntiledWeights>(shape_, f);
}

bool MoeDispatch::untiles(WeightFormat f) const { return untiled_ && untiled_->format() == f; }

size_t MoeDispatch::untiled_bytes() const { return untiled_ ? untiled_->bytes() : 0; }

MoeWeightsView MoeDispatch::classical_weights(const MoeWeightsView& w, cudaStream_t stream) const {
  // choose() sends tiled-only weights here only where the classical path
  // reads them as they are, or with a scratch of their format.
  const bool untile = weight_copies(w) == WeightCopies::kTiledOnly && !reads_tiled_only(w.format);
  if (!untile) return w;
  // choose() sends tiled-only MXFP8 and BF16 here only with their scratch; a
  // view without canonical tensors of another format (FP8 block-128 has no
  // tiled copies) is malformed: refused by name, not dereferenced.
  WD_CHECK(untiles(w.format), "MoE dispatch: ", to_string(w.format),
           " weights without canonical tensors (a tiled-only view) and no un-tiling scratch of that format");
  return untiled_->untile(w, stream);
}

namespace {
// The classical path's checks that hold for a tiled-only view as for its
// un-tiled one, run before the un-tiling launches (its kernels would write
// the scratch for a refused call); ClassicalMoe checks the rest, on the view
// it reads.
void check_before_untiling(const MoeShape& mine, const MoeWeightsView& w, const uint16_t* x,
                           const MoeOutput& out) {
  ClassicalMoe::check_io(x, out);
  w.validate();
  WD_CHECK(w.space == MemorySpace::kDevice, "MoE dispatch: weights must be in device memory");
  WD_CHECK(w.shape.same_dims(mine), "MoE dispatch: weights' shape differs from the shape this layer was built for");
}
}  // namespace

void MoeDispatch::forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
                          cudaStream_t stream) const {
  if (choose(w.format, batch, weight_copies(w)) == MoePath::kWarp) {
    warp_->forward(w, x, batch, out, stream);
    return;
  }
  const ClassicalConfig config =
      dispatch_classical_config(table_, shape_, w.format, batch, policy_, sm90a_, weight_copies(w));
  check_before_untiling(shape_, w, x, out);
  classical_->check_call(w.format, batch, config);
  classical_->forward(classical_weights(w, stream), x, batch, out, config, stream);
}

void MoeDispatch::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                          const MoeOutput& out, cudaStream_t stream) const {
  if (choose(w.format, routing.batch, weight_copies(w)) == MoePath::kWarp) {
    warp_->experts(w, x, routing, out, stream);
    return;
  }
  const ClassicalConfig config =
      dispatch_classical_config(table_, shape_, w.format, routing.batch, policy_, sm90a_, weight_copies(w));
  WD_CHECK(routing.ids && routing.weights, "MoE dispatch: a required pointer is null");
  WD_CHECK(routing.top_k == shape_.top_k, "MoE dispatch: routing has K = ", routing.top_k, ", layer has K = ",
           shape_.top_k);
  check_before_untiling(shape_, w, x, out);
  classical_->check_call(w.format, routing.batch, config);
  classical_->experts(classical_weights(w, stream), x, routing, out, config, stream);
}

}  // namespace wd
