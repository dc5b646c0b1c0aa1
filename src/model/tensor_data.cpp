// Decoding mapped tensors to FP32/FP64. See warpdecode/model/tensor_data.h.
#include "warpdecode/model/tensor_data.h"

#include <cstring>

#include "warpdecode/error.h"
#include "warpdecode/formats.h"

namespace wd::model {
namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian host assumed (x86-64, aarch64)
  return v;
}

template <typename OutT>
void decode_impl(const TensorInfo& t, uint64_t first, uint64_t count, OutT* out) {
  if (!dtype_decodable(t.dtype))
    throw FormatError(t.file + ": tensor '" + t.name + "' has dtype " + to_string(t.dtype) +
                      ", which cannot be read as weights (supported: BF16, F16, F32, F8_E4M3)");
  const uint64_t n = t.numel();
  WD_CHECK(first <= n && count <= n - first, "tensor '", t.name, "': elements [", first, ", ",
           first + count, ") are outside its ", n, " elements");
  WD_CHECK(t.data != nullptr, "tensor '", t.name, "' is not mapped");
  const uint8_t* p = t.data + first * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::kBF16:
      for (uint64_t i = 0; i < count; ++i) out[i] = OutT(bf16_to_float(load<uint16_t>(p + 2 * i)));
      break;
    case DType::kF16:
      for (uint64_t i = 0; i < count; ++i) out[i] = OutT(f16_to_float(load<uint16_t>(p + 2 * i)));
      break;
    case DType::kF32:
      for (uint64_t i = 0; i < count; ++i) out[i] = OutT(load<float>(p + 4 * i));
      break;
    case DType::kF8E4M3:
      for (uint64_t i = 0; i < count; ++i) out[i] = OutT(e4m3_to_float(p[i]));
      break;
    default:
      break;  // unreachable: dtype_decodable
  }
}

}  // namespace

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    const float mag = float(man) * (1.0f / 16777216.0f);  // man * 2^-24, exact
    return bits_float(float_bits(mag) | sign);
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));  // rebias 15 -> 127
}

void decode(const TensorInfo& t, uint64_t first, uint64_t count, float* out) {
  decode_impl(t, first, count, out);
}

void decode(const TensorInfo& t, uint64_t first, uint64_t count, double* out) {
  decode_impl(t, first, count, out);
}

bool aligned_u16(const TensorInfo& t) {
  return (t.dtype == DType::kBF16 || t.dtype == DType::kF16) && t.data != nullptr &&
         reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0;
}

}  // namespace wd::model
