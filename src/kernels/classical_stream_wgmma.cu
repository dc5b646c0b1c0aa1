// The native-FP8 decode tile of the classical path (GemmKernel::kStreamWgmma,
// classical_gemm.cuh): W8A8 with FP8 block-128 weights, T = 8, sm_90a.
//
// Why: the stream tile (classical_stream_gemm.cu) decodes both operands'
// E4M3 codes to BF16 in registers, because sm_90 has no native FP8
// mma.sync; that decode bounds it at 61-76 % of the read bandwidth. wgmma
// multiplies E4M3 natively and takes its A operand from registers, so here
// the weights go from global memory straight into wgmma's A fragments, with
// no conversion at all, and the block's 8 activation rows wait in shared
// memory as its B operand.
//
// Mapping: grid (N/64, max_blocks). Block (x, y) computes weight rows
// [64x, 64x+64) (one m64 tile) for the 8 token rows of expert block y. Its S
// warpgroups (S = blockDim.x / 128 <= 4) split K into ranges of whole
// 128-element groups. Warp w of a warpgroup owns rows 16w..16w+15; lane 4g+q
// loads 16 bytes of rows 16w+g and 16w+g+8 of each 64-byte chunk (bytes
// 16q..16q+15), two 128-K groups (4 chunks) a round, two rounds in
// registers: one in flight while the other's 8 wgmmas run.
//
// K permutation (as mma.cuh, at 4-byte granularity): the dot product does
// not care in which order k is visited, only that A and B agree. Word i of
// lane q's 16 bytes of chunk c is actual word 16c + 4q + i of the 128-byte
// group; k32 step s = 2c + j takes words 2j (as a[0]/a[1]) and 2j+1 (as
// a[2]/a[3]), i.e. logical word L of step s (L = 4h + q', 4 bytes each) is
// actual word 16c + 4q' + 2j + h. The B tile of a group is the 8 token rows
// of 128 bytes with the same permutation, in the 128-byte-swizzle K-major
// layout of classical_wgmma.cuh (8 rows × 128 B = 1024 B; step s at +32s).
//
// Measured (H200, docs/CLASSICAL.md run 3 c6): correct, but slower than the
// stream tile's BF16 decode (qwen3-30b-a3b B = 8: gate_up 48.9 vs 48.2 µs,
// down 37.5 vs 29.5): each round waits for its wgmmas before the next round's
// loads are issued, and the block stages its B tiles before any MMA. So it
// is a selectable configuration ("t8/stream-wgmma"), not the default.
//
// Numerics: each group's four k32 wgmmas sum into a fresh FP32 register set
// (Hopper's FP8 MMA accumulates with reduced precision inside it), which is
// then promoted: acc += group · sw · sa (DeepGEMM-style, as the other
// classical FP8 tiles). Warpgroup partials are summed in order: deterministic.
//
// Shared memory (dynamic, 1024-byte aligned): the B tiles of all K/128
// groups (1 KB each), the 8 rows' activation scales per group, the
// warpgroups' partial tiles and the output staging.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/classical_wgmma.cuh"
#include "kernels/common.cuh"
#include "kernels/k_split.h"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/tile_store.cuh"
#include "warpdecode/error.h"

namespace wd::kernels {
namespace {

constexpr int kRows = 64;           // weight rows per block: one m64 tile
constexpr int kTokens = 8;          // token rows per expert block: n8
constexpr int kGroup = 128;         // elements of a scale group (= bytes: E4M3)
constexpr int kMaxWarpgroups = 4;   // K ranges per block
constexpr int kWgThreads = 128;
constexpr int kTileBytes = kTokens * kGroup;  // one group's B tile

}  // namespace

// Outside the anonymous namespace: the sm_100a pass compiles the kernel body
// out, and unreferenced internal functions are warnings (errors here).
struct StreamWgmmaSmem {
  int groups, warpgroups;
  // Byte offsets from the 1024-aligned base.
  __host__ __device__ int b_tiles() const { return 0; }
  __host__ __device__ int a_scales() const { return groups * kTileBytes; }
  __host__ __device__ int partials() const { return a_scales() + groups * kTokens * 4; }
  __host__ __device__ int out() const { return partials() + warpgroups * kWgThreads * 4 * 4; }
  __host__ __device__ int bytes() const { return out() + kTokens * kRows * 4 + 1024; }  // + alignment slack
};

namespace {

__global__ void __launch_bounds__(kMaxWarpgroups * kWgThreads, 1)
    stream_wgmma_kernel(const __grid_constant__ GroupedGemmParams p) {
#if defined(__CUDA_ARCH__)
#if !WD_WGMMA_AVAILABLE
  __trap();  // the host launches this kernel only on sm_90a
#else
  const int N = p.n, K = p.k, groups = K / kGroup;
  const int nb = p.num_blocks != nullptr ? __ldcg(p.num_blocks) : p.max_blocks;
  if (int(blockIdx.y) >= nb) {
    wait_for_previous_kernel();  // a kernel's completion must imply its predecessor's
    return;
  }
  const int expert = p.block_expert != nullptr ? __ldcg(p.block_expert + blockIdx.y) : 0;
  const int warpgroups = blockDim.x / kWgThreads, wg = threadIdx.x / kWgThreads;
  const int tid = threadIdx.x % kWgThreads, w = tid / kWarpSize, lane = tid % kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int n0 = blockIdx.x * kRows, row0 = blockIdx.y * kTokens;
  const StreamWgmmaSmem L{groups, warpgroups};
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = (smem_u32(smem_raw) + 1023u) & ~1023u;
  uint8_t* base = smem_raw + (smem - smem_u32(smem_raw));

  // The warpgroup's groups [gb, gb + ng), two a round.
  const int gb = wg * groups / warpgroups, ng = (wg + 1) * groups / warpgroups - gb;
  const int rounds = (ng + 1) / 2, chunks = 2 * ng;
  const uint64_t pol = l2_stream_policy(true);
  const uint8_t* w_lane = static_cast<const uint8_t*>(p.w) + (size_t(expert) * N + n0 + 16 * w + g) * size_t(K) +
                          size_t(gb) * kGroup + 16 * q;
  const size_t w_hi = 8 * size_t(K);  // row g+8

  struct Round {
    uint4 w[2][4];  // [row g, row g+8][chunk of the round]
  };
  // Loads are never conditional (classical_stream_gemm.cu): chunks past the
  // range re-read its last chunk and are not computed.
  auto load = [&](Round& rd, int r) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int c = min(4 * r + u, chunks - 1);
      rd.w[0][u] = ld_stream(w_lane + size_t(c) * 64, pol);
      rd.w[1][u] = ld_stream(w_lane + w_hi + size_t(c) * 64, pol);
    }
  };
  Round ra, rb;
  load(ra, 0);
  load(rb, 1);
  wait_for_previous_kernel();
  allow_next_kernel();

  // Stage the 8 activation rows, permuted (see the header) and swizzled.
  {
    const auto* a = static_cast<const uint8_t*>(p.a);
    for (int i = threadIdx.x; i < kTokens * K / 16; i += blockDim.x) {
      const int r = i / (K / 16), m16 = i % (K / 16);  // row, 16-byte piece of the row
      const int grp = m16 / 8, m = m16 % 8, c = m / 4, qq = m % 4;
      const uint4 v = ld_cached(a + size_t(min(row0 + r, p.rows - 1)) * K + size_t(m16) * 16);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      uint8_t* tile = base + L.b_tiles() + grp * kTileBytes + r * 128;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int j = k / 2, h = k % 2;
        const int lb = 4 * (8 * (2 * c + j) + 4 * h + qq);  // logical byte in the row
        *reinterpret_cast<uint32_t*>(tile + (((lb >> 4) ^ r) << 4) + (lb & 15)) = words[k];
      }
    }
    float* sa = reinterpret_cast<float*>(base + L.a_scales());
    for (int i = threadIdx.x; i < groups * kTokens; i += blockDim.x)
      sa[i] = __ldg(p.a_scales + size_t(min(row0 + i % kTokens, p.rows - 1)) * groups + i / kTokens);
    wgmma::fence_proxy_async();
    __syncthreads();
  }
  const float* sa = reinterpret_cast<const float*>(base + L.a_scales());
  const float* ws = p.w_block_scales + (size_t(expert) * (N / kGroup) + n0 / kGroup) * groups;

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // Round r: its (one or two) groups' 8 k32 wgmmas, each group into its own
  // register set, then the promotion.
  auto consume = [&](const Round& rd, int r) {
    const int gr = gb + 2 * r;           // first group of the round
    const bool two = 2 * r + 1 < ng;     // uniform over the warpgroup
    float t[2][4];
    wgmma::fence();
    // Both groups' wgmmas always run (a branch around wgmma makes ptxas
    // serialize them): a round with one group computes its second set on
    // re-read weights and a valid B tile, and never promotes it.
#pragma unroll
    for (int gi = 0; gi < 2; ++gi) {
      const uint64_t desc = wgmma::sw128_desc(smem + L.b_tiles() + min(gr + gi, groups - 1) * kTileBytes);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint4& lo = rd.w[0][2 * gi + s / 2];
        const uint4& hi = rd.w[1][2 * gi + s / 2];
        const uint32_t a[4] = {s % 2 ? lo.z : lo.x, s % 2 ? hi.z : hi.x, s % 2 ? lo.w : lo.y,
                               s % 2 ? hi.w : hi.y};
        wgmma::wgmma_m64n8k32_e4m3_rs(t[gi], a, desc + 2 * s, s > 0);  // +32 bytes a step
      }
    }
    wgmma::commit();
    wgmma::wait<0>();
#pragma unroll
    for (int gi = 0; gi < 2; ++gi) {
      if (gi == 1 && !two) break;
      const int grp = gr + gi;
      const float sw = __ldg(ws + grp);
      const float s0 = sw * sa[grp * kTokens + 2 * q], s1 = sw * sa[grp * kTokens + 2 * q + 1];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        wgmma::fence_operand(t[gi][c]);
        acc[c] = __fmaf_rn(t[gi][c], c % 2 ? s1 : s0, acc[c]);
      }
    }
  };
  for (int r = 0;; r += 2) {
    consume(ra, r);
    if (r + 1 >= rounds) break;
    load(ra, r + 2);
    consume(rb, r + 1);
    if (r + 2 >= rounds) break;
    load(rb, r + 3);
  }

  // Warpgroup partials summed in order; 16-byte stores of the (8 × 64) tile.
  float* part = reinterpret_cast<float*>(base + L.partials());
#pragma unroll
  for (int c = 0; c < 4; ++c) part[(wg * kWgThreads + tid) * 4 + c] = acc[c];
  __syncthreads();
  float* out = reinterpret_cast<float*>(base + L.out());
  if (wg == 0) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float v = part[tid * 4 + c];
      for (int s = 1; s < warpgroups; ++s) v += part[(s * kWgThreads + tid) * 4 + c];
      // C fragment: row 16w + g + 8(c/2), token 2q + c%2.
      out[(2 * q + c % 2) * kRows + 16 * w + g + 8 * (c / 2)] = v;
    }
  }
  __syncthreads();
  store_tile_16b<kRows>(out, kTokens, row0, p.rows, n0, N, p.out, p.out_fp32 != 0, threadIdx.x, blockDim.x);
#endif
#endif
}

}  // namespace

static_assert(kRows == kStreamWgmmaRows && kGroup == kStreamWgmmaGroup,
              "classical_fits.h: the stream-wgmma kernel's tile (stream_wgmma_gemm_fits)");

void stream_wgmma_gemm(const GroupedGemmParams& p, WeightFormat format, cudaStream_t stream, bool pdl) {
  WD_CHECK(stream_wgmma_gemm_fits(format, p.n, p.k), "classical GEMM: the stream-wgmma kernel takes FP8 block-128 "
           "weights with N % 64 == 0 and K % 128 == 0 (format ", to_string(format), ", N = ", p.n, ", K = ", p.k, ")");
  WD_CHECK(wgmma_available(), "classical GEMM: the stream-wgmma kernel needs an sm_90 device and an sm_90a build");
  auto kernel = &stream_wgmma_kernel;
  const int groups = p.k / kGroup;
  const long resident_warps = resident_blocks(kernel, kWgThreads, 16 * 1024) * (kWgThreads / kWarpSize);
  // Warpgroups (K ranges): k_split.h, in 128-K groups, rounds of two, with 2
  // warpgroups as the base.
  const long tiles = long(p.n / kRows) * p.max_blocks;
  const int wgs = choose_k_slices(groups, 2, 2, kMaxWarpgroups, tiles, kWgThreads / kWarpSize, resident_warps);
  const StreamWgmmaSmem L{groups, wgs};
  WD_CHECK(L.bytes() <= 200 * 1024, "classical GEMM: K = ", p.k, " needs ", L.bytes(),
           " bytes of shared memory in the stream-wgmma kernel (at most 200 KB)");
  const dim3 grid(unsigned(p.n / kRows), unsigned(p.max_blocks));
  ensure_dynamic_smem(kernel, size_t(L.bytes()));
  launch_kernel(kernel, grid, dim3(unsigned(wgs * kWgThreads)), size_t(L.bytes()), stream, pdl, p);
}

}  // namespace wd::kernels
