// The TMA tile's epilogue stores (tma_gemm_kernel, classical_tma_gemm.cu):
// a consumer thread's accumulators, as wgmma m64nT lays them out, written
// to the (rows, ncols) output as whole sectors — FP32 pairs, BF16 quads or
// 16-byte octs, the swapped tiles' 16-byte BF16 rows and the fused
// gate_up's E4M3 codes — by trading values between the lanes of a quad
// (shuffles) so that each lane holds adjacent columns of one token.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/classical_gemm.cuh"
#include "kernels/common.cuh"
#include "kernels/mma.cuh"
#include "warpdecode/formats.h"

namespace wd::kernels::tma_tile {

// The 4 × 4 transpose of 4-byte words across the four lanes of a quad (lane
// t4 = lane & 3): on entry v[x] is word x of lane t4, on return word t4 of
// lane x. Two shuffle rounds of two words: lanes t4 ^ 2 trade the
// off-diagonal 2 × 2 blocks, then lanes t4 ^ 1 transpose each block. The
// swapped-operand epilogues use it to turn a lane's words of four column
// groups into one group's four consecutive words (a 16-byte store).
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4], int t4) {
  const bool b1 = t4 & 2, b0 = t4 & 1;
  uint32_t r0 = __shfl_xor_sync(kFullMask, b1 ? v[0] : v[2], 2);
  uint32_t r1 = __shfl_xor_sync(kFullMask, b1 ? v[1] : v[3], 2);
  if (b1) v[0] = r0, v[1] = r1;
  else v[2] = r0, v[3] = r1;
  r0 = __shfl_xor_sync(kFullMask, b0 ? v[0] : v[1], 1);
  r1 = __shfl_xor_sync(kFullMask, b0 ? v[2] : v[3], 1);
  if (b0) v[0] = r0, v[2] = r1;
  else v[1] = r0, v[3] = r1;
}

// The unswapped tiles (store): straight from the registers, an m64 block v
// of output columns [col0, col0 + 64) of an (rows, ncols) output. Element 4i + 2h
// + b of v is weight row (output column) 16w4 + g8 + 8h, token 8i + 2t4
// + b. Lanes g8 and g8 ^ 1 swap one value so that each holds two
// adjacent columns of one token (the even lane token 8i + 2t4, the odd
// one the next: an FP32 output stores these 8 bytes); BF16, lanes g8 and
// g8 ^ 2 then swap one packed pair so that each holds four adjacent
// columns (a quad, 8 bytes), and (kOcts: an even number of n8 groups, T
// >= 16) lanes g8 and g8 ^ 4 trade the quads of two n8 groups i and i +
// 1, so that each holds eight adjacent columns (16 bytes) of one token:
// a warp's store is 8 tokens × 32 bytes (quads) or 4 tokens × 2 × 32
// bytes, whole sectors either way. History: quads against 4-byte
// stores (half sectors), session 21 run 1: down −2.3 / −2.5 % at 1024
// tokens (T = 128), +1.0 / +2.1 % at T = 144, which kept the 4-byte
// stores; the swapped FP8 down with 16-byte stores against the
// unswapped one with quads, session 22 run 4: −31 / −22 % at 4096 tokens.
// The swapped tiles store through store_swapped and store_codes (below).
// One a tile and consumer thread: lane coordinates g8 = lane / 4, t4 =
// lane % 4, w4 = warp % 4, and the tile's first token row row0.
template <int kT>
struct TileStores {
  static constexpr int kN8 = kT / 8;  // n8 column groups of an accumulator set
  static constexpr bool kOcts = kN8 % 2 == 0;
  const GroupedGemmParams& g;
  int N;     // g.n
  int row0;  // the tile's first token row
  int w4, g8, t4;
  int odd, hi2, hi4;  // bits 0, 1, 2 of g8

  // Columns 8h + (g8 & ~1), + 1 of token 8i + 2t4 + odd, for h = 0, 1.
  __device__ __forceinline__ void pairs_of(const float(&v)[kT / 2], int i, float2(&pair)[2]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mine0 = v[4 * i + 2 * h], mine1 = v[4 * i + 2 * h + 1];
      const float got = __shfl_xor_sync(kFullMask, odd ? mine0 : mine1, 4);
      pair[h] = odd ? make_float2(got, mine1) : make_float2(mine0, got);
    }
  }
  // BF16 columns (g8 & ~3) + 8·hi2 + 0..3 of token 8i + 2t4 + odd: hi2 = 0
  // keeps columns (g8 & ~3) + 0, 1 and takes + 2, 3; hi2 = 1 takes 8 +
  // (g8 & ~3) + 0, 1 and keeps + 2, 3.
  __device__ __forceinline__ uint2 quad_from(const float2(&pair)[2]) const {
    const uint32_t p0 = pack_bf16x2(pair[0].x, pair[0].y), p1 = pack_bf16x2(pair[1].x, pair[1].y);
    const uint32_t got = __shfl_xor_sync(kFullMask, hi2 ? p0 : p1, 8);
    return hi2 ? make_uint2(got, p1) : make_uint2(p0, got);
  }
  __device__ __forceinline__ uint2 quad_of(const float(&v)[kT / 2], int i) const {
    float2 pair[2];
    pairs_of(v, i, pair);
    return quad_from(pair);
  }
  // FP32: the pairs of n8 group i. T = 8 (no octs) takes the pairs before
  // it tests the output type, as its code did before the 16-byte stores:
  // with the test first, the T = 8 BF16 gate_up took 16.1 -> 16.8 µs at B
  // = 1 (qwen3-30b-a3b, session 23 run 6).
  __device__ __forceinline__ void store_pairs(const float2(&pair)[2], int i, int col0, int ncols) const {
    const int row = row0 + 8 * i + 2 * t4 + odd;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 16 * w4 + g8 + 8 * h - odd;
      if (row < g.rows && col < ncols)
        *reinterpret_cast<float2*>(static_cast<float*>(g.out) + size_t(row) * ncols + col) = pair[h];
    }
  }
  __device__ __forceinline__ void store(const float(&v)[kT / 2], int col0, int ncols) const {
    if constexpr (!kOcts) {
#pragma unroll
      for (int i = 0; i < kN8; ++i) {
        float2 pair[2];
        pairs_of(v, i, pair);
        if (g.out_fp32) {
          store_pairs(pair, i, col0, ncols);
        } else {
          // Quads (T = 8).
          const uint2 quad = quad_from(pair);
          const int row = row0 + 8 * i + 2 * t4 + odd, col = col0 + 16 * w4 + (g8 & ~3) + 8 * hi2;
          if (row < g.rows && col < ncols)
            *reinterpret_cast<uint2*>(static_cast<uint16_t*>(g.out) + size_t(row) * ncols + col) = quad;
        }
      }
    } else if (g.out_fp32) {
#pragma unroll
      for (int i = 0; i < kN8; ++i) {
        float2 pair[2];
        pairs_of(v, i, pair);
        store_pairs(pair, i, col0, ncols);
      }
    } else {
      // hi4 = 0 keeps group i's token and takes the partner's quad of it
      // (columns + 4..7); hi4 = 1 keeps group i + 1's, its quad being
      // columns + 4..7 of it.
      const int col = col0 + 16 * w4 + 8 * hi2;
#pragma unroll
      for (int i = 0; i < kN8; i += 2) {
        const uint2 q0 = quad_of(v, i), q1 = quad_of(v, i + 1);
        const uint2 send = hi4 ? q0 : q1;
        const uint2 got = make_uint2(__shfl_xor_sync(kFullMask, send.x, 16), __shfl_xor_sync(kFullMask, send.y, 16));
        const uint4 oct = hi4 ? make_uint4(got.x, got.y, q1.x, q1.y) : make_uint4(q0.x, q0.y, got.x, got.y);
        const int row = row0 + 8 * (i + hi4) + 2 * t4 + odd;
        if (row < g.rows && col < ncols)
          *reinterpret_cast<uint4*>(static_cast<uint16_t*>(g.out) + size_t(row) * ncols + col) = oct;
      }
    }
  }
  // The swapped tiles (kSwap, kTokSplit), a plain GEMM (down): 128 output
  // columns col0.. of tokens tok0 and tok0 + 8 from 64 accumulators,
  // element 4i + 2h + b being token tok0 + 8h, column col0 + 8i + 2t4 + b.
  // BF16: the quad's four lanes transpose their packed pairs of four
  // consecutive i (a 4 × 4 transpose of 4-byte words, two shuffle rounds
  // of two), so that lane t4 holds columns 32q + 8t4 .. + 7 of one token:
  // 16-byte stores, a warp's store 8 tokens × 64 bytes (whole sectors; the
  // 4-byte pair stores wrote half sectors: session 21 run 5 lost 7-18 %
  // so).
  __device__ __forceinline__ void store_swapped(const float(&af)[64], int tok0, int col0) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = tok0 + 8 * h;
      const bool ok = row < g.rows && col0 < N;
      if (g.out_fp32) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
          if (ok)
            *reinterpret_cast<float2*>(static_cast<float*>(g.out) + size_t(row) * N + col0 + 8 * i + 2 * t4) =
                make_float2(af[4 * i + 2 * h], af[4 * i + 2 * h + 1]);
        continue;
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t v[4];  // v[x]: columns 32q + 8x + 2t4, + 1
#pragma unroll
        for (int x = 0; x < 4; ++x) v[x] = pack_bf16x2(af[4 * (4 * q + x) + 2 * h], af[4 * (4 * q + x) + 2 * h + 1]);
        quad_transpose(v, t4);  // v[x]: lane x's columns 32q + 8t4 + 2x, + 1
        if (ok)
          *reinterpret_cast<uint4*>(static_cast<uint16_t*>(g.out) + size_t(row) * N + col0 + 32 * q + 8 * t4) =
              make_uint4(v[0], v[1], v[2], v[3]);
      }
    }
  }
  // The swapped tiles' fused gate_up: E4M3 codes of h · r for 64 neurons
  // (hv[4i + 2h + b], i < 8: neuron 8i + 2t4 + b of token tok0 + 8h) at
  // byte n0 + off of the row, one 16-byte store a lane: the codes of neurons 8i
  // + 2t4, + 1 are paired into words k = neurons 16k + 2t4, + 1 (low half)
  // and 16k + 8 + 2t4, + 1 (high half); after the quad's transpose lane t4
  // holds those of neurons 16t4 .. + 15 (word x: 2x, + 1 and 8 + 2x, + 1),
  // which two byte permutes per pair of words put in order (session 22:
  // one 16-byte store a token where the quad's lanes stored 2 bytes per i,
  // as for down's BF16).
  __device__ __forceinline__ void store_codes(const float* hv, int h, float r, int row, int n0, int off) const {
    uint32_t q[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      q[i] = __nv_cvt_float2_to_fp8x2(make_float2(hv[4 * i + 2 * h] * r, hv[4 * i + 2 * h + 1] * r), __NV_SATFINITE,
                                      __NV_E4M3);
    uint32_t v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = (q[2 * k] & 0xFFFFu) | (q[2 * k + 1] << 16);
    quad_transpose(v, t4);
    if (row < g.rows)
      *reinterpret_cast<uint4*>(static_cast<uint8_t*>(g.out) + size_t(row) * (N / 2) + n0 + off + 16 * t4) =
          make_uint4(__byte_perm(v[0], v[1], 0x5410), __byte_perm(v[2], v[3], 0x5410),
                     __byte_perm(v[0], v[1], 0x7632), __byte_perm(v[2], v[3], 0x7632));
  }
  // Swapped operands: element 4i + j of the flat accumulators is token
  // 16w4 + g8 + 8(j >> 1) of the tile, column 8i + 2t4 + (j & 1) of the
  // consumer's 128: the gate of neuron 64c + that column for i < 8, its
  // up at i + 8.
  // h of the consumer's 64 neurons, quantized per token over the
  // tile's 128 (as the unswapped epilogue below): a token's amax over
  // the thread's 16 neurons, the quad's four lanes (shuffles), then the
  // two consumer warpgroups (shared memory between two barriers).
  // s_amax: the tile's quantization scratch in shared memory (Tile::quant()).
  template <int kConsumerThreads>
  __device__ __forceinline__ void silu_quant_swapped(float (&af)[kT], float* s_amax, int c, int tid, int n0) const {
    float* s_rcp = s_amax + 8 * kT;  // [kT]: 1 / s
    float m[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < kT / 8; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        af[4 * i + j] = silu_fast(af[4 * i + j]) * af[4 * (i + kT / 8) + j];
        m[j >> 1] = fmaxf(m[j >> 1], fabsf(af[4 * i + j]));
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) m[h] = fmaxf(m[h], __shfl_xor_sync(kFullMask, m[h], o));
      if (t4 == 0) s_amax[c * kT + 16 * w4 + g8 + 8 * h] = m[h];
    }
    named_barrier_sync(2, kConsumerThreads);
    if (const int tok = tid - 128; tok < kT) {
      const float mt = fmaxf(s_amax[tok], s_amax[kT + tok]);
      const float sc = e4m3_scale(mt);
      s_rcp[tok] = 1.0f / sc;
      if (row0 + tok < g.rows) g.out_scales[size_t(row0 + tok) * (N / 256) + n0 / 128] = sc;
    }
    named_barrier_sync(2, kConsumerThreads);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int tok = 16 * w4 + g8 + 8 * h;
      store_codes(af, h, s_rcp[tok], row0 + tok, n0, 64 * c);  // the consumer's 64 neurons of the token
    }
  }
  // W8A8: h = silu(gate)·up of neurons n0 + 64c.. (m64 block 0 gate, 1
  // up) from the FP32 accumulators, quantized per token over the tile's
  // 128 neurons, one activation group held by both consumer warpgroups,
  // as quantize_activation_group does: s = max(amax, 1e-10) / 448, codes
  // e4m3(h · (1/s)) (round to nearest even, saturated; h · (1/s) is
  // within 1.5 ulp of h / s, so a code differs only where h / s lies
  // that close to a rounding midpoint). The tensor cores wait for this
  // epilogue, so SiLU and the quantization take the fast forms
  // (silu_fast, one reciprocal a token): qwen3-30b-a3b FP8 block-128
  // gate_up at 4096 tokens 315.9 µs with the separate stage, 362.6 with
  // accurate forms, 327.9 with these (session 18 run 2). Element 4i + j:
  // neuron 16w4 + g8 + 8(j >> 1) of the consumer's 64, token 8i + 2t4 +
  // (j & 1). A token's amax: over j and the warp's g8 (shuffles), then
  // over the eight consumer warps (shared memory, two barriers of the
  // consumers: the second also keeps the next tile's amax writes behind
  // every read of this one's scales).
  // gate, up: m64 blocks 0 and 1 of the consumer; h overwrites gate. s_amax:
  // the tile's quantization scratch in shared memory (Tile::quant()).
  template <int kConsumerThreads>
  __device__ __forceinline__ void silu_quant(float (&gate)[kT / 2], const float (&up)[kT / 2], float* s_amax, int c,
                                             int warp, int tid, int n0) const {
    float* s_rcp = s_amax + 8 * kT;  // [kT]: 1 / s
#pragma unroll
    for (int i = 0; i < kT / 2; ++i) gate[i] = silu_fast(gate[i]) * up[i];
#pragma unroll
    for (int i = 0; i < kN8; ++i)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        float m = fmaxf(fabsf(gate[4 * i + jj]), fabsf(gate[4 * i + 2 + jj]));
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, o));
        if (g8 == 0) s_amax[(warp - 4) * kT + 8 * i + 2 * t4 + jj] = m;
      }
    named_barrier_sync(2, kConsumerThreads);
    if (const int tok = tid - 128; tok < kT) {
      float m = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) m = fmaxf(m, s_amax[w * kT + tok]);
      const float s = e4m3_scale(m);
      s_rcp[tok] = 1.0f / s;
      if (row0 + tok < g.rows) g.out_scales[size_t(row0 + tok) * (N / 256) + n0 / 128] = s;
    }
    named_barrier_sync(2, kConsumerThreads);
    // Codes of two tokens of one neuron per cvt; lanes g8 and g8 ^ 1 swap
    // one code so that each stores two adjacent neurons of one token (the
    // even lane token 8i + 2t4, the odd one the next).
#pragma unroll
    for (int i = 0; i < kN8; ++i) {
      const float2 r2 = *reinterpret_cast<const float2*>(s_rcp + 8 * i + 2 * t4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t q = __nv_cvt_float2_to_fp8x2(
            make_float2(gate[4 * i + 2 * h] * r2.x, gate[4 * i + 2 * h + 1] * r2.y), __NV_SATFINITE, __NV_E4M3);
        const uint32_t got = __shfl_xor_sync(kFullMask, odd ? (q & 0xFFu) : (q >> 8), 4);
        const uint32_t pair = odd ? (got | (q & 0xFF00u)) : ((q & 0xFFu) | (got << 8));
        const int row = row0 + 8 * i + 2 * t4 + odd;
        const int col = n0 + 64 * c + 16 * w4 + g8 + 8 * h - odd;
        if (row < g.rows)
          *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(g.out) + size_t(row) * (N / 2) + col) = uint16_t(pair);
      }
    }
  }
};

}  // namespace wd::kernels::tma_tile
