// Whether the classical path's TMA GEMM could read tiled-only BF16 weights
// directly, without un-tiling them (docs/CLASSICAL.md, "Dispatch": the
// un-tiling is most of that path's time on tiled-only weights, 577 µs a
// call on qwen3-30b-a3b BF16).
//
// The idea. The GEMM loads a weight box of R rows × 128 bytes (64 BF16 of K)
// through a 2-D map over the canonical (rows, K) tensor, 128-byte swizzle
// (classical_tma_gemm.cu, tile_map). core/tiled_box_map.h gives maps over
// the tiled BF16 copies that walk the same box in the same element order
// (checked on the CPU: tests/cpu/test_tiled_box_map.cpp). If TMA lays a box
// out densely in that order and swizzles it by its shared-memory address,
// the shared-memory bytes equal the canonical map's, and the GEMM's
// consumers run unchanged. Two things to learn on the device: whether the
// driver accepts strides that do not ascend (the unit's 1024 or 2048 bytes
// before the row's 64), and whether a 64-byte inner box under the 128-byte
// swizzle lands as the canonical 128-byte rows do.
//
// For each case the probe loads the same weights through both maps into two
// 1024-byte-aligned buffers and compares them byte for byte; rc 1 when any
// case differs or a map cannot be encoded (the encoder's CUresult printed).
// Written in session 50; not yet run on a device.
//
//   build/bench/tma_tiled_probe
#include <cuda.h>  // CUtensorMap and the encoder's types (the entry point comes from the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/common.cuh"
#include "core/tiled_box_map.h"
#include "kernels/tma.cuh"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/layout.h"

namespace {

using wd::DeviceBuffer;

constexpr int kBoxRows = 128;                 // weight rows of a box (the classical tiles' height)
constexpr int kBoxBytes = kBoxRows * 128;     // 128 bytes of K a row
constexpr int kSmem = 2 * kBoxBytes + 2048;   // two boxes, 1024-byte alignment, the barrier

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled encode_tiled() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  WD_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || f == nullptr) {
    std::fprintf(stderr, "the driver has no cuTensorMapEncodeTiled\n");
    std::exit(2);
  }
  return reinterpret_cast<EncodeTiled>(f);
}

// A BF16 map of `rank` dimensions (innermost first; strides in bytes of
// dimensions 1..rank-1), 128-byte swizzle as the GEMM's; the CUresult.
CUresult encode(CUtensorMap& m, const void* ptr, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                const cuuint32_t* box) {
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  return encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, cuuint32_t(rank), const_cast<void*>(ptr), dims, strides,
                        box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

struct Coords {
  int rank;
  int c[5];  // innermost first
};

CUresult encode(CUtensorMap& m, const void* ptr, const wd::TiledBoxMap& g) {
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5];
  for (int d = 0; d < g.rank; ++d) dims[d] = g.dims[d], box[d] = g.box[d];
  for (int d = 0; d + 1 < g.rank; ++d) strides[d] = g.strides[d];
  return encode(m, ptr, g.rank, dims, strides, box);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void load(uint32_t dst, const CUtensorMap* map, const Coords& k, uint32_t bar) {
  const uint64_t m = reinterpret_cast<uint64_t>(map);
  if (k.rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
            dst),
        "l"(m), "r"(k.c[0]), "r"(k.c[1]), "r"(bar)
        : "memory");
  } else if (k.rank == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(dst),
        "l"(m), "r"(k.c[0]), "r"(k.c[1]), "r"(k.c[2]), "r"(k.c[3]), "r"(bar)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
        "%6}], [%7];\n" ::"r"(dst),
        "l"(m), "r"(k.c[0]), "r"(k.c[1]), "r"(k.c[2]), "r"(k.c[3]), "r"(k.c[4]), "r"(bar)
        : "memory");
  }
}
#endif

// One block: thread 0 loads box a through map a and box b through map b
// (kBoxBytes each) against one barrier; then the block copies both boxes,
// as they lie in shared memory (swizzled), to out (a then b).
__global__ void probe_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                             Coords ka, Coords kb, uint8_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ uint8_t smem[];
  const uint32_t base = (wd::kernels::smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* const p = smem + (base - wd::kernels::smem_u32(smem));
  const uint32_t bar = base + 2 * kBoxBytes;
  if (threadIdx.x == 0) {
    wd::kernels::tma::mbar_init(bar, 1);
    wd::kernels::tma::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    wd::kernels::tma::arrive_expect_tx(bar, 2 * kBoxBytes);
    load(base, &map_a, ka, bar);
    load(base + kBoxBytes, &map_b, kb, bar);
  }
  wd::kernels::tma::wait(bar, 0);
  for (int i = threadIdx.x; i < 2 * kBoxBytes; i += blockDim.x) out[i] = p[i];
#endif
}

struct Case {
  std::string name;
  Coords canonical, tiled;
};

// Uploads a projection's canonical (rows, K) weights w and their tiled copy
// t, maps both (the canonical 2-D map as tile_map in classical_tma_gemm.cu;
// the tiled one from g) and runs each case; returns the number of cases that
// differ, or 1 where the driver refused a map.
int probe(const char* what, const std::vector<uint16_t>& w, const std::vector<uint16_t>& t, uint64_t rows, uint64_t K,
          const wd::TiledBoxMap& g, const std::vector<Case>& cases) {
  DeviceBuffer<uint16_t> dw(w), dt(t);
  CUtensorMap canonical, tiled;
  const cuuint64_t cd[2] = {K, rows}, cs[1] = {2 * K};
  const cuuint32_t cb[2] = {64, kBoxRows};
  const CUresult rc = encode(canonical, dw.data(), 2, cd, cs, cb), rt = encode(tiled, dt.data(), g);
  std::printf("%-8s maps: canonical CUresult %d, tiled (rank %d) CUresult %d\n", what, int(rc), g.rank, int(rt));
  if (rc != CUDA_SUCCESS || rt != CUDA_SUCCESS) return 1;
  DeviceBuffer<uint8_t> out(2 * kBoxBytes);
  int bad = 0;
  for (const Case& c : cases) {
    out.fill_bytes(0);
    probe_kernel<<<1, 256, kSmem>>>(canonical, tiled, c.canonical, c.tiled, out.data());
    WD_CUDA_CHECK(cudaGetLastError());
    WD_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> h = out.download();
    int diff = 0, first = -1, zero = 0;
    for (int i = 0; i < kBoxBytes; ++i) {
      if (h[i] != h[kBoxBytes + i]) diff++, first = first < 0 ? i : first;
      zero += h[i] == 0;
    }
    // The weights hold no zero byte: a box of zeros is a load that did not land.
    const bool ok = diff == 0 && zero == 0;
    bad += !ok;
    std::printf("%-8s %-34s %s", what, c.name.c_str(), ok ? "equal" : "DIFFERENT");
    if (!ok) std::printf(" (%d of %d bytes differ, first at %d; %d zero bytes in the canonical box)", diff, kBoxBytes,
                         first, zero);
    std::printf("\n");
  }
  return bad;
}

// Random BF16 bit patterns without a zero byte.
std::vector<uint16_t> weights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> w(n);
  for (uint16_t& v : w) v = uint16_t(((rng() % 255 + 1) << 8) | (rng() % 255 + 1));
  return w;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("tma_tiled_probe: no CUDA device\n");
    return 2;
  }
  WD_CUDA_CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  wd::MoeShape s;
  s.hidden = 2048, s.intermediate = 768, s.experts = 2, s.top_k = 1;  // qwen3-30b-a3b's H and I
  const uint64_t H = s.hidden, I = s.intermediate, E = s.experts;
  int bad = 0;

  {  // down (E, H, I): rows e·H + n, K = I
    const std::vector<uint16_t> w = weights(E * H * I, 1);
    std::vector<uint16_t> t(w.size());
    wd::tile_bf16_down(s, w.data(), t.data());
    std::vector<Case> cases;
    const int ks[] = {0, 64, int(I) - 64}, rows[] = {0, 128, int(H) - 128, int(H) + 256};
    for (int k : ks)
      for (int r : rows) {
        Case c{"k " + std::to_string(k) + ", row " + std::to_string(r), {2, {k, r}}, {4, {}}};
        wd::down_tiled_box_coords(k, r, c.tiled.c);
        cases.push_back(c);
      }
    bad += probe("down", w, t, E * H, I, wd::down_tiled_box_map(E, H, I, kBoxRows), cases);
  }
  {  // gate_up (E, 2I, H): gate rows e·2I + n, up rows e·2I + I + n, K = H
    const std::vector<uint16_t> w = weights(E * 2 * I * H, 2);
    std::vector<uint16_t> t(w.size());
    wd::tile_bf16_gate_up(s, w.data(), t.data());
    std::vector<Case> cases;
    const int ks[] = {0, 64, int(H) - 64}, ns[] = {0, 128, int(I) - 128};
    for (int k : ks)
      for (int e = 0; e < 2; ++e)
        for (int n : ns)
          for (int up = 0; up < 2; ++up) {
            const int row = e * 2 * int(I) + up * int(I) + n;
            Case c{"k " + std::to_string(k) + ", expert " + std::to_string(e) + (up ? ", up" : ", gate") + " rows " +
                       std::to_string(n),
                   {2, {k, row}},
                   {5, {}}};
            wd::gate_up_tiled_box_coords(k, row, int(I), c.tiled.c);
            cases.push_back(c);
          }
    bad += probe("gate_up", w, t, E * 2 * I, H, wd::gate_up_tiled_box_map(E, H, I, kBoxRows), cases);
  }
  std::printf("%s\n", bad ? "tma_tiled_probe: the tiled maps do NOT reproduce the canonical boxes"
                          : "tma_tiled_probe: every tiled box equals the canonical one");
  return bad ? 1 : 0;
}
