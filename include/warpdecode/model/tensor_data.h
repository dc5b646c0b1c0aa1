// Reading the numbers of a mapped tensor.
//
// Decodable dtypes: BF16, F16 and F8_E4M3 (OCP "fn", formats.h) convert to
// FP32 exactly; F32 is copied. Tensor bytes are read with memcpy, so a data
// section that is not aligned to the element size (a header length that is
// not a multiple of 8) is read correctly too.
#pragma once

#include <cstdint>

#include "warpdecode/model/safetensors.h"

namespace wd::model {

// IEEE binary16 -> FP32, exact (subnormals, Inf and NaN kept).
float f16_to_float(uint16_t h);

// Elements [first, first + count) of t in row-major order. Throws
// wd::FormatError if t's dtype cannot be decoded, InvalidArgument if the
// range is outside the tensor.
void decode(const TensorInfo& t, uint64_t first, uint64_t count, float* out);
void decode(const TensorInfo& t, uint64_t first, uint64_t count, double* out);

// True if the tensor's bytes can be read in place as uint16_t (BF16/F16 data
// aligned to 2 bytes): the BF16 fast paths then skip a copy.
bool aligned_u16(const TensorInfo& t);

}  // namespace wd::model
