#include "warpdecode/weights.h"

#include <algorithm>
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

void quantize_fp8_block128(const uint16_t* bf16, size_t rows, size_t cols, uint8_t* q, float* scales) {
  const size_t B = kFp8BlockSize, rb = (rows + B - 1) / B, cb = (cols + B - 1) / B;
  parallel_for(rb * cb, 0, [&](size_t blk) {
    const size_t r0 = (blk / cb) * B, c0 = (blk % cb) * B;
    const size_t r1 = std::min(rows, r0 + B), c1 = std::min(cols, c0 + B);
    float amax = 0.0f;
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) {
        const float v = bf16_to_float(bf16[r * cols + c]);
        if (!std::isfinite(v))
          throw InvalidArgument(detail::concat("FP8 block-128 quantization: non-finite value at row ", r,
                                               ", column ", c));
        amax = std::max(amax, std::fabs(v));
      }
    const float scale = e4m3_scale(amax);
    scales[blk] = scale;
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) q[r * cols + c] = float_to_e4m3(bf16_to_float(bf16[r * cols + c]) / scale);
  });
}

size_t fp8_block128_scale_index(const MoeShape& s, bool gate_up, size_t expert, size_t row, size_t col) {
  const size_t B = kFp8BlockSize, H = size_t(s.hidden), I = size_t(s.intermediate);
  const size_t hb = (H + B - 1) / B, ib = (I + B - 1) / B;
  if (gate_up) {
    const size_t brow = row < I ? row / B : ib + (row - I) / B;
    return (expert * 2 * ib + brow) * hb + col / B;
  }
  return (expert * hb + row / B) * ib + col / B;
}

MoeWeights MoeWeights::to_fp8_block128() const {
  WD_CHECK(format_ == WeightFormat::kBF16, "to_fp8_block128: weights must be BF16, they are ",
           to_string(format_));
  MoeWeights q;
  q.shape_ = shape_;
  q.format_ = WeightFormat::kFP8Block128;
  q.router = router;
  const size_t E = shape_.experts, H = shape_.hidden, I = shape_.intermediate, B = kFp8BlockSize;
  const size_t hb = (H + B - 1) / B, ib = (I + B - 1) / B;
  q.gate_up_q.resize(E * 2 * I * H);
  q.down_q.resize(E * H * I);
  q.gate_up_block_scales.resize(E * 2 * ib * hb);
  q.down_block_scales.resize(E * hb * ib);
  for (size_t e = 0; e < E; ++e) {
    for (size_t proj = 0; proj < 2; ++proj)  // gate, then up: blocked separately
      quantize_fp8_block128(&gate_up_bf16[(e * 2 + proj) * I * H], I, H, &q.gate_up_q[(e * 2 + proj) * I * H],
                            &q.gate_up_block_scales[(e * 2 + proj) * ib * hb]);
    quantize_fp8_block128(&down_bf16[e * H * I], H, I, &q.down_q[e * H * I], &q.down_block_scales[e * hb * ib]);
  }
  return q;
}

void MoeWeights::validate() const {
  shape_.validate();
  const size_t E = shape_.experts, H = shape_.hidden, I = shape_.intermediate;
  const size_t B = kFp8BlockSize, hb = (H + B - 1) / B, ib = (I + B - 1) / B;
  auto need = [&](size_t got, size_t want, const char* what) {
    WD_CHECK(got == want, "MoeWeights: ", to_string(format_), " ", what, " holds ", got,
             " elements, its layout ", want);
  };
  need(router.size(), E * H, "router");
  switch (format_) {
    case WeightFormat::kBF16:
      need(gate_up_bf16.size(), E * 2 * I * H, "gate_up");
      need(down_bf16.size(), E * H * I, "down");
      break;
    case WeightFormat::kMXFP8:
      need(gate_up_q.size(), E * 2 * I * H, "gate_up");
      need(down_q.size(), E * H * I, "down");
      need(gate_up_scales.size(), E * 2 * I * H / kMxBlock, "gate_up scales");
      need(down_scales.size(), E * H * I / kMxBlock, "down scales");
      break;
    case WeightFormat::kFP8Block128:
      need(gate_up_q.size(), E * 2 * I * H, "gate_up");
      need(down_q.size(), E * H * I, "down");
      need(gate_up_block_scales.size(), E * 2 * ib * hb, "gate_up block scales");
      need(down_block_scales.size(), E * hb * ib, "down block scales");
      break;
  }
}

MoeWeightsView MoeWeights::view() const { return host_moe_view(*this, shape_, format_); }

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
