// moe_gate_up on the tensor cores: see moe_tc.cuh for the mapping and the
// numerics, mma.cuh for the fragment layout and the K permutation.
#include "kernels/moe_tc.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/mma.cuh"

namespace wd::kernels {
namespace {

constexpr int kSlices = 4;  // warps per block, each a quarter of H
constexpr int kThreads = kSlices * kWarpSize;
constexpr int kTile = 16;   // neurons per block
constexpr int kTokens = 8;  // tokens per pass (one n8 tile)
constexpr size_t kMaxSmem = 200 * 1024;

// A chunk: one 16-byte load per lane and row; four lanes cover 64 bytes of a
// row, i.e. 32 BF16 or 64 E4M3 weights (two or four k16 steps).
template <bool kMx8>
struct Chunk {
  static constexpr int kElems = kMx8 ? 64 : 32;
  static constexpr int kLaneElems = kElems / 4;
  static constexpr int kSteps = kLaneElems / 4;                       // k16 steps
  static constexpr int kXLoads = kMx8 ? 2 : 1;                        // 16-byte x loads per lane
  static constexpr int kRound = kMx8 ? 1 : 2;                         // chunks per round of loads
};

template <bool kMx8>
__global__ void __launch_bounds__(kThreads)
moe_gate_up_tc_kernel(const __grid_constant__ GateUpParams p, int by_rank) {
  using C = Chunk<kMx8>;
  constexpr int kR = C::kRound;
  extern __shared__ int32_t s_list[];
  __shared__ int s_warp_counts[kSlices];
  __shared__ float s_part[kSlices][8][kWarpSize];

  const int entries = p.batch * p.top_k, H = p.hidden, I = p.intermediate, K = p.top_k;
  // The block's expert. Few entries: that of entry blockIdx.y, unless an
  // earlier entry has it (one load, one barrier). Many (entries > 2E): the
  // blockIdx.y-th distinct expert, so that no grid row is wasted.
  int e;
  if (by_rank) {
    __shared__ uint32_t s_present[kMaxExperts / 32];
    __shared__ int s_expert;
    e = find_distinct_expert(p.ids, entries, p.experts, blockIdx.y, s_present, &s_expert);
    if (e < 0) return;
  } else {
    e = __ldg(p.ids + blockIdx.y);
    bool seen = false;
    for (int i = threadIdx.x; i < int(blockIdx.y); i += blockDim.x) seen |= __ldg(p.ids + i) == e;
    if (__syncthreads_or(seen)) return;
  }

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, q = lane % 4;
  const int i0 = blockIdx.x * kTile;
  const int k0 = warp * (H / kSlices);         // the warp's K range
  const int nc = H / kSlices / C::kElems;      // chunks in it
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);
  const auto* w = static_cast<const uint8_t*>(p.weights);
  constexpr int kElemBytes = kMx8 ? 1 : 2;

  // Rows gate g, gate g+8, up g, up g+8 of the tile; lane q's 16 bytes of
  // chunk c of row r sit at rp[r] + 64·c; its scale at sp[r][2c].
  const uint8_t* rp[4];
  const uint8_t* sp[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const size_t row = size_t(e) * 2 * I + (r >= 2 ? I : 0) + i0 + g + (r % 2) * 8;
    rp[r] = w + (row * H + k0) * kElemBytes + q * 16;
    sp[r] = kMx8 ? p.scales + row * (H / kMxBlock) + (k0 + q * C::kLaneElems) / kMxBlock : nullptr;
  }

  struct Round {
    uint4 a[kR][4];
    uint32_t sc[kR][4];  // raw E8M0 codes: nothing waits on the load until the compute
    uint4 x[kR][C::kXLoads];
  };
  auto load_a = [&](Round& rd, int c0) {
#pragma unroll
    for (int u = 0; u < kR; ++u) {
      const int c = c0 + u;
      if (c < nc)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          rd.a[u][r] = ld_stream(rp[r] + 64 * c, pol);
          if constexpr (kMx8) rd.sc[u][r] = ld_byte(sp[r] + 2 * c);
        }
    }
  };
  // xp: the lane's token's activations at its first element, or null (zeros).
  auto load_x = [&](Round& rd, int c0, const uint16_t* xp) {
#pragma unroll
    for (int u = 0; u < kR; ++u)
#pragma unroll
      for (int j = 0; j < C::kXLoads; ++j)
        rd.x[u][j] = xp && c0 + u < nc ? ld_cached(xp + (c0 + u) * C::kElems + 8 * j) : make_uint4(0, 0, 0, 0);
  };

  Round cur, nxt;
  load_a(cur, 0);  // out before the entry list is built: its latency overlaps that work
  pdl_trigger();
  const int n = collect_entries(p.ids, entries, e, s_list, s_warp_counts);

  for (int t0 = 0; t0 < n; t0 += kTokens) {
    const uint16_t* xp =
        t0 + g < n ? p.x + size_t(s_list[t0 + g] / K) * H + k0 + q * C::kLaneElems : nullptr;
    load_x(cur, 0, xp);
    float acc[2][4] = {};
    for (int c0 = 0; c0 < nc; c0 += kR) {
      if (c0 + kR < nc) {
        load_a(nxt, c0 + kR);
        load_x(nxt, c0 + kR, xp);
      } else if (t0 + kTokens < n) {
        load_a(nxt, 0);  // the next pass of tokens starts over
      }
#pragma unroll
      for (int u = 0; u < kR; ++u) {
        if (c0 + u >= nc) break;
        uint32_t a[4][8], xw[8];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          if constexpr (kMx8) {
            e4m3x16_to_bf16x8(cur.a[u][r], cur.sc[u][r], a[r]);
          } else {
            a[r][0] = cur.a[u][r].x; a[r][1] = cur.a[u][r].y;
            a[r][2] = cur.a[u][r].z; a[r][3] = cur.a[u][r].w;
          }
        }
#pragma unroll
        for (int j = 0; j < C::kXLoads; ++j) {
          xw[4 * j] = cur.x[u][j].x; xw[4 * j + 1] = cur.x[u][j].y;
          xw[4 * j + 2] = cur.x[u][j].z; xw[4 * j + 3] = cur.x[u][j].w;
        }
#pragma unroll
        for (int s = 0; s < C::kSteps; ++s) {
          mma_bf16(acc[0], a[0][2 * s], a[1][2 * s], a[0][2 * s + 1], a[1][2 * s + 1], xw[2 * s], xw[2 * s + 1]);
          mma_bf16(acc[1], a[2][2 * s], a[3][2 * s], a[2][2 * s + 1], a[3][2 * s + 1], xw[2 * s], xw[2 * s + 1]);
        }
      }
      cur = nxt;
    }
    // The four K ranges' partials, summed in warp order.
#pragma unroll
    for (int j = 0; j < 8; ++j) s_part[warp][j][lane] = acc[j / 4][j % 4];
    __syncthreads();
    if (warp == 0) {
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[j] = s_part[0][j][lane];
#pragma unroll
        for (int s = 1; s < kSlices; ++s) v[j] += s_part[s][j][lane];
      }
      // C fragment: v[c] is row g + 8·(c/2), column 2q + c%2; gate v[0..3], up v[4..7].
      // h is stored split (mma.cuh split_bf16): per entry, I BF16 hi then I BF16 lo.
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int col = t0 + 2 * q + c % 2;
        if (col < n) {
          uint16_t* hrow = reinterpret_cast<uint16_t*>(p.h) + size_t(s_list[col]) * 2 * I + i0 + g + 8 * (c / 2);
          split_bf16(silu(v[c]) * v[4 + c], hrow[0], hrow[I]);
        }
      }
    }
    __syncthreads();
  }
}

template <bool kMx8>
void launch(const GateUpParams& p, cudaStream_t stream) {
  const int entries = p.batch * p.top_k;
  const int by_rank = entries > 2 * p.experts;
  const dim3 grid(p.intermediate / kTile, by_rank ? p.experts : entries);
  const size_t smem = size_t(entries) * sizeof(int32_t);
  auto* k = &moe_gate_up_tc_kernel<kMx8>;
  WD_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  k<<<grid, kThreads, smem, stream>>>(p, by_rank);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool tensor_core_shape_ok(int hidden, int intermediate) {
  return hidden > 0 && hidden % (kSlices * 64) == 0 && down_tc_slices(intermediate) > 0;
}

void moe_gate_up_tc(const GateUpParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1, "moe_gate_up_tc: batch = ", p.batch, " must be >= 1");
  WD_CHECK(tensor_core_shape_ok(p.hidden, p.intermediate), "moe_gate_up_tc: H = ", p.hidden, ", I = ",
           p.intermediate, " do not fit the tensor-core kernels (H % 256 == 0, I % 64 == 0, I <= 2048 or "
           "I/64 splitting into <= 16 equal ranges); use the scalar kernels (tensor_cores = false)");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "moe_gate_up_tc: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_gate_up_tc: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(size_t(p.batch) * p.top_k * sizeof(int32_t) <= kMaxSmem, "moe_gate_up_tc: batch ", p.batch,
           " × top-k ", p.top_k, " routing entries do not fit in shared memory");
  WD_CHECK(p.weights && p.x && p.ids && p.h, "moe_gate_up_tc: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || (format == WeightFormat::kMXFP8 && p.scales),
           "moe_gate_up_tc: weights must be BF16, or MXFP8 with scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "moe_gate_up_tc: weights and x must be 16-byte aligned");
  if (format == WeightFormat::kBF16) launch<false>(p, stream);
  else launch<true>(p, stream);
}

}  // namespace wd::kernels
