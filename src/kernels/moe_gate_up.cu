#include "kernels/moe_gate_up.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kUnroll = 2;  // 16-byte chunks per lane per row loaded before use

template <typename Codec, int kTokens, int kNeurons>
__global__ void __launch_bounds__(kThreads)
moe_gate_up_kernel(const __grid_constant__ GateUpParams p) {
  constexpr int kC = Codec::kChunkElems;
  constexpr int kRows = 2 * kNeurons;  // gate n, up n for each neuron n
  // moe_down may be scheduled as soon as every block of this grid has started;
  // it waits (griddepcontrol.wait) for our completion before reading h.
  pdl_trigger();
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
    const int i0 = ((blockIdx.x * p.neurons_per_warp + nw) * kWarps + warp) * kNeurons;
    if (i0 >= I) break;
    const uint8_t* rp[kRows];
    const uint8_t* sp[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = min(i0 + r / 2, I - 1);  // I % kNeurons == 0 is validated; min() is belt and braces
      const size_t row = size_t(e) * 2 * I + (r % 2 ? I : 0) + i;
      rp[r] = w + row * row_bytes;
      sp[r] = Codec::kScaled ? p.scales + row * (H / kMxBlock) : nullptr;
    }

    for (int t0 = 0; t0 < n; t0 += kTokens) {
      const int nt = min(kTokens, n - t0);
      const uint16_t* xs[kTokens];
      int entry[kTokens];
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        entry[t] = s_list[t0 + min(t, nt - 1)];
        xs[t] = p.x + size_t(entry[t] / p.top_k) * H;
      }
      float acc[kTokens][kRows];
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

      for (int c0 = 0; c0 < chunks; c0 += kUnroll * kWarpSize) {
        uint4 raw[kUnroll][kRows];
        float sc[kUnroll][kRows];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * kWarpSize + lane;
          if (c < chunks)
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              raw[u][r] = ld_stream(rp[r] + size_t(c) * 16);
              if constexpr (Codec::kScaled) sc[u][r] = chunk_scale(sp[r], c);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * kWarpSize + lane;
          if (c >= chunks) break;
          float wv[kRows][kC];
#pragma unroll
          for (int r = 0; r < kRows; ++r) Codec::decode(raw[u][r], wv[r]);
#pragma unroll
          for (int t = 0; t < kTokens; ++t) {
            if (t >= nt) break;
            float a[kC];
            load_bf16_activations(xs[t], c * kC, a);
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              if constexpr (Codec::kScaled) {
                acc[t][r] = __fmaf_rn(chunk_dot(wv[r], a), sc[u][r], acc[t][r]);
              } else {
#pragma unroll
                for (int j = 0; j < kC; ++j) acc[t][r] = __fmaf_rn(wv[r][j], a[j], acc[t][r]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= nt) break;
#pragma unroll
        for (int nn = 0; nn < kNeurons; ++nn) {
          const float g = warp_sum(acc[t][2 * nn]);
          const float u = warp_sum(acc[t][2 * nn + 1]);
          if (lane == 0) p.h[size_t(entry[t]) * I + i0 + nn] = silu(g) * u;
        }
      }
    }
  }
}

template <typename Codec, int kTokens, int kNeurons>
void launch_variant(const GateUpParams& p, cudaStream_t stream) {
  const int entries = p.batch * p.top_k;
  const int slots = entries < p.experts ? entries : p.experts;
  const int per_block = kWarps * kNeurons * p.neurons_per_warp;
  const dim3 grid((p.intermediate + per_block - 1) / per_block, slots);
  const size_t smem = size_t(entries) * sizeof(int32_t);
  auto* k = &moe_gate_up_kernel<Codec, kTokens, kNeurons>;
  if (smem > 48 * 1024)
    WD_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  k<<<grid, kThreads, smem, stream>>>(p);
  WD_CUDA_CHECK_LAUNCH();
}

template <typename Codec>
void launch(const GateUpParams& p, cudaStream_t stream) {
  if (p.tokens_per_pass == 1) {
    if (p.neurons_together == 2) launch_variant<Codec, 1, 2>(p, stream);
    else launch_variant<Codec, 1, 1>(p, stream);
  } else {
    if (p.neurons_together == 2) launch_variant<Codec, 4, 2>(p, stream);
    else launch_variant<Codec, 4, 1>(p, stream);
  }
}

}  // namespace

void moe_gate_up(const GateUpParams& p, WeightFormat format, cudaStream_t stream) {
  WD_CHECK(p.batch >= 1, "moe_gate_up: batch = ", p.batch, " must be >= 1");
  WD_CHECK(p.hidden > 0 && p.hidden % kMxBlock == 0, "moe_gate_up: H = ", p.hidden,
           " must be a positive multiple of 32");
  WD_CHECK(p.intermediate > 0 && p.intermediate % 2 == 0, "moe_gate_up: I = ", p.intermediate,
           " must be a positive even number");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxExperts, "moe_gate_up: E = ", p.experts,
           " must be in [1, ", kMaxExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= 16, "moe_gate_up: K = ", p.top_k, " must be in [1, 16]");
  WD_CHECK(p.tokens_per_pass == 1 || p.tokens_per_pass == 4, "moe_gate_up: tokens_per_pass = ",
           p.tokens_per_pass, " (allowed: 1, 4)");
  WD_CHECK(p.neurons_together == 1 || p.neurons_together == 2, "moe_gate_up: neurons_together = ",
           p.neurons_together, " (allowed: 1, 2)");
  WD_CHECK(p.neurons_per_warp >= 1, "moe_gate_up: neurons_per_warp must be >= 1");
  WD_CHECK(size_t(p.batch) * p.top_k * sizeof(int32_t) <= 200 * 1024, "moe_gate_up: batch ",
           p.batch, " × top-k ", p.top_k, " routing entries exceed the block's shared memory");
  WD_CHECK(p.weights && p.x && p.ids && p.h, "moe_gate_up: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || p.scales, "moe_gate_up: MXFP8 needs scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "moe_gate_up: weights and x must be 16-byte aligned");
  switch (format) {
    case WeightFormat::kBF16: launch<Bf16Codec>(p, stream); break;
    case WeightFormat::kMXFP8:
      if (p.mx8_int_decode) launch<Mx8Codec<Mx8Decode::kInt>>(p, stream);
      else launch<Mx8Codec<Mx8Decode::kCvt>>(p, stream);
      break;
    default: throw InvalidArgument(detail::concat("moe_gate_up: weight format ", to_string(format), " is not supported by warp decode"));
  }
}

}  // namespace wd::kernels
