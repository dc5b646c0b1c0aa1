#include "kernels/moe_gate_up.cuh"

#include "core/cuda_check.h"
#include "kernels/common.cuh"
#include "kernels/expert_lists.cuh"
#include "kernels/launch.cuh"

namespace wd::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kRows = 4;    // gate and up rows of two neurons
constexpr size_t kMaxSmem = kMoeGateUpMaxSmem;

// kUnroll: 16-byte chunks per lane per row in one round of loads. The next
// round is always in flight while the current one is computed (double
// buffering), so a warp keeps 2·kUnroll·kRows 16-byte loads outstanding.
// Registers: at most 128 (two blocks, 16 warps per SM), or 80 with one
// token and kUnroll = 1 (three blocks, 24 warps: more warps to hide the
// decode latency, fewer loads each).
template <typename Codec, int kTokens, int kUnroll>
__global__ void __launch_bounds__(kThreads, (kTokens == 1 && kUnroll == 1) ? 3 : 2)
moe_gate_up_kernel(const __grid_constant__ GateUpParams p) {
  constexpr int kC = Codec::kChunkElems;
  constexpr int kQuarters = kC / 4;
  extern __shared__ __align__(16) unsigned char s_dyn[];
  __shared__ int s_warp_counts[kWarps];

  const int entries = p.batch * p.top_k;
  const int H = p.hidden, I = p.intermediate;
  int32_t* s_list = reinterpret_cast<int32_t*>(s_dyn);
  float* s_x = reinterpret_cast<float*>(s_dyn + ((size_t(entries) * sizeof(int32_t) + 15) / 16) * 16);

  // The block's expert: that of entry blockIdx.y, unless an earlier entry has it.
  const int e = __ldg(p.ids + blockIdx.y);
  if (block_has_id(p.ids, blockIdx.y, e)) return;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int chunks = H / kC;
  const auto* w = static_cast<const uint8_t*>(p.weights);
  const size_t row_bytes = size_t(H) * Codec::kElemBytes;
  const uint64_t pol = l2_stream_policy(p.evict_first != 0);

  // The four rows of neuron pair nw of this warp, and one round of their loads.
  auto rows_of = [&](int nw, const uint8_t* (&rp)[kRows], const uint8_t* (&sp)[kRows]) {
    const int i0 = ((blockIdx.x * p.neurons_per_warp + nw) * kWarps + warp) * 2;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const size_t row = size_t(e) * 2 * I + (r % 2 ? I : 0) + min(i0 + r / 2, I - 1);
      rp[r] = w + row * row_bytes;
      sp[r] = Codec::kScaled ? p.scales + row * (H / kMxBlock) : nullptr;
    }
    return i0;
  };
  auto load_round = [&](const uint8_t* const (&rp)[kRows], const uint8_t* const (&sp)[kRows], int c0,
                        uint4 (&raw)[kUnroll][kRows], float (&sc)[kUnroll][kRows]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * kWarpSize + lane;
      if (c < chunks)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          raw[u][r] = ld_stream(rp[r] + size_t(c) * 16, pol);
          if constexpr (Codec::kScaled) sc[u][r] = chunk_scale(sp[r], c);
        }
    }
  };

  // L2 prefetch of neuron pair nw's rows: gate rows i0, i0 + 1 and up rows
  // i0, i0 + 1 are two contiguous blocks (i0 and I even), plus their scales.
  auto prefetch_pair = [&](int nw) {
    if (lane != 0 || nw >= p.neurons_per_warp) return;
    const int i0 = ((blockIdx.x * p.neurons_per_warp + nw) * kWarps + warp) * 2;
    if (i0 >= I) return;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const size_t row = size_t(e) * 2 * I + (half ? I : 0) + i0;
      prefetch_l2(w + row * row_bytes, uint32_t(2 * row_bytes));
      if constexpr (Codec::kScaled) prefetch_l2(p.scales + row * (H / kMxBlock), uint32_t(2 * (H / kMxBlock)));
    }
  };

  // The first round of weight loads goes out before the rest of the set-up
  // (entry list, activation staging): its latency overlaps that work.
  // Invariant below: raw/sc hold the round about to be computed.
  uint4 raw[kUnroll][kRows], nxt[kUnroll][kRows];
  float sc[kUnroll][kRows], nsc[kUnroll][kRows];
  {
    const uint8_t* rp[kRows];
    const uint8_t* sp[kRows];
    if (rows_of(0, rp, sp) < I) load_round(rp, sp, 0, raw, sc);
  }
  for (int nw = 0; nw < p.prefetch_pairs; ++nw) prefetch_pair(nw);
  allow_next_kernel();
  const int n = collect_entries(p.ids, entries, e, s_list, s_warp_counts);
  const int step = kUnroll * kWarpSize;

  for (int t0 = 0; t0 < n; t0 += kTokens) {
    const int nt = min(kTokens, n - t0);
    // Stage this pass's activations as FP32 (exact): one read of x per block.
    __syncthreads();
    for (int idx = threadIdx.x; idx < nt * (H / 8); idx += blockDim.x) {
      const int t = idx / (H / 8), c = idx % (H / 8);
      float a[8];
      load_bf16_activations(p.x + size_t(s_list[t0 + t] / p.top_k) * H, 8 * c, a);
      float4* dst = reinterpret_cast<float4*>(s_x + size_t(t) * H + 8 * c);
      dst[0] = make_float4(a[0], a[1], a[2], a[3]);
      dst[1] = make_float4(a[4], a[5], a[6], a[7]);
    }
    __syncthreads();

    for (int nw = 0; nw < p.neurons_per_warp; ++nw) {
      const uint8_t* rp[kRows];
      const uint8_t* sp[kRows];
      const int i0 = rows_of(nw, rp, sp);
      if (i0 >= I) break;
      if (t0 == 0 && p.prefetch_pairs > 0) prefetch_pair(nw + p.prefetch_pairs);
      float acc[kTokens][kRows];
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[t][r] = 0.0f;

      for (int c0 = 0; c0 < chunks; c0 += step) {
        // Issue the next round: the rest of these rows, else the next neuron
        // pair, else the first pair again for the next pass of tokens.
        {
          int nnw = nw, nc0 = c0 + step;
          bool next = true;
          const uint8_t* rp2[kRows];
          const uint8_t* sp2[kRows];
          if (nc0 >= chunks) {
            nc0 = 0;
            nnw = nw + 1;
            if (nnw >= p.neurons_per_warp || rows_of(nnw, rp2, sp2) >= I) {
              nnw = 0;
              next = t0 + kTokens < n;
            }
          }
          if (next) {
            rows_of(nnw, rp2, sp2);
            load_round(rp2, sp2, nc0, nxt, nsc);
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * kWarpSize + lane;
          if (c >= chunks) break;
          // A chunk's products are summed into part in element order; MXFP8
          // then scales the chunk's sum once. Scaling by a power of two
          // commutes with every rounding (barring underflow), so part · 2^k
          // is exactly the FP32 sum of the chunk's exactly dequantized
          // products, at one multiply per 16 weights. BF16 chains straight
          // into acc. Every variant uses this same order (batch invariance).
          float part[kTokens][kRows];
#pragma unroll
          for (int t = 0; t < kTokens; ++t)
#pragma unroll
            for (int r = 0; r < kRows; ++r) part[t][r] = Codec::kScaled ? 0.0f : acc[t][r];
#pragma unroll
          for (int qt = 0; qt < kQuarters; ++qt) {
            float a[kTokens][4];
#pragma unroll
            for (int t = 0; t < kTokens; ++t) {
              if (t >= nt) break;
              const float4 v = *reinterpret_cast<const float4*>(s_x + size_t(t) * H + c * kC + 4 * qt);
              a[t][0] = v.x; a[t][1] = v.y; a[t][2] = v.z; a[t][3] = v.w;
            }
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              float wv[4];
              Codec::decode4(raw[u][r], qt, wv);
#pragma unroll
              for (int t = 0; t < kTokens; ++t) {
                if (t >= nt) break;
#pragma unroll
                for (int j = 0; j < 4; ++j) part[t][r] = __fmaf_rn(wv[j], a[t][j], part[t][r]);
              }
            }
          }
#pragma unroll
          for (int t = 0; t < kTokens; ++t)
#pragma unroll
            for (int r = 0; r < kRows; ++r)
              acc[t][r] = Codec::kScaled ? __fmaf_rn(part[t][r], sc[u][r], acc[t][r]) : part[t][r];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            raw[u][r] = nxt[u][r];
            sc[u][r] = nsc[u][r];
          }
      }
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t >= nt) break;
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          const float g = warp_sum(acc[t][2 * nn]);
          const float u = warp_sum(acc[t][2 * nn + 1]);
          if (lane == 0) p.h[size_t(s_list[t0 + t]) * I + i0 + nn] = silu(g) * u;
        }
      }
    }
  }
}

template <typename Codec, int kTokens, int kUnroll>
void launch_variant(const GateUpParams& p, cudaStream_t stream) {
  const int per_block = kWarps * 2 * p.neurons_per_warp;
  const dim3 grid((p.intermediate + per_block - 1) / per_block, p.batch * p.top_k);
  const size_t smem = moe_gate_up_smem_for(p.batch * p.top_k, kTokens, p.hidden);
  auto* k = &moe_gate_up_kernel<Codec, kTokens, kUnroll>;
  ensure_dynamic_smem(k, smem);
  k<<<grid, kThreads, smem, stream>>>(p);
  WD_CUDA_CHECK_LAUNCH();
}

template <typename Codec>
void launch(const GateUpParams& p, cudaStream_t stream) {
  if (p.tokens_per_pass == 4) launch_variant<Codec, 4, 1>(p, stream);
  else if (p.narrow_rounds) launch_variant<Codec, 1, 1>(p, stream);
  else launch_variant<Codec, 1, 2>(p, stream);
}

}  // namespace

size_t moe_gate_up_smem_for(int entries, int tokens_per_pass, int hidden) {
  // s_list (entries) then the FP32 activations of `tokens` tokens, 16-byte aligned.
  return ((size_t(entries) * sizeof(int32_t) + 15) / 16) * 16 + size_t(tokens_per_pass) * hidden * sizeof(float);
}

size_t moe_gate_up_smem(const GateUpParams& p) {
  return moe_gate_up_smem_for(p.batch * p.top_k, p.tokens_per_pass, p.hidden);
}

void check_moe_gate_up(const GateUpParams& p, WeightFormat format) {
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
  WD_CHECK(p.neurons_per_warp >= 1, "moe_gate_up: neurons_per_warp must be >= 1");
  WD_CHECK(p.prefetch_pairs >= 0, "moe_gate_up: prefetch_pairs must be >= 0");
  WD_CHECK(moe_gate_up_smem(p) <= kMaxSmem, "moe_gate_up: batch ", p.batch, " × top-k ", p.top_k,
           " routing entries and H = ", p.hidden, " need ", moe_gate_up_smem(p),
           " bytes of shared memory, more than the ", kMaxSmem, " a block may use");
  WD_CHECK(p.weights && p.x && p.ids && p.h, "moe_gate_up: a required pointer is null");
  WD_CHECK(format == WeightFormat::kBF16 || p.scales, "moe_gate_up: MXFP8 needs scales");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.weights) | reinterpret_cast<uintptr_t>(p.x)) % 16 == 0,
           "moe_gate_up: weights and x must be 16-byte aligned");
}

void moe_gate_up(const GateUpParams& p, WeightFormat format, cudaStream_t stream) {
  check_moe_gate_up(p, format);
  with_codec(format, p.mx8_int_decode != 0, "moe_gate_up",
             [&](auto codec) { launch<decltype(codec)>(p, stream); });
}

}  // namespace wd::kernels
