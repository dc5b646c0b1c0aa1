// Device-side number-format conversions over whole buffers. Used to check
// that the device build of warpdecode/formats.h agrees bit for bit with the
// host build, and to quantize weights on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "warpdecode/formats.h"
#include "warpdecode/layout.h"

namespace wd::kernels {

// out[i] = decode_e4m3(in[i]) for n codes.
void e4m3_decode(const uint8_t* in, float* out, size_t n, cudaStream_t stream);
// out[i] = encode_e4m3(in[i]).
void e4m3_encode(const float* in, uint8_t* out, size_t n, cudaStream_t stream);
// out[i] = float_to_bf16(in[i]).
void bf16_encode(const float* in, uint16_t* out, size_t n, cudaStream_t stream);
// MXFP8 quantization of BF16 rows (rows, cols), cols % 32 == 0:
// q (rows, cols) E4M3, scales (rows, cols/32) E8M0. One thread per block of 32.
void mxfp8_quantize(const uint16_t* in, size_t rows, size_t cols, uint8_t* q, uint8_t* scales,
                    MxScaleRule rule, cudaStream_t stream);
// MXFP8 down weights (E, H, I) + scales (E, H, I/32), device -> the tiled
// copies of warpdecode/down_tiling.h (the device twin of wd::tile_mxfp8_down).
void tile_mxfp8_down(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                     uint8_t* scales_tiled, cudaStream_t stream);
// MXFP8 gate_up weights (E, 2I, H) + scales (E, 2I, H/32), device -> the
// tiled copies of warpdecode/gate_up_tiling.h. Throws unless the shape fits.
void tile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                        uint8_t* scales_tiled, cudaStream_t stream);
// The tensor-core kernels' exact E4M3 × E8M0 -> BF16 decodes (mma.cuh),
// over whole buffers, for their tests: code i times the scale 2^(c - 127)
// of c = scales[i / 16] (sixteen codes share a scale, as in the kernels),
// out[i] the BF16 bits. kConvert*: the hardware E4M3 -> F16 convert and a
// bit move (e4m3x2_to_bf16x2_pow2: the W8A16 TMA tile at T = 8);
// kInteger*: e4m3x2_to_bf16x2_shift120 (the W8A16 TMA tile from T = 16);
// *Narrow: one BF16 multiply (codes up to 142, resp. 134), *Wide: two (any
// code). kSixteen*: e4m3x16_to_bf16x8 (the warp-decode tensor-core kernels
// and the classical stream tile; narrow up to 134, wide through FP32);
// kSixteen*Packed: the same on packed words (warpdecode/packed_e4m3.h: the
// tiled copies, which the tensor-core kernels read), `codes` packed.
// n % 16 == 0, codes 16-byte aligned.
enum class Mx8Bf16Decode {
  kConvertNarrow,
  kConvertWide,
  kIntegerNarrow,
  kIntegerWide,
  kSixteenNarrow,
  kSixteenWide,
  kSixteenNarrowPacked,
  kSixteenWidePacked
};
void mx8_bf16_decode(const uint8_t* codes, const uint8_t* scales, size_t n, Mx8Bf16Decode path, uint16_t* out,
                     cudaStream_t stream);
// The largest of n bytes on the device (0 for n = 0); synchronises `stream`.
uint8_t max_byte(const uint8_t* in, size_t n, cudaStream_t stream);
// BF16 down (E, H, I) / gate_up (E, 2I, H) weights, device -> their tiled
// copies (the device twins of wd::tile_bf16_down and wd::tile_bf16_gate_up).
void tile_bf16_down(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled, cudaStream_t stream);
void tile_bf16_gate_up(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled, cudaStream_t stream);
// The inverses: tiled copies -> the canonical tensors, the exact bytes (the
// device twins of wd::untile_*; UntiledWeights runs them). One thread per
// 16-byte canonical piece: contiguous writes.
void untile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                          uint8_t* scales, cudaStream_t stream);
void untile_mxfp8_down(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                       uint8_t* scales, cudaStream_t stream);
void untile_bf16_down(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w, cudaStream_t stream);
void untile_bf16_gate_up(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w, cudaStream_t stream);

}  // namespace wd::kernels
