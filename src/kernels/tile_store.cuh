// The 16-byte store epilogue of the classical stream GEMMs
// (classical_stream_gemm.cu, classical_stream_wgmma.cu).
#pragma once

#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/mma.cuh"

namespace wd::kernels {

// Stores an FP32 tile (tokens × kCols, row-major in shared memory) to rows
// [row0, row0 + tokens) — those below `rows` — and columns [n0, n0 + kCols)
// of a row-major (rows, n) matrix of BF16 (round to nearest even) or FP32:
// one 16-byte store per (token, 16-byte column segment), the segments dealt to
// threads first, first + step, ... Needs n0 and n to be multiples of 8 and
// out 16-byte aligned.
template <int kCols>
__device__ __forceinline__ void store_tile_16b(const float* tile, int tokens, int row0, int rows, int n0, int n,
                                               void* out, bool out_fp32, int first, int step) {
  const int out_bytes = out_fp32 ? 4 : 2, segs = kCols * out_bytes / 16;
  for (int i = first; i < tokens * segs; i += step) {
    const int tok = i / segs, sg = i % segs, row = row0 + tok;
    if (row >= rows) continue;
    const int e0 = sg * 16 / out_bytes;
    const float* src = tile + tok * kCols + e0;
    const uint4 v = out_fp32 ? make_uint4(__float_as_uint(src[0]), __float_as_uint(src[1]), __float_as_uint(src[2]),
                                          __float_as_uint(src[3]))
                             : make_uint4(pack_bf16x2(src[0], src[1]), pack_bf16x2(src[2], src[3]),
                                          pack_bf16x2(src[4], src[5]), pack_bf16x2(src[6], src[7]));
    *reinterpret_cast<uint4*>(static_cast<uint8_t*>(out) + (size_t(row) * n + n0 + e0) * out_bytes) = v;
  }
}

}  // namespace wd::kernels
