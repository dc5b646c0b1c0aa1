#include "warpdecode/weights.h"

#include <cmath>

#include "core/parallel.h"
#include "core/synthetic_rng.h"
#include "warpdecode/error.h"

namespace wd {

float synthetic_normal(uint64_t seed, uint32_t tensor, uint64_t index) {
  return rng::normal(seed, tensor, index);
}

namespace {
void fill_bf16(std::vector<uint16_t>& v, size_t n, const SyntheticSpec& spec, SyntheticTensor t) {
  v.resize(n);
  constexpr size_t kChunk = 1 << 16;
  parallel_for((n + kChunk - 1) / kChunk, 0, [&](size_t c) {
    const size_t end = std::min(n, (c + 1) * kChunk);
    for (size_t i = c * kChunk; i < end; ++i)
      v[i] = float_to_bf16(rng::weight(spec.seed, uint32_t(t), i, spec.stddev,
                                       spec.outlier_fraction, spec.outlier_scale));
  });
}

template <typename SrcT, typename ToFloat>
void quantize_rows(const SrcT* src, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                   MxScaleRule rule, ToFloat to_float) {
  WD_CHECK(cols % kMxBlock == 0, "MXFP8 quantization: row length ", cols,
           " is not a multiple of 32");
  const size_t blocks = cols / kMxBlock;
  parallel_for(rows, 0, [&](size_t r) {
    float buf[kMxBlock];
    for (size_t b = 0; b < blocks; ++b) {
      const size_t off = r * cols + b * kMxBlock;
      for (int i = 0; i < kMxBlock; ++i) {
        buf[i] = to_float(src[off + i]);
        if (!std::isfinite(buf[i]))
          throw InvalidArgument(detail::concat("MXFP8 quantization: non-finite value at row ", r,
                                               ", column ", b * kMxBlock + i));
      }
      scales[r * blocks + b] = mx_quantize_block(buf, kMxBlock, q + off, rule);
    }
  });
}
}  // namespace

void quantize_mxfp8(const uint16_t* bf16, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule) {
  quantize_rows(bf16, rows, cols, q, scales, rule, [](uint16_t b) { return bf16_to_float(b); });
}

void quantize_mxfp8(const float* x, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule) {
  quantize_rows(x, rows, cols, q, scales, rule, [](float f) { return f; });
}

MoeWeights MoeWeights::synthetic(const MoeShape& shape, const SyntheticSpec& spec) {
  shape.validate();
  MoeWeights w;
  w.shape_ = shape;
  w.format_ = WeightFormat::kBF16;
  const size_t E = shape.experts, H = shape.hidden, I = shape.intermediate;
  fill_bf16(w.router, E * H, spec, SyntheticTensor::kRouter);
  fill_bf16(w.gate_up_bf16, E * 2 * I * H, spec, SyntheticTensor::kGateUp);
  fill_bf16(w.down_bf16, E * H * I, spec, SyntheticTensor::kDown);
  return w;
}

MoeWeights MoeWeights::to_mxfp8(MxScaleRule rule) const {
  WD_CHECK(format_ == WeightFormat::kBF16, "to_mxfp8: weights are already MXFP8");
  MoeWeights q;
  q.shape_ = shape_;
  q.format_ = WeightFormat::kMXFP8;
  q.router = router;
  const size_t E = shape_.experts, H = shape_.hidden, I = shape_.intermediate;
  q.gate_up_q.resize(E * 2 * I * H);
  q.gate_up_scales.resize(E * 2 * I * H / kMxBlock);
  q.down_q.resize(E * H * I);
  q.down_scales.resize(E * H * I / kMxBlock);
  quantize_mxfp8(gate_up_bf16.data(), E * 2 * I, H, q.gate_up_q.data(), q.gate_up_scales.data(),
                 rule);
  quantize_mxfp8(down_bf16.data(), E * H, I, q.down_q.data(), q.down_scales.data(), rule);
  return q;
}

MoeWeightsView MoeWeights::view() const {
  MoeWeightsView v;
  v.shape = shape_;
  v.format = format_;
  v.space = MemorySpace::kHost;
  v.router = router.data();
  if (format_ == WeightFormat::kBF16) {
    v.gate_up = gate_up_bf16.data();
    v.down = down_bf16.data();
  } else {
    v.gate_up = gate_up_q.data();
    v.gate_up_scales = gate_up_scales.data();
    v.down = down_q.data();
    v.down_scales = down_scales.data();
  }
  return v;
}

std::vector<uint16_t> synthetic_input(int batch, int hidden, uint64_t seed, InputKind kind) {
  WD_CHECK(batch >= 1, "batch = ", batch, " must be >= 1");
  std::vector<uint16_t> x(size_t(batch) * hidden);
  // Outlier channels: every 97th channel (about 1%) scaled by 20, the same
  // channels for every token, as the massive activations of real LLMs.
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < hidden; ++h) {
      float v = rng::normal(seed, uint32_t(SyntheticTensor::kInput), uint64_t(b) * hidden + h);
      if (kind == InputKind::kOutliers && h % 97 == 13) v *= 20.0f;
      x[size_t(b) * hidden + h] = float_to_bf16(v);
    }
  return x;
}

}  // namespace wd
