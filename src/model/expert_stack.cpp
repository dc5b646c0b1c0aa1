// Expert stacks from checkpoints, and the streaming loader. See
// warpdecode/model/expert_stack.h for layouts and conversions.
#include "warpdecode/model/expert_stack.h"

#include <cstring>
#include <set>

#include "warpdecode/error.h"
#include "warpdecode/model/tensor_data.h"
#include "warpdecode/weights.h"

namespace wd::model {
namespace {

// The distinct tensors (weights and scales) behind one MoE layer.
std::set<const TensorInfo*> layer_tensors(const MoeLayerWeights& x) {
  std::set<const TensorInfo*> s{x.router.weight};
  if (x.router.scale_inv) s.insert(x.router.scale_inv);
  for (const auto* v : {&x.gate, &x.up, &x.down})
    for (const Matrix& m : *v) {
      s.insert(m.weight);
      if (m.scale_inv) s.insert(m.scale_inv);
    }
  return s;
}

uint64_t matrix_bytes(const Matrix& m) {
  uint64_t b = m.numel() * dtype_size(m.dtype());
  if (m.scale_inv) b += m.scale_inv->bytes();
  return b;
}

// A non-finite weight is refused where it is loaded, naming its tensor and
// place (as to_mxfp8's quantizer and the FP8 scale checks do), not found as
// NaN outputs or a routing error later. `bad(i)` says whether element i is.
template <typename Bad>
void require_finite(const Matrix& m, Bad bad) {
  const uint64_t n = m.numel();
  for (uint64_t i = 0; i < n; ++i)
    if (bad(i))
      throw FormatError(m.weight->file + ": tensor '" + m.weight->name + "' holds a non-finite value at row " +
                        std::to_string(i / uint64_t(m.cols)) + ", column " + std::to_string(i % uint64_t(m.cols)) +
                        (m.dtype() == DType::kBF16 || m.fp8_block() ? "" : " (as BF16)"));
}

// m's values as BF16 into out (rows * cols): a byte copy for BF16 data,
// rounding to nearest even otherwise (an F32 value past BF16's range rounds
// to Inf, and is refused with the rest).
void to_bf16(const Matrix& m, std::vector<float>& scratch, uint16_t* out) {
  if (m.dtype() == DType::kBF16 && !m.fp8_block()) {
    std::memcpy(out, m.weight->data + m.offset * 2, m.numel() * 2);
  } else {
    scratch.resize(m.numel());
    m.read_rows(0, m.rows, scratch.data());
    for (size_t i = 0; i < scratch.size(); ++i) out[i] = float_to_bf16(scratch[i]);
  }
  require_finite(m, [&](uint64_t i) { return (out[i] & 0x7F80u) == 0x7F80u; });
}

// m's values quantized to MXFP8 along rows (its reduction dimension).
void to_mxfp8(const Matrix& m, std::vector<float>& scratch, uint8_t* q, uint8_t* scales,
              MxScaleRule rule) {
  try {
    const uint8_t* p = m.weight->data + m.offset * 2;
    if (m.dtype() == DType::kBF16 && !m.fp8_block() && reinterpret_cast<uintptr_t>(p) % 2 == 0) {
      quantize_mxfp8(reinterpret_cast<const uint16_t*>(p), size_t(m.rows), size_t(m.cols), q, scales, rule);
      return;
    }
    scratch.resize(m.numel());
    m.read_rows(0, m.rows, scratch.data());
    quantize_mxfp8(scratch.data(), size_t(m.rows), size_t(m.cols), q, scales, rule);
  } catch (const InvalidArgument& e) {
    throw FormatError(m.weight->file + ": tensor '" + m.weight->name + "': " + e.what());
  }
}

// FP8-block bytes and scales as they are: e4m3 (rows, cols) and FP32 scales
// (ceil(rows/br), ceil(cols/bc)).
void require_fp8_block(const Matrix& m) {
  if (!m.fp8_block())
    throw FormatError(m.weight->file + ": tensor '" + m.weight->name + "' is " + to_string(m.dtype()) +
                      ", not FP8 with block scales: fp8-block needs an FP8 checkpoint");
}

void copy_fp8_block(const Matrix& m, int br, int bc, uint8_t* q, float* scales) {
  require_fp8_block(m);
  if (m.block_rows != br || m.block_cols != bc)
    throw FormatError(m.weight->file + ": tensor '" + m.weight->name + "' has other block sizes than its layer");
  std::memcpy(q, m.weight->data + m.offset, m.numel());
  require_finite(m, [&](uint64_t i) { return (q[i] & 0x7Fu) == 0x7Fu; });  // E4M3's NaN (it has no Inf)
  m.read_block_scales(scales);
}

}  // namespace

const char* to_string(StackFormat f) {
  switch (f) {
    case StackFormat::kBF16: return "bf16";
    case StackFormat::kMXFP8: return "mxfp8";
    case StackFormat::kFp8Block: return "fp8-block";
  }
  return "?";
}

StackFormat parse_stack_format(const std::string& s) {
  if (s == "bf16") return StackFormat::kBF16;
  if (s == "mxfp8") return StackFormat::kMXFP8;
  if (s == "fp8-block") return StackFormat::kFp8Block;
  throw InvalidArgument("unknown weight format '" + s + "' (allowed: bf16, mxfp8, fp8-block)");
}

MoeWeightsView ExpertStack::view() const {
  WD_CHECK(format != StackFormat::kFp8Block || (block_rows == kFp8BlockSize && block_cols == kFp8BlockSize),
           "fp8-block experts with ", block_rows, "x", block_cols, " blocks have no MoE view (layout.h's "
           "fp8-block128 needs 128x128): load them as bf16 or mxfp8");
  const WeightFormat f = format == StackFormat::kBF16    ? WeightFormat::kBF16
                        : format == StackFormat::kMXFP8 ? WeightFormat::kMXFP8
                                                        : WeightFormat::kFP8Block128;  // same bytes and scale layout
  return host_moe_view(*this, shape, f);
}

size_t ExpertStack::bytes() const {
  return 2 * (router.size() + gate_up_bf16.size() + down_bf16.size()) + gate_up_q.size() +
         down_q.size() + gate_up_scales.size() + down_scales.size() +
         4 * (gate_up_block_scales.size() + down_block_scales.size());
}

uint64_t moe_layer_checkpoint_bytes(const ModelWeights& w, int layer) {
  WD_CHECK(layer >= 0 && layer < int(w.layers.size()) && w.layers[size_t(layer)].moe, "layer ", layer,
           " is not an MoE layer");
  uint64_t b = 0;
  for (const TensorInfo* t : layer_tensors(w.layers[size_t(layer)].experts)) b += t->bytes();
  return b;
}

ExpertStack load_expert_stack(const ModelWeights& w, int layer, StackFormat format, MxScaleRule rule,
                              Progress* progress) {
  WD_CHECK(layer >= 0 && layer < int(w.layers.size()), "layer ", layer, " is outside [0, ",
           w.layers.size(), ")");
  const LayerWeights& L = w.layers[size_t(layer)];
  WD_CHECK(L.moe, "layer ", layer, " is a dense layer, not an MoE layer");
  const MoeLayerWeights& x = L.experts;
  ExpertStack s;
  s.layer = layer;
  s.shape = w.config.moe_shape();
  s.format = format;
  const size_t E = size_t(s.shape.experts), H = size_t(s.shape.hidden), I = size_t(s.shape.intermediate);
  std::vector<float> scratch;

  s.router.resize(E * H);
  to_bf16(x.router, scratch, s.router.data());
  if (progress) progress->advance(matrix_bytes(x.router));

  auto advance = [&](size_t e) {
    if (progress) progress->advance(matrix_bytes(x.gate[e]) + matrix_bytes(x.up[e]) + matrix_bytes(x.down[e]));
  };
  switch (format) {
    case StackFormat::kBF16:
      s.gate_up_bf16.resize(E * 2 * I * H);
      s.down_bf16.resize(E * H * I);
      for (size_t e = 0; e < E; ++e) {
        to_bf16(x.gate[e], scratch, &s.gate_up_bf16[e * 2 * I * H]);
        to_bf16(x.up[e], scratch, &s.gate_up_bf16[e * 2 * I * H + I * H]);
        to_bf16(x.down[e], scratch, &s.down_bf16[e * H * I]);
        advance(e);
      }
      break;
    case StackFormat::kMXFP8: {
      s.gate_up_q.resize(E * 2 * I * H);
      s.gate_up_scales.resize(E * 2 * I * H / kMxBlock);
      s.down_q.resize(E * H * I);
      s.down_scales.resize(E * H * I / kMxBlock);
      for (size_t e = 0; e < E; ++e) {
        const size_t gu = e * 2 * I * H, up = gu + I * H, dn = e * H * I;
        to_mxfp8(x.gate[e], scratch, &s.gate_up_q[gu], &s.gate_up_scales[gu / kMxBlock], rule);
        to_mxfp8(x.up[e], scratch, &s.gate_up_q[up], &s.gate_up_scales[up / kMxBlock], rule);
        to_mxfp8(x.down[e], scratch, &s.down_q[dn], &s.down_scales[dn / kMxBlock], rule);
        advance(e);
      }
      break;
    }
    case StackFormat::kFp8Block: {
      require_fp8_block(x.gate[0]);
      const int br = x.gate[0].block_rows, bc = x.gate[0].block_cols;
      s.block_rows = br;
      s.block_cols = bc;
      const size_t gate_sr = (I + br - 1) / br, hc = (H + bc - 1) / bc;
      const size_t down_sr = (H + br - 1) / br, ic = (I + bc - 1) / bc;
      s.gate_up_q.resize(E * 2 * I * H);
      s.down_q.resize(E * H * I);
      s.gate_up_block_scales.resize(E * 2 * gate_sr * hc);
      s.down_block_scales.resize(E * down_sr * ic);
      for (size_t e = 0; e < E; ++e) {
        copy_fp8_block(x.gate[e], br, bc, &s.gate_up_q[e * 2 * I * H], &s.gate_up_block_scales[e * 2 * gate_sr * hc]);
        copy_fp8_block(x.up[e], br, bc, &s.gate_up_q[e * 2 * I * H + I * H],
                       &s.gate_up_block_scales[(e * 2 + 1) * gate_sr * hc]);
        copy_fp8_block(x.down[e], br, bc, &s.down_q[e * H * I], &s.down_block_scales[e * down_sr * ic]);
        advance(e);
      }
      break;
    }
  }
  return s;
}

void stream_expert_stacks(const ModelWeights& w, const Checkpoint& ckpt, StackFormat format,
                          const std::function<void(ExpertStack&&)>& consume, FILE* progress_out,
                          MxScaleRule rule) {
  uint64_t total = 0;
  for (size_t l = 0; l < w.layers.size(); ++l)
    if (w.layers[l].moe) total += moe_layer_checkpoint_bytes(w, int(l));
  Progress progress(std::string("experts -> ") + to_string(format), total, progress_out,
                    progress_out ? Progress::Mode::kAuto : Progress::Mode::kQuiet);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    if (!w.layers[l].moe) continue;
    ExpertStack s = load_expert_stack(w, int(l), format, rule, &progress);
    for (const TensorInfo* t : layer_tensors(w.layers[l].experts)) ckpt.release(*t);
    consume(std::move(s));
  }
  progress.finish();
}

}  // namespace wd::model
