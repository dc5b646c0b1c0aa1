// The register-streamed grouped GEMM of the classical path (GemmKernel::kStream,
// classical_gemm.cuh): the decode tile, T = 8 or 16 token rows per expert
// block.
//
// Why a second decode kernel: the cp.async → shared memory → ldmatrix
// pipeline of classical_gemm_impl.cuh streamed the decode GEMMs at 72-79 % of
// the read bandwidth (BF16, B = 16-32; a barrier and a wait per 8 KB stage),
// and FP8 went through sm_90's emulated E4M3 mma.sync. Here, as in warp
// decode's tensor-core kernels, every lane loads its weight bytes with
// 16-byte loads straight into the registers of its MMA fragments (mma.cuh:
// the K permutation), and nothing waits at a barrier until the epilogue.
//
// Mapping: grid (N/32, max_blocks). Block (x, y) computes weight rows
// [32x, 32x+32) (two m16 tiles) for the T token rows of expert block y
// (rows [Ty, Ty+T) of A, expert block_expert[y]; blocks y >= the device-side
// count exit at once). The block's S warps (S = blockDim.x / 32 <= 8) split
// K into S ranges of whole rounds; lane 4g+q loads rows g, g+8, 16+g, 24+g
// of each 64-byte chunk of its range (16 bytes at 16q) and the same 16 bytes
// of A's rows g (and g+8 when T = 16: a second n8 MMA on the same weight
// fragment). The S partial tiles are summed in shared memory in warp order
// (deterministic), then stored with 16-byte stores.
//
// Numerics. BF16: the MMA chain of each K range in FP32, ranges summed in
// order. W8A8: the E4M3 codes of W and A are decoded exactly to BF16 (every
// E4M3 value is a BF16, mma.cuh) and multiplied on the BF16 tensor cores,
// where every product of two E4M3 values is exact in FP32; each 128-element
// K group (one activation scale group, one FP8 block-128 weight block) is
// summed alone, then promoted: acc += group · sw · sa (DeepGEMM-style, as
// the shared-memory kernel does). FP8 block-128 weights are decoded as
// w·2^-112 (one multiply a pair fewer: the bulk of the decode) and A as
// a·2^6, so every product w·a·2^-106 is an FP32 normal (|w|, |a| >= 2^-9)
// and the group sum is the exact-scale sum times 2^-106, which the promotion
// undoes exactly. MXFP8 weights enter the decode with their 32-element scale
// (exact whenever the product is a BF16 normal), so their promotion carries
// only sa.
//
// Shapes: N % 32 == 0; K % 64 == 0 (BF16) or K % 128 == 0 (W8A8);
// stream_gemm_fits() says whether a GEMM qualifies.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/common.cuh"
#include "kernels/k_split.h"
#include "kernels/launch.cuh"
#include "kernels/mma.cuh"
#include "kernels/tile_store.cuh"
#include "warpdecode/error.h"

namespace wd::kernels {
namespace {

constexpr int kRows = 32;      // weight rows per block: two m16 tiles
constexpr int kMaxSlices = 8;  // warps per block, one K range each (MXFP8: 4)
constexpr int kGroup = 128;    // W8A8: elements per activation scale group

// A chunk is 64 bytes of a row (16 per lane of a quad): 32 BF16 or 64 E4M3.
// A round is what one load phase brings, two chunks: 4 KB per warp in flight
// while the other buffer is computed. A W8A8 round is one 128-element group.
// kT: token rows per expert block, 8 or 16 (one or two n8 tiles; a weight
// fragment feeds both).
template <WeightFormat F, int kT>
struct Stream {
  static constexpr int kNT = kT / 8;
  static constexpr bool kFp8 = F != WeightFormat::kBF16;
  static constexpr bool kMx = F == WeightFormat::kMXFP8;
  static constexpr int kChunkElems = kFp8 ? 64 : 32;
  static constexpr int kChunks = 2;  // per round
  static constexpr int kRoundElems = kChunks * kChunkElems;
  static constexpr int kSteps = kChunkElems / 16;  // k16 MMA steps per chunk
  static constexpr int kElemBytes = kFp8 ? 1 : 2;
  // Warps per block at most, and the blocks of that size the registers must
  // allow per SM: 16 warps at <= 128 registers; MXFP8's scale codes and
  // second decode path need more (spills at 128): 12 warps. sm_100a code of
  // the FP8 block-128 tile spills at 128 (sm_90a: 122): 8 warps there.
  // T = 16 holds twice the accumulators and activations: 12 warps (MXFP8:
  // 8, it spills at 168 registers).
  static constexpr int kMaxWarps = (kMx || kT == 16) ? 4 : kMaxSlices;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  static constexpr int kMinBlocks = kT == 16 ? (kMx ? 2 : 3) : kMx ? 3 : (kFp8 ? 1 : 2);
#else
  static constexpr int kMinBlocks = kT == 16 ? (kMx ? 2 : 3) : kMx ? 3 : 2;
#endif
};

template <WeightFormat F, int kT>
__global__ void __launch_bounds__(Stream<F, kT>::kMaxWarps * kWarpSize, Stream<F, kT>::kMinBlocks)
    stream_gemm_kernel(const __grid_constant__ GroupedGemmParams p) {
  using S = Stream<F, kT>;
  constexpr int kNT = S::kNT;
  __shared__ float s_part[S::kMaxWarps][S::kNT * 8][kWarpSize];
  __shared__ __align__(16) float s_out[kT][kRows];

  const int N = p.n, K = p.k;
  // The block table comes from the align stage, two kernels back: complete
  // before this kernel starts even under PDL (launch.cuh).
  const int nb = p.num_blocks != nullptr ? __ldcg(p.num_blocks) : p.max_blocks;
  if (int(blockIdx.y) >= nb) {
    wait_for_previous_kernel();  // a kernel's completion must imply its predecessor's
    return;
  }
  const int expert = p.block_expert != nullptr ? __ldcg(p.block_expert + blockIdx.y) : 0;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int slices = blockDim.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int n0 = blockIdx.x * kRows, row0 = blockIdx.y * kT;

  // The warp's rounds [r_begin, r_begin + nr): the most equal split of K's
  // rounds. The launcher never makes more slices than rounds: nr >= 1.
  const int rounds = K / S::kRoundElems;
  const int r_begin = warp * rounds / slices, nr = (warp + 1) * rounds / slices - r_begin;
  const size_t k_bytes = size_t(K) * S::kElemBytes;
  const uint64_t pol = l2_stream_policy(true);

  // Lane addresses. Row r of the lane (0..3) is n0 + g + 8r; chunk c of the
  // warp's range starts at element (r_begin·kChunks + c)·kChunkElems.
  const int c_first = r_begin * S::kChunks;
  const uint8_t* w_lane = static_cast<const uint8_t*>(p.w) +
                          (size_t(expert) * N + n0 + g) * k_bytes + size_t(c_first) * 64 + 16 * q;
  const size_t w_row_step = 8 * k_bytes;
  // Token row g of n-tile nt is row0 + 8nt + g.
  const uint8_t* a_lane[kNT];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
    a_lane[nt] = static_cast<const uint8_t*>(p.a) + size_t(min(row0 + 8 * nt + g, p.rows - 1)) * k_bytes +
                 size_t(c_first) * 64 + 16 * q;
  // MXFP8: the code of the lane's 16 elements of chunk c of row r.
  const int mx_blocks = K / kMxBlock;
  const uint8_t* mx_lane = S::kMx ? p.w_mx_scales + (size_t(expert) * N + n0 + g) * mx_blocks +
                                        (c_first * S::kChunkElems + 16 * q) / kMxBlock
                                  : nullptr;
  const int groups = K / kGroup;

  struct Round {
    uint4 w[S::kChunks][4];
    uint4 a[S::kChunks][kNT];
    uint32_t code[S::kChunks][4];
    float ws, sa[kNT][2];  // W8A8: the group's scales (tokens 8nt + 2q, +1)
  };
  auto load_w = [&](Round& rd, int r) {
    r = min(r, nr - 1);  // past the end: re-read the last round (never computed)
#pragma unroll
    for (int u = 0; u < S::kChunks; ++u) {
      const int c = r * S::kChunks + u;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        rd.w[u][j] = ld_stream(w_lane + j * w_row_step + size_t(c) * 64, pol);
        if constexpr (S::kMx) rd.code[u][j] = ld_byte(mx_lane + size_t(j) * 8 * mx_blocks + 2 * c);
      }
    }
  };
  auto load_a = [&](Round& rd, int r) {
    r = min(r, nr - 1);
#pragma unroll
    for (int u = 0; u < S::kChunks; ++u)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) rd.a[u][nt] = ld_cached(a_lane[nt] + size_t(r * S::kChunks + u) * 64);
    if constexpr (S::kFp8) {
      const int grp = r_begin + r;  // W8A8: round = group
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int i = 0; i < 2; ++i)
          rd.sa[nt][i] = __ldg(p.a_scales + size_t(min(row0 + 8 * nt + 2 * q + i, p.rows - 1)) * groups + grp);
      if constexpr (!S::kMx)
        rd.ws = __ldg(p.w_block_scales + (size_t(expert) * (N / kGroup) + n0 / kGroup) * groups + grp);
    }
  };

  // acc (BF16) or the group's partial (W8A8) += the round's products.
  auto compute_path = [&](const Round& rd, auto& d, auto narrow) {  // d: float[kNT][2][4]
    [[maybe_unused]] constexpr bool kNarrow = decltype(narrow)::value;
#pragma unroll
    for (int u = 0; u < S::kChunks; ++u) {
      uint32_t xw[kNT][8];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        if constexpr (S::kFp8) {
          // a·2^(c-127): a itself for MXFP8, a·2^6 beside block-128's w·2^-112.
          e4m3x16_to_bf16x8<true>(rd.a[u][nt], S::kMx ? 127u : 133u, xw[nt]);
        } else {
          xw[nt][0] = rd.a[u][nt].x; xw[nt][1] = rd.a[u][nt].y; xw[nt][2] = rd.a[u][nt].z; xw[nt][3] = rd.a[u][nt].w;
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t a[2][8];
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const uint4& raw = rd.w[u][2 * mt + hh];
          if constexpr (S::kMx) {
            e4m3x16_to_bf16x8<kNarrow>(raw, rd.code[u][2 * mt + hh], a[hh]);
          } else if constexpr (S::kFp8) {
            e4m3x16_to_bf16x8_pow2(raw, a[hh]);
          } else {
            a[hh][0] = raw.x; a[hh][1] = raw.y; a[hh][2] = raw.z; a[hh][3] = raw.w;
          }
        }
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int s = 0; s < S::kSteps; ++s)
            mma_bf16(d[nt][mt], a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], xw[nt][2 * s],
                     xw[nt][2 * s + 1]);
      }
    }
  };
  auto compute = [&](const Round& rd, auto& d) {
    uint32_t mc = 0;  // MXFP8: the round's largest scale code (no codes otherwise)
    if constexpr (S::kMx) {
#pragma unroll
      for (int u = 0; u < S::kChunks; ++u)
#pragma unroll
        for (int j = 0; j < 4; ++j) mc = max(mc, rd.code[u][j]);
    }
    with_scale_path<S::kMx>(mc, [&](auto narrow) { compute_path(rd, d, narrow); });
  };

  // C fragment: d[nt][mt][c] is weight row n0 + 16mt + g + 8(c/2), token
  // 8nt + 2q + c%2.
  float acc[kNT][2][4] = {};
  auto promote = [&](const auto& t, const Round& rd) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float sa = rd.sa[nt][c % 2];
          float& v = acc[nt][mt][c];
          if constexpr (S::kMx) v = __fmaf_rn(t[nt][mt][c], sa, v);
          else v = __fmaf_rn(t[nt][mt][c] * 0x1p106f, rd.ws * sa, v);  // × 2^106: exact
        }
  };

  // Two buffers used alternately, one round in flight while the other is
  // computed. The weights of the first round are requested before the wait
  // for the previous kernel (PDL): they are layer inputs. Loads are never
  // conditional (see moe_gate_up_tc.cu: a conditional load made the
  // compiler wait on it at a register move).
  Round ra, rb;
  load_w(ra, 0);
  wait_for_previous_kernel();
  allow_next_kernel();
  load_a(ra, 0);
  // BF16 accumulates straight into acc; W8A8 sums a group alone, then promotes.
  auto consume = [&](const Round& rd) {
    if constexpr (S::kFp8) {
      float t[kNT][2][4] = {};
      compute(rd, t);
      promote(t, rd);
    } else {
      compute(rd, acc);
    }
  };
  for (int r = 0;; r += 2) {
    load_w(rb, r + 1);
    load_a(rb, r + 1);
    consume(ra);
    if (r + 1 >= nr) break;
    load_w(ra, r + 2);
    load_a(ra, r + 2);
    consume(rb);
    if (r + 2 >= nr) break;
  }

  // The S K ranges' partials, summed in warp order; then 16-byte stores of
  // the (kT tokens × 32 rows) tile, one row segment of a token per lane.
#pragma unroll
  for (int j = 0; j < kNT * 8; ++j) s_part[warp][j][lane] = acc[j / 8][(j / 4) % 2][j % 4];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kNT * 8; ++j) {
    float v = s_part[0][j][lane];
    for (int s = 1; s < slices; ++s) v += s_part[s][j][lane];
    const int nt = j / 8, mt = (j / 4) % 2, c = j % 4;
    s_out[8 * nt + 2 * q + c % 2][16 * mt + g + 8 * (c / 2)] = v;
  }
  __syncwarp();
  store_tile_16b<kRows>(&s_out[0][0], kT, row0, p.rows, n0, N, p.out, p.out_fp32 != 0, lane, kWarpSize);
}

template <WeightFormat F, int kT>
void launch(const GroupedGemmParams& p, cudaStream_t stream, bool pdl) {
  using S = Stream<F, kT>;
  auto kernel = &stream_gemm_kernel<F, kT>;
  // Warps the device holds at once (one-warp blocks: the register limit).
  const long resident_warps = resident_blocks(kernel, kWarpSize, 0);
  const long tiles = long(p.n / kRows) * p.max_blocks;
  // Slices (warps per block, one K range each): k_split.h, in rounds, with 4
  // warps as the base.
  const int slices = choose_k_slices(p.k / S::kRoundElems, 1, 4, S::kMaxWarps, tiles, 1, resident_warps);
  const dim3 grid(unsigned(p.n / kRows), unsigned(p.max_blocks));
  launch_kernel(kernel, grid, dim3(unsigned(slices * kWarpSize)), 0, stream, pdl, p);
}

}  // namespace

// The rules stream_gemm_fits applies (classical_fits.cpp).
static_assert(kRows == kStreamGemmRows && kGroup == kStreamGemmGroup &&
                  Stream<WeightFormat::kBF16, 8>::kRoundElems == kStreamGemmBf16RoundElems &&
                  Stream<WeightFormat::kBF16, 16>::kRoundElems == kStreamGemmBf16RoundElems,
              "classical_fits.h: the stream kernel's tile");

namespace {
template <WeightFormat F>
void launch_tokens(const GroupedGemmParams& p, int tile_tokens, cudaStream_t stream, bool pdl) {
  if (tile_tokens == 16) return launch<F, 16>(p, stream, pdl);
  return launch<F, 8>(p, stream, pdl);
}
}  // namespace

void stream_gemm(const GroupedGemmParams& p, WeightFormat format, int tile_tokens, cudaStream_t stream, bool pdl) {
  WD_CHECK(stream_gemm_fits(format, p.n, p.k), "classical GEMM: the stream kernel needs N % 32 == 0 and K % ",
           format == WeightFormat::kBF16 ? 64 : 128, " == 0 (N = ", p.n, ", K = ", p.k,
           "); use the mma.sync kernel");
  WD_CHECK(tile_tokens == 8 || tile_tokens == 16, "classical GEMM: the stream kernel takes tile_tokens 8 or 16, not ",
           tile_tokens);
  switch (format) {
    case WeightFormat::kBF16: return launch_tokens<WeightFormat::kBF16>(p, tile_tokens, stream, pdl);
    case WeightFormat::kFP8Block128: return launch_tokens<WeightFormat::kFP8Block128>(p, tile_tokens, stream, pdl);
    case WeightFormat::kMXFP8: return launch_tokens<WeightFormat::kMXFP8>(p, tile_tokens, stream, pdl);
  }
  throw InvalidArgument("classical GEMM: unknown weight format");
}

}  // namespace wd::kernels
