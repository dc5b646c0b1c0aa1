// Whether TMA maps over the tiled BF16 weight copies (core/tiled_box_map.h)
// land a weight box in shared memory exactly as the classical TMA GEMM reads
// it from tiled-only weights (classical_tma_gemm.cu, kTiledW): two K halves,
// each R rows × 64 bytes under the 64-byte swizzle.
//
// For each case the probe loads the box through the tiled map (one load),
// and the same elements through a 2-D map over the canonical (rows, K)
// tensor, 64-byte swizzle, box 32 elements × R rows, twice (K from k, then
// from k + 32, the second half kBoxBytes / 2 on), each into a zeroed
// 1024-byte-aligned region four boxes long, and compares the regions byte
// for byte: equal boxes, nothing written past them. rc 1 when any case
// differs or a map cannot be encoded (the encoder's CUresult printed).
//
// History (session 51): the first geometry kept the canonical 128-byte rows
// (a box of 2 units × 64 bytes under the 128-byte swizzle). On the H200 TMA
// gave each 64-byte inner row a 128-byte line of its own (the box spread
// over twice its bytes, half of each line empty), so it could not match the
// canonical 2-D box; hence the two 64-byte-swizzled halves.
//
//   build/bench/tma_tiled_probe
#include <cuda.h>  // CUtensorMap and the encoder's types (the entry point comes from the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/common.cuh"
#include "core/tiled_box_map.h"
#include "kernels/tma.cuh"
#include "kernels/tma_map.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/layout.h"

namespace {

using wd::DeviceBuffer;

constexpr int kBoxRows = 128;                 // weight rows of a box (the classical tiles' height)
constexpr int kBoxBytes = kBoxRows * 128;     // 128 bytes of K a row
constexpr int kRegion = 4 * kBoxBytes;       // where a box may land (probe_kernel)
constexpr int kSmem = kRegion + 2048;         // + the barrier's 1024 bytes and 1024-byte alignment

struct Coords {
  int rank;
  int c[5];  // innermost first
};

// A BF16 map, 64-byte swizzle as the GEMM's tiled loads; the CUresult.
CUresult encode(CUtensorMap& m, const void* ptr, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                const cuuint32_t* box) {
  return wd::kernels::encode_tma_map(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, ptr, dims, strides, box,
                                     CU_TENSOR_MAP_SWIZZLE_64B);
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

// One block: thread 0 loads a box through `map` at coordinates k into a
// 1024-byte-aligned region of kRegion bytes (zeroed first), the barrier
// below it, and, where k2.rank > 0, a second one at k2, kBoxBytes / 2 on
// (the two boxes kBoxBytes in all); then the block copies the whole region,
// as it lies in shared memory (swizzled), to out. The region is four boxes
// long, so a layout that spreads the box shows as bytes written past
// kBoxBytes instead of a fault.
__global__ void probe_kernel(const __grid_constant__ CUtensorMap map, Coords k, Coords k2, uint8_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ uint8_t smem[];
  const uint32_t base = (wd::kernels::smem_u32(smem) + 1023u) & ~1023u;
  uint8_t* const p = smem + (base - wd::kernels::smem_u32(smem));
  const uint32_t bar = base, region = base + 1024;
  for (int i = threadIdx.x; i < kRegion; i += blockDim.x) p[1024 + i] = 0;
  if (threadIdx.x == 0) {
    wd::kernels::tma::mbar_init(bar, 1);
    wd::kernels::tma::fence_barrier_init();
  }
  wd::kernels::tma::fence_proxy_async();  // the zeros before TMA's writes
  __syncthreads();
  if (threadIdx.x == 0) {
    wd::kernels::tma::arrive_expect_tx(bar, kBoxBytes);
    load(region, &map, k, bar);
    if (k2.rank > 0) load(region + kBoxBytes / 2, &map, k2, bar);
  }
  wd::kernels::tma::wait(bar, 0);
  for (int i = threadIdx.x; i < kRegion; i += blockDim.x) out[i] = p[1024 + i];
#endif
}

struct Case {
  std::string name;
  Coords canonical, tiled;  // canonical: the first half's corner (the second is 32 elements on)
};

// Uploads a projection's canonical (rows, K) weights w and their tiled copy
// t, maps both (the canonical one 2-D, boxes of 32 elements × kBoxRows rows;
// the tiled one from g) and runs each case; returns the number of cases that
// differ, or 1 where the driver refused a map.
int probe(const char* what, const std::vector<uint16_t>& w, const std::vector<uint16_t>& t, uint64_t rows, uint64_t K,
          const wd::TiledBoxMap& g, const std::vector<Case>& cases) {
  DeviceBuffer<uint16_t> dw(w), dt(t);
  CUtensorMap canonical, tiled;
  const cuuint64_t cd[2] = {K, rows}, cs[1] = {2 * K};
  const cuuint32_t cb[2] = {32, kBoxRows};
  const CUresult rc = encode(canonical, dw.data(), 2, cd, cs, cb),
                 rt = wd::kernels::encode_tiled_map(tiled, dt.data(), g, 2);
  std::printf("%-8s maps: canonical CUresult %d, tiled (rank %d) CUresult %d\n", what, int(rc), g.rank, int(rt));
  if (rc != CUDA_SUCCESS || rt != CUDA_SUCCESS) return 1;
  DeviceBuffer<uint8_t> out(kRegion);
  auto run = [&](const CUtensorMap& m, const Coords& k, const Coords& k2) {
    probe_kernel<<<1, 256, kSmem>>>(m, k, k2, out.data());
    WD_CUDA_CHECK(cudaGetLastError());
    WD_CUDA_CHECK(cudaDeviceSynchronize());
    return out.download();
  };
  int bad = 0;
  bool shown = false;
  for (const Case& c : cases) {
    const Coords second{2, {c.canonical.c[0] + 32, c.canonical.c[1]}};
    const std::vector<uint8_t> hc = run(canonical, c.canonical, second), ht = run(tiled, c.tiled, Coords{0, {}});
    int diff = 0, first = -1, zero = 0, spilled = 0;
    for (int i = 0; i < kBoxBytes; ++i) {
      if (hc[i] != ht[i]) diff++, first = first < 0 ? i : first;
      zero += hc[i] == 0;
    }
    for (int i = kBoxBytes; i < kRegion; ++i) spilled += (hc[i] != 0) + (ht[i] != 0);
    // The weights hold no zero byte: a zero in the canonical box is a load
    // that did not land; a byte past the box, a layout wider than the box.
    const bool ok = diff == 0 && zero == 0 && spilled == 0;
    bad += !ok;
    std::printf("%-8s %-34s %s", what, c.name.c_str(), ok ? "equal" : "DIFFERENT");
    if (!ok)
      std::printf(" (%d of %d bytes differ, first at %d; %d zero bytes in the canonical box; %d bytes written past it)",
                  diff, kBoxBytes, first, zero, spilled);
    std::printf("\n");
    if (!ok && !shown) {
      // Where the tiled load put each 16-byte chunk of the canonical box
      // (chunks are unique: random bytes): the first 48 chunks of the region.
      shown = true;
      std::map<std::string, int> at;
      for (int j = 0; j < kBoxBytes / 16; ++j) at[std::string(hc.begin() + 16 * j, hc.begin() + 16 * j + 16)] = j;
      std::printf("  tiled region chunk -> canonical region chunk (16 bytes each; 4 a 64-byte row):\n ");
      for (int j = 0; j < 48; ++j) {
        const auto f = at.find(std::string(ht.begin() + 16 * j, ht.begin() + 16 * j + 16));
        std::printf(" %d:%s", j, f == at.end() ? "?" : std::to_string(f->second).c_str());
        if (j % 16 == 15) std::printf("\n ");
      }
      std::printf("\n");
    }
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
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line out before a fault
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
