#include "kernels/moe_down.cuh"

#include <climits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "kernels/moe_down_store.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kMaxTopK = 16;

// kRows output rows per warp share each h chunk (loaded once, used kRows
// times): 1 for the smallest batches, where more warps mean more loads in
// flight, 4 for larger ones, where h traffic through L2 would otherwise rival
// the weights (measured: docs/PERF_LOG.md). Rounds of kRound chunks per lane
// per row are double-buffered: 2·kRound·kRows 16-byte loads in flight (4
// chunks at one row per warp; at four rows 2 for BF16 and 1 for MXFP8, whose
// decode would otherwise take the kernel past 128 registers). kRound does not
// change which lane sums which chunk, nor the order: the bits are the same.

template <typename Codec, int kRows>
__global__ void __launch_bounds__(kThreads)
moe_down_kernel(const __grid_constant__ DownParams p) {
  constexpr int kC = Codec::kChunkElems;
  constexpr int kRound = kRows == 1 ? 4 : Codec::kScaled ? 1 : 2;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int b = blockIdx.x, K = p.top_k, H = p.hidden, I = p.intermediate;

  // The token's slots sorted by (expert, slot), per warp (no block barrier):
  // lane j < K ends up holding sorted entry j.
  int my_expert, my_bk;
  float my_w;
  {
    // Both loads go out together: the routing weight is not on the sort's path.
    const int e = lane < K ? __ldg(p.ids + b * K + lane) : INT_MAX;
    const float wv = lane < K ? __ldg(p.route_w + b * K + lane) : 0.0f;
    int rank = 0;
    for (int m = 0; m < K; ++m) {
      const int om = __shfl_sync(kFullMask, e, m);
      rank += (om < e) || (om == e && m < lane);
    }
    // Scatter by rank through shuffles: lane r takes the entry whose rank is r.
    my_expert = INT_MAX;
    my_bk = 0;
    my_w = 0.0f;
    for (int m = 0; m < K; ++m) {
      const int rm = __shfl_sync(kFullMask, rank, m);
      const int em = __shfl_sync(kFullMask, e, m);
      const float wm = __shfl_sync(kFullMask, wv, m);
      if (lane == rm) {
        my_expert = em;
        my_bk = b * K + m;
        my_w = wm;
      }
    }
  }

  const int d0 = (blockIdx.y * kWarps + warp) * kRows;
  const int chunks = I / kC;          // per row
  const int total = K * chunks;       // the warp's flat list of chunks
  const auto* w = static_cast<const uint8_t*>(p.weights);
  const size_t row_bytes = size_t(I) * Codec::kElemBytes;
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);

  // L2 prefetch of the warp's rows of the experts of sorted slots [from, to):
  // lane j holds slot j, whose kRows rows d0.. form one contiguous block.
  const int nrows = min(kRows, H - d0);
  auto prefetch_slots = [&](int from, int to) {
    if (lane >= from && lane < to && nrows > 0) {
      const size_t row = size_t(my_expert) * H + d0;
      prefetch_l2(w + row * row_bytes, uint32_t(nrows * row_bytes));
      if constexpr (Codec::kScaled) prefetch_l2(p.scales + row * (I / kMxBlock), uint32_t(nrows * (I / kMxBlock)));
    }
  };

  // One round: kRound chunks per lane of each of the kRows rows, with the
  // entry (sorted slot) and chunk index of each.
  // Loads are unconditional (past the end of the list a lane re-reads the
  // last chunk, and its product is added as an exact zero): a load under a
  // condition makes the compiler merge the buffer's old and new values with
  // register moves, and a move of a register with a load in flight waits for
  // the load. Scales stay raw E8M0 codes until they are used, for the same
  // reason.
  struct Round {
    uint4 raw[kRound][kRows];
    uint32_t sc[kRound][kRows];
    int jj[kRound], cc[kRound];
  };
  auto load_round = [&](int base, Round& rd) {
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int q = min(base + u * kWarpSize + lane, total - 1);
      rd.jj[u] = q / chunks;
      rd.cc[u] = q - rd.jj[u] * chunks;
      const int ex = __shfl_sync(kFullMask, my_expert, rd.jj[u] & (kWarpSize - 1));
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const size_t row = size_t(ex) * H + min(d0 + r, H - 1);
        rd.raw[u][r] = ld_stream(w + row * row_bytes + size_t(rd.cc[u]) * 16, pol);
        if constexpr (Codec::kScaled) rd.sc[u][r] = ld_byte(p.scales + row * (I / kMxBlock) + (rd.cc[u] >> 1));
      }
    }
  };

  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
  constexpr int kStep = kRound * kWarpSize;
  // Double buffering: the next round is in flight while this one is computed.
  Round cur, nxt;
  load_round(0, cur);
  int prefetched = 0;  // sorted slots [0, prefetched) have been asked for
  auto prefetch_ahead = [&](int chunk) {
    if (p.prefetch_experts == 0) return;
    const int want = min(K, chunk / chunks + 1 + p.prefetch_experts);
    if (want > prefetched) {
      prefetch_slots(prefetched, want);
      prefetched = want;
    }
  };
  prefetch_ahead(0);
  // Everything above reads only routing and weights; h is moe_gate_up's output.
  if (p.programmatic_launch) wait_for_previous_kernel();
  allow_next_kernel();  // the next layer's router streams its weights while this layer ends
  // Token b's h (K, I): staged once per block in shared memory, or read from
  // global memory by each warp (every warp of the block reads all of it).
  const float* hb = p.h + size_t(b) * K * I;
  if (p.stage_h) {
    extern __shared__ float4 s_h4[];
    const float4* src = reinterpret_cast<const float4*>(hb);
    for (int i = threadIdx.x; i < K * I / 4; i += kThreads) s_h4[i] = __ldg(src + i);
    __syncthreads();
    hb = reinterpret_cast<const float*>(s_h4);
  }
  // One round computed: each lane's chunks against h, in list order. A lane
  // past the end of the list adds an exact zero (scale 0) instead of
  // branching, so that the next chunk's h loads need not wait for this one.
  auto compute = [&](int base, const Round& rd) {
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int src = rd.jj[u] & (kWarpSize - 1);
      const int bk = __shfl_sync(kFullMask, my_bk, src);
      const float wsrc = __shfl_sync(kFullMask, my_w, src);  // every lane: a shuffle must not diverge
      const float rw = base + u * kWarpSize + lane < total ? wsrc : 0.0f;
      float a[kC];
      load_f32_any(hb + size_t(bk - b * K) * I, rd.cc[u] * kC, a);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float wv[kC];
        Codec::decode(rd.raw[u][r], wv);
        const float scale = Codec::kScaled ? rw * e8m0_to_float(uint8_t(rd.sc[u][r])) : rw;  // exact: 2^k
        acc[r] = __fmaf_rn(chunk_dot(wv, a), scale, acc[r]);
      }
    }
  };
  // Double buffering with two buffers used alternately (never copied).
  for (int base = 0; base < total; base += 2 * kStep) {
    prefetch_ahead(base + kStep);
    load_round(base + kStep, nxt);
    compute(base, cur);
    if (base + kStep >= total) break;
    prefetch_ahead(base + 2 * kStep);
    load_round(base + 2 * kStep, cur);
    compute(base + kStep, nxt);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float v = warp_sum(acc[r]);
    const int d = d0 + r;
    if (lane == r && d < H) store_down_output(p, size_t(b) * H + d, v);
  }
}

template <typename Codec, int kRows>
void launch_rows(const DownParams& p, cudaStream_t stream) {
  const size_t smem = moe_down_smem(p);
  ensure_dynamic_smem(moe_down_kernel<Codec, kRows>, smem);
  launch_kernel(moe_down_kernel<Codec, kRows>, dim3(p.batch, (p.hidden + kWarps * kRows - 1) / (kWarps * kRows)),
                dim3(kThreads), smem, stream, p.programmatic_launch != 0, p);
}

template <typename Codec>
void launch(const DownParams& p, cudaStream_t stream) {
  if (p.rows_per_warp == 1) launch_rows<Codec, 1>(p, stream);
  else launch_rows<Codec, 4>(p, stream);
}

}  // namespace

size_t moe_down_smem(const DownParams& p) {
  return p.stage_h ? size_t(p.top_k) * p.intermediate * sizeof(float) : 0;
}

void check_moe_down(const DownParams& p, WeightFormat format) {
  WD_CHECK(p.batch >= 1 && p.batch <= 65535, "moe_down: batch = ", p.batch, " must be in [1, 65535]");
  WD_CHECK(p.intermediate > 0 && p.intermediate % kMxBlock == 0, "moe_down: I = ",
           p.intermediate, " must be a positive multiple of 32");
  WD_CHECK(p.hidden > 0, "moe_down: H = ", p.hidden, " must be positive");
  WD_CHECK(p.experts >= 1 && p.experts <= 1024, "moe_down: E = ", p.experts, " out of range");
  WD_CHECK(p.top_k >= 1 && p.top_k <= kMaxTopK, "moe_down: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(p.rows_per_warp == 1 || p.rows_per_warp == 4, "moe_down: rows_per_warp = ",
           p.rows_per_warp, " (allowed: 1, 4)");
  WD_CHECK(p.prefetch_experts >= 0, "moe_down: prefetch_experts must be >= 0");
  WD_CHECK(moe_down_smem(p) <= kMoeDownMaxStagedH, "moe_down: staging h of K = ", p.top_k, " × I = ",
           p.intermediate, " needs ", moe_down_smem(p), " bytes of shared memory, more than ", kMoeDownMaxStagedH,
           " (use stage_h = 0)");
  WD_CHECK(p.weights && p.h && p.ids && p.route_w && p.y, "moe_down: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || p.scales, "moe_down: MXFP8 needs scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.h)) % 16 == 0,
           "moe_down: weights and h must be 16-byte aligned");
}

void moe_down(const DownParams& p, WeightFormat format, cudaStream_t stream) {
  check_moe_down(p, format);
  with_codec(format, p.mx8_int_decode != 0, "moe_down",
             [&](auto codec) { launch<decltype(codec)>(p, stream); });
}

}  // namespace wd::kernels
