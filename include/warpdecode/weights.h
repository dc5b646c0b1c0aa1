// Host-owned MoE layer weights, and synthetic weights at real shapes.
//
// Synthetic values are a pure function of (seed, tensor, index): the CPU and
// the GPU generators (src/kernels/synthetic.cu) produce bit-identical
// tensors, so a benchmark can generate gigabytes on the device while a test
// regenerates the same values on the host.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "warpdecode/formats.h"
#include "warpdecode/layout.h"

namespace wd {

struct SyntheticSpec {
  uint64_t seed = 1;
  float stddev = 0.02f;          // weights ~ N(0, stddev)
  float outlier_fraction = 0.0f; // this fraction of weights is multiplied by outlier_scale
  float outlier_scale = 8.0f;
};

// Tensor ids of the synthetic generator: one stream of values per tensor.
enum class SyntheticTensor : uint32_t { kRouter = 1, kGateUp = 2, kDown = 3, kInput = 4 };

class MoeWeights {
 public:
  // BF16 weights drawn from spec; the router is always BF16.
  static MoeWeights synthetic(const MoeShape& shape, const SyntheticSpec& spec);

  // MXFP8 copy of BF16 weights (router stays BF16). Throws on non-finite values.
  MoeWeights to_mxfp8(MxScaleRule rule = MxScaleRule::kNoSaturate) const;

  // FP8 block-128 copy of BF16 weights (router stays BF16): gate, up and down
  // each quantized by quantize_fp8_block128. Throws on non-finite values.
  MoeWeights to_fp8_block128() const;

  // A layer held elsewhere as MoeWeights (the type the self-check and the
  // accuracy harness take): the tensors of a holder with MoeWeights' member
  // names (router, gate_up_bf16, ..., down_block_scales; e.g. a
  // checkpoint's model::ExpertStack) moved in, not copied. Throws
  // InvalidArgument unless every tensor `format` needs is there with its
  // layout's size (layout.h).
  template <typename Holder>
  static MoeWeights adopt(Holder&& h, const MoeShape& shape, WeightFormat format);

  // Throws InvalidArgument unless the shape is valid and every tensor the
  // format needs has its layout's size (layout.h): the vectors are public,
  // and a view has pointers only. adopt() and DeviceMoeWeights::upload run it.
  void validate() const;

  MoeWeightsView view() const;
  const MoeShape& shape() const { return shape_; }
  WeightFormat format() const { return format_; }

  std::vector<uint16_t> router;         // (E, H)
  std::vector<uint16_t> gate_up_bf16;   // (E, 2I, H), BF16 format only
  std::vector<uint16_t> down_bf16;      // (E, H, I)
  std::vector<uint8_t> gate_up_q;       // (E, 2I, H), MXFP8 and FP8 block-128
  std::vector<uint8_t> gate_up_scales;  // (E, 2I, H/32), MXFP8 only
  std::vector<uint8_t> down_q;          // (E, H, I)
  std::vector<uint8_t> down_scales;     // (E, H, I/32), MXFP8 only
  std::vector<float> gate_up_block_scales;  // (E, 2·ceil(I/128), ceil(H/128)), FP8 block-128 only
  std::vector<float> down_block_scales;     // (E, ceil(H/128), ceil(I/128))

 private:
  MoeShape shape_;
  WeightFormat format_ = WeightFormat::kBF16;
};

template <typename Holder>
MoeWeights MoeWeights::adopt(Holder&& h, const MoeShape& shape, WeightFormat format) {
  static_assert(!std::is_lvalue_reference<Holder>::value, "MoeWeights::adopt moves the tensors: pass an rvalue");
  MoeWeights w;
  w.shape_ = shape;
  w.format_ = format;
  w.router = std::move(h.router);
  w.gate_up_bf16 = std::move(h.gate_up_bf16);
  w.down_bf16 = std::move(h.down_bf16);
  w.gate_up_q = std::move(h.gate_up_q);
  w.gate_up_scales = std::move(h.gate_up_scales);
  w.down_q = std::move(h.down_q);
  w.down_scales = std::move(h.down_scales);
  w.gate_up_block_scales = std::move(h.gate_up_block_scales);
  w.down_block_scales = std::move(h.down_block_scales);
  w.validate();
  return w;
}

// The host view of anything that holds a layer's tensors as vectors under
// MoeWeights' member names (router, gate_up_bf16, down_bf16, gate_up_q,
// down_q, gate_up_scales, down_scales, gate_up_block_scales,
// down_block_scales): MoeWeights, the checkpoint's model::ExpertStack and the
// accuracy harness's compact layers. The one place those names map to a view.
template <typename Holder>
MoeWeightsView host_moe_view(const Holder& h, const MoeShape& shape, WeightFormat format) {
  MoeWeightsView v;
  v.shape = shape;
  v.format = format;
  v.space = MemorySpace::kHost;
  v.router = h.router.data();
  if (format == WeightFormat::kBF16) {
    v.gate_up = h.gate_up_bf16.data();
    v.down = h.down_bf16.data();
    return v;
  }
  v.gate_up = h.gate_up_q.data();
  v.down = h.down_q.data();
  if (format == WeightFormat::kMXFP8) {
    v.gate_up_scales = h.gate_up_scales.data();
    v.down_scales = h.down_scales.data();
  } else {
    v.gate_up_block_scales = h.gate_up_block_scales.data();
    v.down_block_scales = h.down_block_scales.data();
  }
  return v;
}

// Quantize rows x cols (cols % 32 == 0) to MXFP8: q (rows, cols), scales (rows, cols/32).
void quantize_mxfp8(const uint16_t* bf16, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule);
void quantize_mxfp8(const float* x, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule);

// FP8 block-128 quantization of a rows x cols matrix (any sizes; edge blocks
// are partial): scales (ceil(rows/128), ceil(cols/128)) FP32, one per block,
// s = max(amax, 1e-10) / 448; q (rows, cols) E4M3 = e4m3(w / s), so that
// w ≈ e4m3_to_float(q) · s. Host and device (src/kernels/classical_quant.cu)
// round identically. Throws on non-finite values.
void quantize_fp8_block128(const uint16_t* bf16, size_t rows, size_t cols, uint8_t* q, float* scales);

// The scale of element (row, col) of expert e's gate_up (rows 2I) or down
// (rows H) in the FP8 block-128 layout of layout.h: gate_up rows [I, 2I) use
// the up projection's own block rows.
size_t fp8_block128_scale_index(const MoeShape& s, bool gate_up, size_t expert, size_t row, size_t col);

// Deterministic standard-normal sample for (seed, tensor, index).
float synthetic_normal(uint64_t seed, uint32_t tensor, uint64_t index);

// B token activations (B, H) BF16 ~ N(0, 1); with outliers, a few channels
// (the same ones for every token, as in real LLM activations) are scaled up.
enum class InputKind { kGaussian, kOutliers };
std::vector<uint16_t> synthetic_input(int batch, int hidden, uint64_t seed, InputKind kind);

}  // namespace wd
