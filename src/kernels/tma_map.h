// TMA tensor maps (host): the one encoder of the library's TMA loads. The
// classical TMA GEMM reads its operands through these (classical_tma_gemm.cu),
// bench/tma_tiled_probe the same maps.
#pragma once

#include <cuda.h>  // CUtensorMap and the encoder's types (the entry point comes from the runtime)

#include <cstdint>

#include "core/tiled_box_map.h"

namespace wd::kernels {

// cuTensorMapEncodeTiled, from the driver through the runtime (no link to
// libcuda): `rank` dimensions innermost first, strides in bytes of
// dimensions 1 .. rank-1, element strides 1, no interleave, 256-byte L2
// promotion, zeros past the tensor's ends. Returns the driver's CUresult.
CUresult encode_tma_map(CUtensorMap& m, CUtensorMapDataType type, int rank, const void* ptr, const cuuint64_t* dims,
                        const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle);

// A (rows, k) row-major matrix of 1- or 2-byte elements, read in boxes of
// box_rows rows × 128 bytes into the 128-byte-swizzled layout wgmma reads.
// Throws wd::InvalidArgument where the driver refuses it.
CUtensorMap tma_matrix_map(const void* ptr, uint64_t rows, uint64_t k, bool fp8, int box_rows);

// A tiled weight copy (BF16, or MXFP8 codes: elem_bytes 2 or 1) read through
// the geometry g (core/tiled_box_map.h): each box two K halves of 64-byte
// rows, 64-byte swizzle. Throws wd::InvalidArgument where the driver refuses
// it.
CUtensorMap tma_tiled_map(const void* ptr, const TiledBoxMap& g, int elem_bytes);
// The same map, the driver's CUresult returned rather than thrown (for
// bench/tma_tiled_probe, which reports what the driver refuses).
CUresult encode_tiled_map(CUtensorMap& m, const void* ptr, const TiledBoxMap& g, int elem_bytes);

}  // namespace wd::kernels
