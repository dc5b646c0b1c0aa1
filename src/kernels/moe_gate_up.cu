#include "kernels/moe_gate_up.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kUnroll = 4;  // 16-byte chunks per lane per row loaded before use

template <WeightFormat F, int kTokens>
__global__ void __launch_bounds__(kThreads)
moe_gate_up_kernel(const __grid_constant__ GateUpParams p) {
  using Codec = WeightCodec<F>;
  constexpr int kC = Codec::kChunkElems;
  extern __shared__ int32_t s_list[];  // (B·K) entries: token·K + slot
  __shared__ uint32_t s_present[kMaxExperts / 32];
  __shared__ int s_warp_counts[kWarps];
  __shared__ int s_expert;

  const int entries = p.batch * p.top_k;
  const int e = find_distinct_expert(p.ids, entries, p.experts, blockIdx.y, s_present, &s_expert);
  if (e < 0) return;
  const int n = collect_entries(p.ids, entries, e, s_list, s_warp_counts);

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int H = p.hidden, I = p.intermediate;
  const int chunks = H / kC;
  const auto* w = static_cast<const uint8_t*>(p.weights);
  const size_t row_bytes = size_t(H) * Codec::kElemBytes;

  for (int nw = 0; nw < p.neurons_per_warp; ++nw) {
    const int i = (blockIdx.x * p.neurons_per_warp + nw) * kWarps + warp;
    if (i >= I) break;
    const size_t gate_row = size_t(e) * 2 * I + i, up_row = gate_row + I;
    const uint8_t* g_ptr = w + gate_row * row_bytes;
    const uint8_t* u_ptr = w + up_row * row_bytes;
    const uint8_t* g_scales = p.scales + gate_row * (H / kMxBlock);
    const uint8_t* u_scales = p.scales + up_row * (H / kMxBlock);

    for (int t0 = 0; t0 < n; t0 += kTokens) {
      const int nt = min(kTokens, n - t0);
      const uint16_t* xs[kTokens];
      int entry[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        entry[t] = s_list[t0 + min(t, nt - 1)];
        xs[t] = p.x + size_t(entry[t] / p.top_k) * H;
      }
      float acc_g[kTokens], acc_u[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) acc_g[t] = acc_u[t] = 0.0f;

      for (int c0 = 0; c0 < chunks; c0 += kUnroll * kWarpSize) {
        uint4 rg[kUnroll], ru[kUnroll];
        float sg[kUnroll], su[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * kWarpSize + lane;
          if (c < chunks) {
            rg[u] = ld_stream(g_ptr + size_t(c) * 16);
            ru[u] = ld_stream(u_ptr + size_t(c) * 16);
            if constexpr (F == WeightFormat::kMXFP8) {
              sg[u] = chunk_scale(g_scales, c);
              su[u] = chunk_scale(u_scales, c);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * kWarpSize + lane;
          if (c >= chunks) break;
          float wg[kC], wu[kC];
          Codec::decode(rg[u], wg);
          Codec::decode(ru[u], wu);
#pragma unroll
          for (int t = 0; t < kTokens; ++t) {
            if (t >= nt) break;
            float a[kC];
            load_bf16_activations(xs[t], c * kC, a);
            if constexpr (F == WeightFormat::kMXFP8) {
              acc_g[t] = __fmaf_rn(chunk_dot(wg, a), sg[u], acc_g[t]);
              acc_u[t] = __fmaf_rn(chunk_dot(wu, a), su[u], acc_u[t]);
            } else {
#pragma unroll
              for (int j = 0; j < kC; ++j) {
                acc_g[t] = __fmaf_rn(wg[j], a[j], acc_g[t]);
                acc_u[t] = __fmaf_rn(wu[j], a[j], acc_u[t]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= nt) break;
        const float g = warp_sum(acc_g[t]);
        const float u = warp_sum(acc_u[t]);
        if (lane == 0) p.h[size_t(entry[t]) * I + i] = silu(g) * u;
      }
    }
  }
}

template <WeightFormat F>
void launch(const GateUpParams& p, cudaStream_t stream) {
  const int entries = p.batch * p.top_k;
  const int slots = entries < p.experts ? entries : p.experts;
  const dim3 grid((p.intermediate + kWarps * p.neurons_per_warp - 1) / (kWarps * p.neurons_per_warp),
                  slots);
  const size_t smem = size_t(entries) * sizeof(int32_t);
  if (p.tokens_per_pass == 1) {
    auto* k = &moe_gate_up_kernel<F, 1>;
    if (smem > 48 * 1024) WD_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    k<<<grid, kThreads, smem, stream>>>(p);
  } else {
    auto* k = &moe_gate_up_kernel<F, 4>;
    if (smem > 48 * 1024) WD_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    k<<<grid, kThreads, smem, stream>>>(p);
  }
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace

void moe_gate_up(const GateUpParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1, "moe_gate_up: batch = ", p.batch, " must be >= 1");
  WD_CHECK(p.hidden > 0 && p.hidden % kMxBlock == 0, "moe_gate_up: H = ", p.hidden,
           " must be a positive multiple of 32");
  WD_CHECK(p.intermediate > 0, "moe_gate_up: I = ", p.intermediate, " must be positive");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "moe_gate_up: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_gate_up: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(p.tokens_per_pass == 1 || p.tokens_per_pass == 4, "moe_gate_up: tokens_per_pass = ",
           p.tokens_per_pass, " (allowed: 1, 4)");
  WD_CHECK(p.neurons_per_warp >= 1, "moe_gate_up: neurons_per_warp must be >= 1");
  WD_CHECK(size_t(p.batch) * p.top_k * sizeof(int32_t) <= 200 * 1024, "moe_gate_up: batch ",
           p.batch, " × top-k ", p.top_k, " routing entries exceed the block's shared memory");
  WD_CHECK(p.weights && p.x && p.ids && p.h, "moe_gate_up: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || p.scales, "moe_gate_up: MXFP8 needs scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "moe_gate_up: weights and x must be 16-byte aligned");
  switch (format) {
    case WeightFormat::kBF16: launch<WeightFormat::kBF16>(p, stream); break;
    case WeightFormat::kMXFP8: launch<WeightFormat::kMXFP8>(p, stream); break;
  }
}

}  // namespace wd::kernels
