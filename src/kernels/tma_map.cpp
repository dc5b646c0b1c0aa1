// The TMA tensor-map encoder: kernels/tma_map.h.
#include "kernels/tma_map.h"

#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "warpdecode/error.h"

namespace wd::kernels {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    WD_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    WD_CHECK(q == cudaDriverEntryPointSuccess && f != nullptr,
             "TMA: the driver has no cuTensorMapEncodeTiled (the TMA kernels need CUDA 12+)");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

}  // namespace

CUresult encode_tma_map(CUtensorMap& m, CUtensorMapDataType type, int rank, const void* ptr, const cuuint64_t* dims,
                        const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle) {
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  return encode_tiled()(&m, type, cuuint32_t(rank), const_cast<void*>(ptr), dims, strides, box, ones,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

CUtensorMap tma_matrix_map(const void* ptr, uint64_t rows, uint64_t k, bool fp8, int box_rows) {
  CUtensorMap m;
  const uint64_t elem = fp8 ? 1 : 2;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * elem};
  const cuuint32_t box[2] = {cuuint32_t(128 / elem), cuuint32_t(box_rows)};
  const CUresult r = encode_tma_map(m, fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr,
                                    dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
  WD_CHECK(r == CUDA_SUCCESS, "TMA: cuTensorMapEncodeTiled failed (CUresult ", int(r), ") for a (", rows, ", ", k,
           ") matrix");
  return m;
}

CUresult encode_tiled_map(CUtensorMap& m, const void* ptr, const TiledBoxMap& g, int elem_bytes) {
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5];
  for (int d = 0; d < g.rank; ++d) dims[d] = g.dims[d], box[d] = g.box[d];
  for (int d = 0; d + 1 < g.rank; ++d) strides[d] = g.strides[d];
  return encode_tma_map(m, elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8, g.rank,
                        ptr, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_64B);
}

CUtensorMap tma_tiled_map(const void* ptr, const TiledBoxMap& g, int elem_bytes) {
  CUtensorMap m;
  const CUresult r = encode_tiled_map(m, ptr, g, elem_bytes);
  WD_CHECK(r == CUDA_SUCCESS, "TMA: cuTensorMapEncodeTiled failed (CUresult ", int(r), ") for a tiled ",
           elem_bytes == 2 ? "BF16" : "MXFP8", " copy (rank ", g.rank, ", ", g.dims[g.rank - 1], " units)");
  return m;
}

}  // namespace wd::kernels
