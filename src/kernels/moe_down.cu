#include "kernels/moe_down.cuh"

#include <climits>

#include "core/cuda_check.h"
#include "kernels/common.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRound = 12;   // chunks per lane in flight (30B MXFP8: K·I/16/32 = 12, one round)
constexpr int kMaxTopK = 16;

template <typename Codec>
__global__ void __launch_bounds__(kThreads)
moe_down_kernel(const __grid_constant__ DownParams p) {
  constexpr int kC = Codec::kChunkElems;
  __shared__ int s_expert[kMaxTopK];
  __shared__ int s_bk[kMaxTopK];     // b·K + slot of the sorted entry
  __shared__ float s_w[kMaxTopK];

  const int b = blockIdx.x, K = p.top_k, H = p.hidden, I = p.intermediate;
  // The token's slots sorted by (expert, slot): rank sort over K <= 16 lanes.
  if (threadIdx.x < kWarpSize) {
    const int lane = threadIdx.x;
    const int e = lane < K ? __ldg(p.ids + b * K + lane) : INT_MAX;
    const int key_hi = e, key_lo = lane;
    int rank = 0;
    for (int m = 0; m < K; ++m) {
      const int om = __shfl_sync(kFullMask, key_hi, m);
      rank += (om < key_hi) || (om == key_hi && m < key_lo);
    }
    if (lane < K) {
      s_expert[rank] = e;
      s_bk[rank] = b * K + lane;
      s_w[rank] = __ldg(p.route_w + b * K + lane);
    }
  }
  __syncthreads();

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int d = blockIdx.y * kWarps + warp;
  if (d >= H) {
    if (p.programmatic_launch) pdl_wait();
    return;
  }
  const int chunks = I / kC;          // per row
  const int total = K * chunks;       // the warp's flat list of chunks
  const auto* w = static_cast<const uint8_t*>(p.weights);
  const size_t row_bytes = size_t(I) * Codec::kElemBytes;

  float acc = 0.0f;
  bool waited = !p.programmatic_launch;
  for (int base = 0; base < total; base += kRound * kWarpSize) {
    uint4 raw[kRound];
    float sc[kRound];
    int jj[kRound], cc[kRound];
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      const int q = base + u * kWarpSize + lane;
      jj[u] = q / chunks;
      cc[u] = q - jj[u] * chunks;
      if (q < total) {
        const size_t row = size_t(s_expert[jj[u]]) * H + d;
        raw[u] = ld_stream(w + row * row_bytes + size_t(cc[u]) * 16);
        if constexpr (Codec::kScaled) sc[u] = chunk_scale(p.scales + row * (I / kMxBlock), cc[u]);
      }
    }
    // Everything above reads only routing and weights; h is moe_gate_up's output.
    if (!waited) {
      pdl_wait();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kRound; ++u) {
      if (base + u * kWarpSize + lane >= total) break;
      float a[kC], wv[kC];
      load_f32(p.h + size_t(s_bk[jj[u]]) * I, cc[u] * kC, a);
      Codec::decode(raw[u], wv);
      const float scale = Codec::kScaled ? s_w[jj[u]] * sc[u] : s_w[jj[u]];  // exact: sc is 2^k
      acc = __fmaf_rn(chunk_dot(wv, a), scale, acc);
    }
  }
  const float v = warp_sum(acc);
  if (lane == 0) {
    const size_t o = size_t(b) * H + d;
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

template <typename Codec>
void launch(const DownParams& p, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.batch, (p.hidden + kWarps - 1) / kWarps);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = p.programmatic_launch ? 1 : 0;
  WD_CUDA_CHECK(cudaLaunchKernelEx(&cfg, moe_down_kernel<Codec>, p));
}

}  // namespace

void moe_down(const DownParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1 && p.batch <= 65535, "moe_down: batch = ", p.batch, " must be in [1, 65535]");
  WD_CHECK(p.intermediate > 0 && p.intermediate % kMxBlock == 0, "moe_down: I = ",
           p.intermediate, " must be a positive multiple of 32");
  WD_CHECK(p.hidden > 0, "moe_down: H = ", p.hidden, " must be positive");
  WD_CHECK(p.experts >= 1 && p.experts <= 1024, "moe_down: E = ", p.experts, " out of range");
  WD_CHECK(p.top_k >= 1 && p.top_k <= kMaxTopK, "moe_down: K = ", p.top_k, " must be in [1, 16]");
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
    default:
      throw InvalidArgument(detail::concat("moe_down: weight format ", to_string(format),
                                           " is not supported by warp decode"));
  }
}

}  // namespace wd::kernels
