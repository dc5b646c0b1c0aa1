// Canonical expert weights rebuilt on the device from tiled-only weights, so
// that the classical path can run on them where it cannot read them as they
// are: without the sm_90a TMA GEMM, or MXFP8 in a shape W8A16 does not take
// (classical_reads_tiled_only, warpdecode/moe_dispatch.h).
//
// Why: tiled-only weights (DeviceWeightsOptions::tiled_only()) hold each
// projection once, in the layouts warp decode streams fastest, at the
// canonical memory. Warp decode on them is 5-28× slower than the classical
// path from B = 1024 (docs/CLASSICAL.md, "Dispatch"); un-tiling a layer
// costs one read and one write of its expert bytes, which a prefill batch
// pays back many times. The scratch holds one layer: an engine un-tiles each
// layer into it in stream order (MoeDispatch::untile_tiled_only).
//
// The un-tiling is exact (the tiling is a permutation of the canonical
// bytes, MXFP8 words packed by a bijection: warpdecode/packed_e4m3.h), so
// the classical path on un-tiled weights gives the bits it gives on the
// default upload of the same weights.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "warpdecode/layout.h"

namespace wd {

class UntiledWeights {
 public:
  // Device scratch for the canonical gate_up and down tensors of one layer
  // of this shape (and, MXFP8, their E8M0 scales). Formats: BF16 and MXFP8
  // (the formats with tiled copies). Throws wd::InvalidArgument for another
  // format or a shape the tilings do not take; allocation happens here only.
  UntiledWeights(const MoeShape& shape, WeightFormat format);
  // The constructor's checks alone (no allocation): throws as it would.
  static void check(const MoeShape& shape, WeightFormat format);
  ~UntiledWeights();
  UntiledWeights(const UntiledWeights&) = delete;
  UntiledWeights& operator=(const UntiledWeights&) = delete;

  // Rebuilds w's canonical tensors from its tiled copies in the scratch
  // (stream-ordered; no allocation, no host synchronisation: capturable in a
  // CUDA graph) and returns w with the canonical pointers set to them (its
  // router, tiled copies and flags unchanged). The scratch holds one layer:
  // a later call on the same stream overwrites it, so the returned view is
  // valid for work queued before that call. Throws wd::InvalidArgument
  // unless w is a device view of this shape and format with both tiled
  // copies (and scales).
  MoeWeightsView untile(const MoeWeightsView& w, cudaStream_t stream) const;

  const MoeShape& shape() const { return shape_; }
  WeightFormat format() const { return format_; }
  size_t bytes() const;  // device memory held: the layer's canonical expert bytes

 private:
  struct Buffers;
  MoeShape shape_;
  WeightFormat format_;
  std::unique_ptr<Buffers> buf_;
};

}  // namespace wd
