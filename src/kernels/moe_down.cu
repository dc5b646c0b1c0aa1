#include "kernels/moe_down.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRows = 2;   // output rows per warp: h chunks are reused across them
constexpr int kSeg = 2;    // 16-byte chunks per lane per row in flight per step
constexpr int kMaxTileEntries = 32 * 16;  // tokens_per_tile · K

// Sort key of a routing entry of the tile: expert in the high bits, then the
// entry's local index t·K + k, so ascending keys visit experts in ascending
// id and, for one token, its slots in ascending order.
__device__ __forceinline__ int entry_key(int expert, int local) { return (expert << 16) | local; }

template <typename Codec, int kTokens>
__global__ void __launch_bounds__(kThreads)
moe_down_kernel(const __grid_constant__ DownParams p) {
  constexpr int kC = Codec::kChunkElems;
  __shared__ int s_keys[kMaxTileEntries];
  __shared__ int s_sorted[kMaxTileEntries];
  __shared__ int s_group_end[kMaxTileEntries];

  const int K = p.top_k, H = p.hidden, I = p.intermediate;
  const int tile0 = blockIdx.x * kTokens;
  const int nt = min(kTokens, p.batch - tile0);
  const int n = nt * K;

  // Sort the tile's entries by (expert, token, slot): rank sort, keys unique.
  for (int j = threadIdx.x; j < n; j += blockDim.x) s_keys[j] = entry_key(__ldg(p.ids + tile0 * K + j), j);
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const int key = s_keys[j];
    int rank = 0;
    for (int m = 0; m < n; ++m) rank += s_keys[m] < key;
    s_sorted[rank] = key;
  }
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const int ex = s_sorted[j] >> 16;
    int end = j + 1;
    while (end < n && (s_sorted[end] >> 16) == ex) ++end;
    s_group_end[j] = end;
  }
  __syncthreads();

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int d0 = (blockIdx.y * kWarps + warp) * kRows;
  if (d0 >= H) return;
  const int chunks = I / kC;
  const int segs = (chunks + kSeg * kWarpSize - 1) / (kSeg * kWarpSize);
  const auto* w = static_cast<const uint8_t*>(p.weights);
  const size_t row_bytes = size_t(I) * Codec::kElemBytes;

  float acc[kTokens][kRows];
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

  // Loads of one step: kRows rows × kSeg chunks of expert `ex`, segment `sg`.
  auto load_step = [&](int ex, int sg, uint4 (&raw)[kRows][kSeg], float (&sc)[kRows][kSeg]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const size_t row = size_t(ex) * H + d0 + r;
#pragma unroll
      for (int s = 0; s < kSeg; ++s) {
        const int c = (sg * kSeg + s) * kWarpSize + lane;
        if (c < chunks) {
          raw[r][s] = ld_stream(w + row * row_bytes + size_t(c) * 16);
          if constexpr (Codec::kScaled) sc[r][s] = chunk_scale(p.scales + row * (I / kMxBlock), c);
        }
      }
    }
  };

  uint4 cur[kRows][kSeg], nxt[kRows][kSeg];
  float cur_s[kRows][kSeg], nxt_s[kRows][kSeg];
  int j = 0, sg = 0;
  if (n > 0) load_step(s_sorted[0] >> 16, 0, cur, cur_s);
  // Everything above reads only routing and weights; h is moe_gate_up's output.
  if (p.programmatic_launch) pdl_wait();
  while (j < n) {
    const int jend = s_group_end[j];
    // Prefetch the next step (next segment of this expert, or the next expert).
    int nj = j, nsg = sg + 1;
    if (nsg == segs) {
      nsg = 0;
      nj = jend;
    }
    if (nj < n) load_step(s_sorted[nj] >> 16, nsg, nxt, nxt_s);

    for (int jj = j; jj < jend; ++jj) {
      const int local = s_sorted[jj] & 0xFFFF;
      const int t = local / K;
      const int bk = (tile0 + t) * K + local % K;
      const float rw = __ldg(p.route_w + bk);
      const float* hrow = p.h + size_t(bk) * I;
      float part[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) part[r] = 0.0f;
#pragma unroll
      for (int s = 0; s < kSeg; ++s) {
        const int c = (sg * kSeg + s) * kWarpSize + lane;
        if (c >= chunks) break;
        float a[kC];
        load_f32(hrow, c * kC, a);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float wv[kC];
          Codec::decode(cur[r][s], wv);
          if constexpr (Codec::kScaled) {
            part[r] = __fmaf_rn(chunk_dot(wv, a), cur_s[r][s], part[r]);
          } else {
#pragma unroll
            for (int q = 0; q < kC; ++q) part[r] = __fmaf_rn(wv[q], a[q], part[r]);
          }
        }
      }
      // acc[t] with a run-time t: select statically so acc stays in registers.
#pragma unroll
      for (int tt = 0; tt < kTokens; ++tt)
        if (tt == t)
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[tt][r] = __fmaf_rn(rw, part[r], acc[tt][r]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int s = 0; s < kSeg; ++s) {
        cur[r][s] = nxt[r][s];
        cur_s[r][s] = nxt_s[r][s];
      }
    j = nj;
    sg = nsg;
  }

#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= nt) break;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = warp_sum(acc[t][r]);
      if (lane == ((t * kRows + r) & (kWarpSize - 1))) {
        const size_t o = size_t(tile0 + t) * H + d0 + r;
        if (p.out_fp32) {
          float out = v;
          if (p.residual) out += static_cast<const float*>(p.residual)[o];
          static_cast<float*>(p.y)[o] = out;
        } else {
          float out = v;
          if (p.residual) out += bf16_to_float(static_cast<const uint16_t*>(p.residual)[o]);
          static_cast<uint16_t*>(p.y)[o] = float_to_bf16(out);
        }
      }
    }
  }
}

template <typename Codec, int kTokens>
void launch_tile(const DownParams& p, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((p.batch + kTokens - 1) / kTokens, (p.hidden + kWarps * kRows - 1) / (kWarps * kRows));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = p.programmatic_launch ? 1 : 0;
  WD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, moe_down_kernel<Codec, kTokens>, p));
}

template <typename Codec>
void launch(const DownParams& p, cudaStream_t stream) {
  switch (p.tokens_per_tile) {
    case 1: launch_tile<Codec, 1>(p, stream); break;
    case 8: launch_tile<Codec, 8>(p, stream); break;
    default: launch_tile<Codec, 32>(p, stream); break;
  }
}

}  // namespace

void moe_down(const DownParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1, "moe_down: batch = ", p.batch, " must be >= 1");
  WD_CHECK(p.intermediate > 0 && p.intermediate % kMxBlock == 0, "moe_down: I = ",
           p.intermediate, " must be a positive multiple of 32");
  WD_CHECK(p.hidden > 0 && p.hidden % kRows == 0, "moe_down: H = ", p.hidden,
           " must be a positive multiple of ", kRows);
  WD_CHECK(p.experts >= 1 && p.experts < (1 << 15), "moe_down: E = ", p.experts, " out of range");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_down: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(p.tokens_per_tile == 1 || p.tokens_per_tile == 8 || p.tokens_per_tile == 32,
           "moe_down: tokens_per_tile = ", p.tokens_per_tile, " (allowed: 1, 8, 32)");
  WD_CHECK(p.weights && p.h && p.ids && p.route_w && p.y, "moe_down: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || p.scales, "moe_down: MXFP8 needs scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.h)) % 16 == 0,
           "moe_down: weights and h must be 16-byte aligned");
  switch (format) {
    case WeightFormat::kBF16: launch<Bf16Codec>(p, stream); break;
    case WeightFormat::kMXFP8:
      if (p.mx8_int_decode) launch<Mx8Codec<Mx8Decode::kInt>>(p, stream);
      else launch<Mx8Codec<Mx8Decode::kCvt>>(p, stream);
      break;
    default: throw InvalidArgument(detail::concat("moe_down: weight format ", to_string(format), " is not supported by warp decode"));
  }
}

}  // namespace wd::kernels
