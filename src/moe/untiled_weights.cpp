// Tiled-only weights un-tiled into a canonical scratch: see
// warpdecode/untiled_weights.h.
#include "warpdecode/untiled_weights.h"

#include "core/device_buffer.h"
#include "kernels/formats_device.cuh"
#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
#include "warpdecode/gate_up_tiling.h"

namespace wd {

// Bytes: BF16 values as bytes (the tilings move bytes); MXFP8 codes and scales.
struct UntiledWeights::Buffers {
  DeviceBuffer<uint8_t> gate_up, gate_up_scales, down, down_scales;
};

void UntiledWeights::check(const MoeShape& shape, WeightFormat format) {
  shape.validate();
  WD_CHECK(format == WeightFormat::kBF16 || format == WeightFormat::kMXFP8, "UntiledWeights: format ",
           to_string(format), " has no tiled copies (BF16 and MXFP8 do)");
  WD_CHECK(down_tiling_fits(shape) && gate_up_tiling_fits(shape), "UntiledWeights: H = ", shape.hidden, ", I = ",
           shape.intermediate, " is a shape the tilings do not take (H % 64 == 0, I % 64 == 0)");
}

UntiledWeights::UntiledWeights(const MoeShape& shape, WeightFormat format)
    : shape_(shape), format_(format), buf_(std::make_unique<Buffers>()) {
  check(shape, format);
  const size_t elems = size_t(shape.experts) * shape.hidden * shape.intermediate;  // per projection
  const size_t elem_bytes = format == WeightFormat::kBF16 ? 2 : 1;
  buf_->gate_up = DeviceBuffer<uint8_t>(2 * elems * elem_bytes);
  buf_->down = DeviceBuffer<uint8_t>(elems * elem_bytes);
  if (format == WeightFormat::kMXFP8) {
    buf_->gate_up_scales = DeviceBuffer<uint8_t>(2 * elems / kMxBlock);
    buf_->down_scales = DeviceBuffer<uint8_t>(elems / kMxBlock);
  }
}

UntiledWeights::~UntiledWeights() = default;

size_t UntiledWeights::bytes() const {
  return buf_->gate_up.bytes() + buf_->gate_up_scales.bytes() + buf_->down.bytes() + buf_->down_scales.bytes();
}

MoeWeightsView UntiledWeights::untile(const MoeWeightsView& w, cudaStream_t stream) const {
  WD_CHECK(w.space == MemorySpace::kDevice, "UntiledWeights::untile: the weights must be on the device");
  WD_CHECK(w.format == format_, "UntiledWeights::untile: weights in ", to_string(w.format), ", the scratch holds ",
           to_string(format_));
  WD_CHECK(w.shape.hidden == shape_.hidden && w.shape.intermediate == shape_.intermediate &&
               w.shape.experts == shape_.experts,
           "UntiledWeights::untile: the weights' shape (H = ", w.shape.hidden, ", I = ", w.shape.intermediate,
           ", E = ", w.shape.experts, ") is not the scratch's (H = ", shape_.hidden, ", I = ", shape_.intermediate,
           ", E = ", shape_.experts, ")");
  const bool mx = format_ == WeightFormat::kMXFP8;
  WD_CHECK(w.gate_up_tiled && w.down_tiled && (!mx || (w.gate_up_tiled_scales && w.down_tiled_scales)),
           "UntiledWeights::untile: the weights lack a tiled copy (upload them with "
           "DeviceWeightsOptions::tiled_only())");
  MoeWeightsView v = w;
  if (mx) {
    kernels::untile_mxfp8_gate_up(shape_, w.gate_up_tiled, w.gate_up_tiled_scales, buf_->gate_up.data(),
                                  buf_->gate_up_scales.data(), stream);
    kernels::untile_mxfp8_down(shape_, w.down_tiled, w.down_tiled_scales, buf_->down.data(),
                               buf_->down_scales.data(), stream);
    v.gate_up_scales = buf_->gate_up_scales.data();
    v.down_scales = buf_->down_scales.data();
  } else {
    kernels::untile_bf16_gate_up(shape_, reinterpret_cast<const uint16_t*>(w.gate_up_tiled),
                                 reinterpret_cast<uint16_t*>(buf_->gate_up.data()), stream);
    kernels::untile_bf16_down(shape_, reinterpret_cast<const uint16_t*>(w.down_tiled),
                              reinterpret_cast<uint16_t*>(buf_->down.data()), stream);
  }
  v.gate_up = buf_->gate_up.data();
  v.down = buf_->down.data();
  return v;
}

}  // namespace wd
