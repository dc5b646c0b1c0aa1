#include "kernels/classical_stages.cuh"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>

#include <cuda_fp8.h>

#include "core/cuda_check.h"
#include "kernels/launch.cuh"
#include "kernels/common.cuh"
#include "kernels/topk.cuh"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"

namespace wd::kernels {
namespace {

constexpr int kMaxTopKExperts = 1024;
constexpr int kMaxK = 16;
constexpr int kAlignSteps = 8;  // align: 32-entry steps whose ids are loaded together
constexpr int kWarpsPerBlock = 8;  // warp-per-row kernels: 256 threads a block

unsigned warp_blocks(size_t warps) { return unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// Threads of a block that owns one row of n values: one per 16-byte chunk,
// whole warps, at most 1024 (longer rows loop).
unsigned row_threads(int n) { return unsigned(std::min(1024, (n / 8 + kWarpSize - 1) / kWarpSize * kWarpSize)); }

__device__ __forceinline__ int global_warp() {
  return int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize);
}

// 8 BF16 of a 16-byte word -> floats.
__device__ __forceinline__ void unpack_bf16x8(const uint4& r, float (&f)[8]) {
  const uint32_t v[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = bf16_lo(v[i]);
    f[2 * i + 1] = bf16_hi(v[i]);
  }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  uint32_t v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = uint32_t(float_to_bf16(f[2 * i])) | (uint32_t(float_to_bf16(f[2 * i + 1])) << 16);
  return make_uint4(v[0], v[1], v[2], v[3]);
}

// Per-token-group FP8 quantization of 8 values held by each of 16 lanes (one
// group of 128 = one half-warp): returns the 8 E4M3 codes, *scale the group's
// scale. All 32 lanes must call it (the amax is reduced within half-warps).
__device__ __forceinline__ uint2 quantize_group_x8(const float (&f)[8], float* scale) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(f[i]));
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, o));
  const float s = e4m3_scale(amax);
  // cvt.rn.satfinite.e4m3x2.f32: round to nearest even, saturate to ±448,
  // NaN -> 0x7F: the rounding of wd::float_to_e4m3, in one instruction a pair.
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * i] / s, f[2 * i + 1] / s), __NV_SATFINITE, __NV_E4M3);
  *scale = s;
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// ---- stage 2: softmax + top-k ------------------------------------------------------
// One warp per token; lane l holds logits l, l+32, ...; K rounds of a warp
// arg-max (ties -> lower expert index), like the reference.
template <int kPerLane>
__global__ void topk_softmax_kernel(const __grid_constant__ TopKParams p) {
  wait_for_previous_kernel();
  allow_next_kernel();
  const int b = global_warp();
  if (b >= p.batch) return;
  warp_softmax_topk<kPerLane>(p.logits + size_t(b) * p.experts, p.experts, p.top_k,
                              p.norm_topk_prob != 0, p.ids + size_t(b) * p.top_k,
                              p.weights + size_t(b) * p.top_k);
}

// ---- stage 3: align (counts, padding, sorted rows) ----------------------------------
// Rows come out in ascending entry order within each expert, whatever the
// schedule: an entry's row is its expert's padded offset + the entries of
// that expert before it, counted per 32-entry warp step (__match_any_sync
// groups equal ids within a step; the group's first lane adds its size).
//
// Up to kAlignOneBlock entries, one block does it all: warp w owns a
// contiguous slice; pass 1 counts each expert's entries per warp, the
// per-expert totals, exclusive per-warp starts and padded offsets (a warp scan
// over experts) follow, and pass 2 walks the slices again and places each
// entry. Above (prefill), two kernels spread the same work over chunks of
// kAlignChunk entries: count (per chunk), then place (per chunk: every block
// scans the chunks' counts for its own starts and the padded offsets, block 0
// publishes them; then the one-block scheme inside the chunk). One block
// took 80 µs for the 32768 entries of 4096 tokens (session 10 run 1); a
// separate one-block scan kernel between the two, one more launch and round
// trip, 18 µs at 1024 tokens (session 11).
constexpr int kAlignOneBlock = 2048;
constexpr int kAlignChunk = 1024;
constexpr int kAlignChunkWarps = 8;  // 128 entries a warp

// Pass 1 over the entries [begin, end) of one warp: my_cnt[e] += entries of
// expert e. The ids of kAlignSteps steps are loaded together (one dependent
// load per step made the kernel latency-bound: 30 µs at B = 1024, run 1).
// Invalid ids get no row.
__device__ __forceinline__ void align_load_ids(const AlignParams& p, int base0, int end, int lane, int (&ev)[kAlignSteps]) {
#pragma unroll
  for (int j = 0; j < kAlignSteps; ++j) {
    const int i = base0 + j * kWarpSize + lane;
    const int e = i < end ? __ldg(p.ids + i) : -1;
    ev[j] = e >= 0 && e < p.experts ? e : -1;
  }
}
__device__ __forceinline__ void align_count(const AlignParams& p, int begin, int end, int lane, int32_t* my_cnt) {
  for (int base0 = begin; base0 < end; base0 += kAlignSteps * kWarpSize) {
    int ev[kAlignSteps];
    align_load_ids(p, base0, end, lane, ev);
#pragma unroll
    for (int j = 0; j < kAlignSteps; ++j) {
      if (base0 + j * kWarpSize >= end) break;  // warp-uniform
      const int e = ev[j];
      const unsigned peers = __match_any_sync(kFullMask, e);
      if (e >= 0 && lane == __ffs(peers) - 1) my_cnt[e] += __popc(peers);
      __syncwarp();
    }
  }
}
// Pass 2: each entry's row = first[e] + my_cnt[e] + its rank in its step
// (first: the experts' padded offsets, or nullptr where my_cnt already holds
// absolute rows); my_cnt advances as the warp walks.
__device__ __forceinline__ void align_place(const AlignParams& p, int begin, int end, int lane, int32_t* my_cnt,
                                            const int32_t* first) {
  for (int base0 = begin; base0 < end; base0 += kAlignSteps * kWarpSize) {
    int ev[kAlignSteps];
    align_load_ids(p, base0, end, lane, ev);
#pragma unroll
    for (int j = 0; j < kAlignSteps; ++j) {
      if (base0 + j * kWarpSize >= end) break;  // warp-uniform
      const int i = base0 + j * kWarpSize + lane, e = ev[j];
      const unsigned peers = __match_any_sync(kFullMask, e);
      if (i < end) {
        int row = -1;
        if (e >= 0) {
          row = (first != nullptr ? first[e] : 0) + my_cnt[e] + __popc(peers & ((1u << lane) - 1u));
          p.sorted_entries[row] = i;
        }
        p.entry_row[i] = row;
      }
      __syncwarp();
      if (e >= 0 && lane == __ffs(peers) - 1) my_cnt[e] += __popc(peers);
      __syncwarp();
    }
  }
}
// From the per-expert totals in s_off[0, E): the padded offsets in
// s_off[0, E] and the totals in s_tot[0, E); with publish, also counts,
// p.offsets and meta. Called by every thread of a block.
__device__ __forceinline__ void align_offsets(const AlignParams& p, int32_t* s_off, int32_t* s_tot, bool publish) {
  const int E = p.experts, T = p.tile_tokens, lane = threadIdx.x % kWarpSize;
  const int R = p.pair_blocks ? 2 * T : T;  // the padding unit
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int total = s_off[e];
    if (publish) p.counts[e] = total;
    s_tot[e] = total;
    s_off[e] = (total + R - 1) / R * R;
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    const int per = (E + kWarpSize - 1) / kWarpSize;
    const int lo = min(E, lane * per), hi = min(E, lo + per);
    int sum = 0;
    for (int e = lo; e < hi; ++e) sum += s_off[e];
    const int incl = warp_inclusive_sum(sum, lane);
    int run = incl - sum;
    for (int e = lo; e < hi; ++e) {
      const int v = s_off[e];
      s_off[e] = run;
      run += v;
    }
    if (lane == kWarpSize - 1) s_off[E] = incl;
  }
  __syncthreads();
  if (!publish) return;
  const int total = s_off[E];
  for (int e = threadIdx.x; e <= E; e += blockDim.x) p.offsets[e] = s_off[e];
  if (threadIdx.x == 0) {
    p.meta[0] = total / T;
    p.meta[1] = total;
  }
}
// The block table and the padding rows' -1 of experts group, group +
// groups, ...: kLanes threads an expert, on consecutive blocks and rows.
// Prefill (the place kernel): a warp an expert over every block, whole
// 32-byte sectors a store, where one thread an expert in block 0 wrote up to
// T - 1 rows (2T - 1 in pairs) one after another, 32 sectors a warp's store:
// align 16.1 -> 8.4 µs at 1024 tokens, 13.4 -> 9.1 at 4096 (session 21 run
// 1). Decode (the one-block kernel, a few rows an expert): a thread an
// expert, as before; a warp an expert made align 1.1-1.6 µs slower at B =
// 1-64 (its warps walk E / 32 experts each, nearly all empty).
template <int kLanes>
__device__ __forceinline__ void align_publish_padding(const AlignParams& p, const int32_t* s_off,
                                                      const int32_t* s_tot, int group, int groups) {
  const int T = p.tile_tokens, lane = threadIdx.x % kLanes;
  for (int e = group; e < p.experts; e += groups) {
    const int lo = s_off[e], hi = s_off[e + 1];
    for (int b = lo / T + lane; b < hi / T; b += kLanes) p.block_expert[b] = e;
    for (int r = lo + s_tot[e] + lane; r < hi; r += kLanes) p.sorted_entries[r] = -1;
  }
}
// s_cnt (warps, E) holds each warp's count per expert; it becomes each
// warp's first row per expert, counted from first(e). totals (if given)
// receives first(e) + the expert's count.
template <class First>
__device__ __forceinline__ void align_warp_starts(int32_t* s_cnt, int warps, int E, First first, int32_t* totals) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int run = first(e);
    for (int w = 0; w < warps; ++w) {
      const int c = s_cnt[w * E + e];
      s_cnt[w * E + e] = run;
      run += c;
    }
    if (totals != nullptr) totals[e] = run;
  }
}

// One block, all entries.
__global__ void moe_align_kernel(const __grid_constant__ AlignParams p) {
  extern __shared__ int32_t s_cnt[];  // (warps, E)
  __shared__ int32_t s_off[kMaxTopKExperts + 1];
  __shared__ int32_t s_tot[kMaxTopKExperts];
  wait_for_previous_kernel();
  allow_next_kernel();
  const int warps = blockDim.x / kWarpSize, warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int E = p.experts, N = p.entries;
  // Slices of whole 32-entry steps; only the first `used` warps get entries
  // (one at B = 1), and only their counters are cleared and summed. All the
  // block's threads stay for the per-expert loops (a block of one warp per
  // slice was slower: session 8, session 11 run 5).
  const int per_warp = ((N + warps - 1) / warps + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int used = (N + per_warp - 1) / per_warp;
  for (int i = threadIdx.x; i < used * E; i += blockDim.x) s_cnt[i] = 0;
  __syncthreads();
  const int begin = warp * per_warp, end = min(N, begin + per_warp);  // empty past `used`
  int32_t* my_cnt = s_cnt + warp * E;
  align_count(p, begin, end, lane, my_cnt);
  __syncthreads();
  // Per-expert totals; s_cnt becomes each warp's exclusive start.
  align_warp_starts(s_cnt, used, E, [](int) { return 0; }, s_off);
  __syncthreads();
  align_offsets(p, s_off, s_tot, true);
  align_publish_padding<1>(p, s_off, s_tot, int(threadIdx.x), int(blockDim.x));
  align_place(p, begin, end, lane, my_cnt, s_off);
}

// Multi-block, 1: each chunk's entries per expert -> p.chunk_counts (chunk, E).
__global__ void align_count_kernel(const __grid_constant__ AlignParams p) {
  __shared__ int32_t s_cnt[kMaxTopKExperts];
  wait_for_previous_kernel();
  allow_next_kernel();
  const int E = p.experts;
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_cnt[e] = 0;
  __syncthreads();
  const int begin = blockIdx.x * kAlignChunk, end = min(p.entries, begin + kAlignChunk);
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int e = __ldg(p.ids + i);
    if (e >= 0 && e < E) atomicAdd(&s_cnt[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) p.chunk_counts[size_t(blockIdx.x) * E + e] = s_cnt[e];
}

// Multi-block, 2: the one-block scheme inside each chunk, from the chunk's
// first rows per expert: the padded offset (every block scans the totals of
// all chunks' counts; block 0 publishes them) + the expert's entries in the
// chunks before it. The block table and padding rows are spread over the
// warps of every block (align_publish_padding).
__global__ void align_place_kernel(const __grid_constant__ AlignParams p) {
  __shared__ int32_t s_cnt[kAlignChunkWarps * kMaxTopKExperts];
  __shared__ int32_t s_off[kMaxTopKExperts + 1];
  __shared__ int32_t s_tot[kMaxTopKExperts];
  __shared__ int32_t s_before[kMaxTopKExperts];
  wait_for_previous_kernel();
  allow_next_kernel();
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int E = p.experts, chunks = (p.entries + kAlignChunk - 1) / kAlignChunk, me = blockIdx.x;
  // The counts are the previous kernel's: L2-coherent loads (an L1 line from
  // an earlier call could be stale), eight in flight at a time (one
  // dependent load a chunk was a chain of 32 L2 round trips at 4096 tokens).
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int total = 0, before = 0;
#pragma unroll 8
    for (int c = 0; c < chunks; ++c) {
      const int v = __ldcg(p.chunk_counts + size_t(c) * E + e);
      total += v;
      before += c < me ? v : 0;
    }
    s_off[e] = total;
    s_before[e] = before;
  }
  for (int i = threadIdx.x; i < kAlignChunkWarps * E; i += blockDim.x) s_cnt[i] = 0;
  __syncthreads();
  align_offsets(p, s_off, s_tot, me == 0);
  align_publish_padding<kWarpSize>(p, s_off, s_tot, me * kAlignChunkWarps + warp, int(gridDim.x) * kAlignChunkWarps);
  constexpr int kPerWarp = kAlignChunk / kAlignChunkWarps;
  const int begin = min(p.entries, me * kAlignChunk + warp * kPerWarp);
  const int end = min(p.entries, begin + kPerWarp);
  int32_t* my_cnt = s_cnt + warp * E;
  align_count(p, begin, end, lane, my_cnt);
  __syncthreads();
  align_warp_starts(s_cnt, kAlignChunkWarps, E, [&](int e) { return s_off[e] + s_before[e]; }, nullptr);
  __syncthreads();
  align_place(p, begin, end, lane, my_cnt, nullptr);
}

// W8A16's K order (a16_k_position) on 16-byte BF16 chunks: adjacent lanes
// holding chunks 2m and 2m + 1 (elements 16m .. 16m + 15) trade two words,
// so that the even lane holds positions 16m .. 16m + 7 (elements 16m + 4t +
// e: words x and z of both chunks) and the odd lane the next eight (words y
// and w). Every lane of the warp calls it.
__device__ __forceinline__ uint4 a16_order_chunks(const uint4& v, int lane) {
  const bool odd = lane & 1;
  const uint32_t g0 = __shfl_xor_sync(kFullMask, odd ? v.x : v.y, 1);
  const uint32_t g1 = __shfl_xor_sync(kFullMask, odd ? v.z : v.w, 1);
  return odd ? make_uint4(g0, g1, v.y, v.w) : make_uint4(v.x, v.z, g0, g1);
}

// ---- stage 4: permute (+ quantize) ------------------------------------------------------
// One thread per 16-byte chunk (8 values) of a token's row: the row is read
// once and written to its K sorted rows; all of a row's loads are in flight
// together (a warp per row was latency-bound: 12 µs at B = 1, run 1). A grid
// of at most one wave of blocks walks the tokens b = blockIdx.x +
// j·gridDim.x, the next token's first chunk and rows loaded while this one
// is written. (A block per token ran 16-31 waves of short blocks at 4096
// tokens: W8A8 1.6-2.1 TB/s, and 0.8-1.0 with one copy a token instead of
// K (session 18 run 4): the blocks' starts and first loads, not the bytes,
// set its pace. One wave, run 5: W8A8 at 4096 tokens 41.1 -> 28.1 µs on
// qwen3-30b-a3b, 107.4 -> 55.1 on qwen3-235b-a22b, decode 2.8 -> 2.2; BF16
// 102.3 -> 85.7 on qwen3-235b-a22b, level on qwen3-30b-a3b.)
__global__ void __launch_bounds__(1024) permute_rows_kernel(const __grid_constant__ PermuteParams p) {
  const int lane = threadIdx.x % kWarpSize;
  const int H = p.hidden, K = p.top_k, chunks = H / 8;
  const int c_first = threadIdx.x;
  auto first_chunk = [&](int b) {
    return b < p.batch && c_first < chunks ? ld_cached(p.x + size_t(b) * H + size_t(c_first) * 8)
                                           : make_uint4(0, 0, 0, 0);
  };
  // Thread k < kMaxK loads row k of token b (-1: none); the block shares
  // them through s_rows, two tokens' worth (this one's and the next one's,
  // whose loads are in flight while this one is written).
  auto row_of = [&](int b) {
    const int k = threadIdx.x;
    return b < p.batch && k < K ? __ldcg(p.entry_row + size_t(b) * K + k) : -1;
  };
  __shared__ int s_rows[2][kMaxK];
  // x is the layer's input, complete before align (our predecessor) let us
  // start: the first chunk's load goes out before the wait, the rows (align's
  // output) after it.
  int b = blockIdx.x;
  uint4 v_first = first_chunk(b);
  wait_for_previous_kernel();
  allow_next_kernel();
  if (threadIdx.x < kMaxK) s_rows[0][threadIdx.x] = row_of(b);
  __syncthreads();
  for (int buf = 0; b < p.batch; b += gridDim.x, buf ^= 1) {
    const uint16_t* xr = p.x + size_t(b) * H;
    const uint4 v_next = first_chunk(b + gridDim.x);
    const int row_next = threadIdx.x < kMaxK ? row_of(b + gridDim.x) : -1;
    int rows[kMaxK];
#pragma unroll
    for (int k = 0; k < kMaxK; ++k) rows[k] = s_rows[buf][k];
    for (int c0 = threadIdx.x - lane; c0 < chunks; c0 += blockDim.x) {  // warp-uniform bounds
      const int c = c0 + lane;
      const bool ok = c < chunks;
      uint4 v = c == c_first ? v_first : ok ? ld_cached(xr + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
      if (!p.quantize) {
        if (p.a16_order) v = a16_order_chunks(v, lane);  // chunks c, c ^ 1: both in or both out (H % 16 == 0)
        if (!ok) continue;
#pragma unroll
        for (int k = 0; k < kMaxK; ++k)
          if (rows[k] >= 0)
            *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.a) + size_t(rows[k]) * H + size_t(c) * 8) = v;
      } else {
        float f[8];
        unpack_bf16x8(v, f);
        float s;
        const uint2 q = quantize_group_x8(f, &s);
        if (!ok) continue;
#pragma unroll
        for (int k = 0; k < kMaxK; ++k)
          if (rows[k] >= 0) {
            *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.a) + size_t(rows[k]) * H + size_t(c) * 8) = q;
            if ((lane & 15) == 0) p.a_scales[size_t(rows[k]) * (H / kActGroup) + c / 16] = s;
          }
      }
    }
    if (threadIdx.x < kMaxK) s_rows[buf ^ 1][threadIdx.x] = row_next;
    v_first = v_next;
    __syncthreads();  // s_rows[buf] read by every thread, s_rows[buf ^ 1] written
  }
}

// ---- stage 6: SiLU·up (+ quantize) ---------------------------------------------------------
// Work items of one row and up to kSiluBatch·32 16-byte chunks (8 values):
// a warp per item, lane l taking chunks l, l + 32, ... of the item, all
// loaded together; the warps of a grid that fills the device once walk the
// items of the rows in use, each item's row entry read one item ahead, so
// that an item costs one round trip; padding rows are skipped
// (warp-uniform). (A block per padded row, the old scheme, spent 31 µs at
// 1024 tokens on 24k tiny blocks, most of them padding; a flat
// thread-per-chunk walk, 47 µs; a warp per row with its entry read first, at
// 2 blocks an SM, 65 µs at 4096 tokens; a warp per row in two load rounds
// cost decode 2 µs: session 10 runs 1, 4, 5 and 6.) Items are 32 chunks (one
// a lane) when the device's warps cover each such item of the rows the call
// may use at most twice (decode: a lane's serial chunks were 1-2 µs of
// latency, run 7), else item_batches = kSiluBatch.
// W8A8: chunks l and l + 16 of a 32-chunk step are in activation groups of
// 128 held by half-warps, as quantize_group_x8 needs (I % 128 == 0).
constexpr int kSiluBatch = 3;        // I = 768 in one item
constexpr int kSiluBlocksPerSm = 4;  // 32 warps an SM: at most 64 registers a thread
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize, kSiluBlocksPerSm)
    silu_mul_kernel(const __grid_constant__ SiluMulParams p, int item_batches) {
  const int I = p.intermediate, chunks = I / 8, lane = threadIdx.x % kWarpSize;
  const int item_chunks = item_batches * kWarpSize;
  const int slices = (chunks + item_chunks - 1) / item_chunks;
  const int warps = int(gridDim.x * (blockDim.x / kWarpSize));
  // Rows past those in use hold stale entries: read, never used. The rows'
  // entries and the row count are align's, complete before gate_up (our
  // predecessor) let us start: read before the wait, gate_up's G after it.
  auto entry_of = [&](int item) { return item / slices < p.max_rows ? __ldcg(p.sorted_entries + item / slices) : -1; };
  int item = global_warp();
  int entry = entry_of(item);
  const int items = __ldcg(p.meta + 1) * slices;
  wait_for_previous_kernel();
  allow_next_kernel();
  for (; item < items; item += warps) {
    const int next = entry_of(item + warps);
    if (entry >= 0) {
      const int r = item / slices, c0 = (item % slices) * item_chunks;
      const uint16_t* gr = p.gate_up + size_t(r) * 2 * I;
      uint4 g[kSiluBatch], u[kSiluBatch];
#pragma unroll
      for (int j = 0; j < kSiluBatch; ++j) {
        const int c = c0 + j * kWarpSize + lane;
        const bool in = j < item_batches && c < chunks;
        g[j] = in ? ld_cached(gr + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
        u[j] = in ? ld_cached(gr + I + size_t(c) * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int j = 0; j < kSiluBatch; ++j) {
        if (j >= item_batches || c0 + j * kWarpSize >= chunks) break;  // warp-uniform
        const int c = c0 + j * kWarpSize + lane;
        const bool ok = c < chunks;
        float gf[8], uf[8], h[8];
        unpack_bf16x8(g[j], gf);
        unpack_bf16x8(u[j], uf);
#pragma unroll
        for (int i = 0; i < 8; ++i) h[i] = silu(gf[i]) * uf[i];
        if (!p.quantize) {
          uint4 v = pack_bf16x8(h);
          if (p.a16_order) v = a16_order_chunks(v, lane);  // chunks c, c ^ 1: both in or both out (I % 16 == 0)
          if (ok) *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.h) + size_t(r) * I + size_t(c) * 8) = v;
        } else {
          float sc;
          const uint2 q = quantize_group_x8(h, &sc);
          if (!ok) continue;
          *reinterpret_cast<uint2*>(static_cast<uint8_t*>(p.h) + size_t(r) * I + size_t(c) * 8) = q;
          if ((lane & 15) == 0) p.h_scales[size_t(r) * (I / kActGroup) + c / 16] = sc;
        }
      }
    }
    entry = next;
  }
}

// ---- stage 8: un-permute + combine --------------------------------------------------------
// One block per token, one thread per 16-byte chunk: y[b] = Σ_k w[b][k] ·
// P[row(b, k)], FP32, in slot order. A chunk's K loads are all issued before
// the first is used: the loop of load-then-FMA it replaces read 2.6-3.0 TB/s
// at 4096 tokens, this 3.97 (session 16; consistent with round trips in a
// row, not checked in the old SASS).
constexpr int kCombineLoads = 8;  // a chunk's slots loaded together (K = 8: all of them)
__global__ void __launch_bounds__(1024) combine_kernel(const __grid_constant__ CombineParams p) {
  const int b = blockIdx.x;
  const int H = p.hidden, K = p.top_k, chunks = H / 8;
  // The rows (align's) and the routing weights (the layer's input) are
  // complete before down (our predecessor) let us start: read before the
  // wait, down's partials after it. They go to shared memory: every thread
  // reads them all, and registers for all K would spill beside the loads.
  __shared__ int s_rows[kMaxK];
  __shared__ float s_w[kMaxK];
  if (threadIdx.x < K) {
    s_rows[threadIdx.x] = __ldcg(p.entry_row + size_t(b) * K + threadIdx.x);
    s_w[threadIdx.x] = __ldcg(p.route_w + size_t(b) * K + threadIdx.x);
  }
  __syncthreads();
  wait_for_previous_kernel();
  allow_next_kernel();
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int k0 = 0; k0 < kMaxK; k0 += kCombineLoads) {
      if (k0 >= K) break;
      uint4 v[kCombineLoads];
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j)
        if (k0 + j < K) v[j] = ld_stream(p.partials + size_t(s_rows[k0 + j]) * H + size_t(c) * 8);
#pragma unroll
      for (int j = 0; j < kCombineLoads; ++j) {
        if (k0 + j >= K) break;
        float f[8];
        unpack_bf16x8(v[j], f);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = __fmaf_rn(s_w[k0 + j], f[i], acc[i]);
      }
    }
    const size_t off = size_t(b) * H + size_t(c) * 8;
    if (p.out_fp32) {
      float* y = static_cast<float*>(p.y) + off;
      if (p.residual) {
        const float* res = static_cast<const float*>(p.residual) + off;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] += res[i];
      }
      reinterpret_cast<float4*>(y)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      reinterpret_cast<float4*>(y)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      if (p.residual) {
        float r[8];
        unpack_bf16x8(ld_cached(static_cast<const uint16_t*>(p.residual) + off), r);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] += r[i];
      }
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.y) + off) = pack_bf16x8(acc);
    }
  }
}

// ---- weights: BF16 -> FP8 block-128 ----------------------------------------------------------
// One block of 256 threads per 128x128 block: amax, then the codes.
__global__ void quantize_fp8_block128_kernel(const uint16_t* in, size_t rows, size_t cols, uint8_t* q,
                                             float* scales) {
  __shared__ float s_amax[8];
  const size_t m = blockIdx.z, br = blockIdx.y, bc = blockIdx.x;
  const size_t r0 = br * 128, c0 = bc * 128;
  const uint16_t* src = in + m * rows * cols;
  uint8_t* dst = q + m * rows * cols;
  float amax = 0.0f;
  for (int i = threadIdx.x; i < 128 * 128; i += blockDim.x) {
    const size_t r = r0 + i / 128, c = c0 + i % 128;
    if (r < rows && c < cols) amax = fmaxf(amax, fabsf(bf16_to_float(src[r * cols + c])));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, o));
  if (threadIdx.x % kWarpSize == 0) s_amax[threadIdx.x / kWarpSize] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < int(blockDim.x / kWarpSize); ++w) amax = fmaxf(amax, s_amax[w]);
  const float scale = e4m3_scale(amax);
  if (threadIdx.x == 0) scales[(m * gridDim.y + br) * gridDim.x + bc] = scale;
  for (int i = threadIdx.x; i < 128 * 128; i += blockDim.x) {
    const size_t r = r0 + i / 128, c = c0 + i % 128;
    if (r < rows && c < cols) dst[r * cols + c] = float_to_e4m3(bf16_to_float(src[r * cols + c]) / scale);
  }
}

}  // namespace

void topk_softmax(const TopKParams& p, cudaStream_t stream, bool pdl) {
  WD_CHECK(p.batch >= 1, "topk_softmax: batch = ", p.batch, " must be >= 1");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxTopKExperts, "topk_softmax: E = ", p.experts,
           " must be in [1, ", kMaxTopKExperts, "]");
  WD_CHECK(p.top_k >= 1 && p.top_k <= kMaxK && p.top_k <= p.experts, "topk_softmax: K = ", p.top_k,
           " must be in [1, min(E, 16)]");
  WD_CHECK(p.logits && p.ids && p.weights, "topk_softmax: a required pointer is null");
  with_topk_width(p.experts, [&](auto width) {
    launch_kernel(topk_softmax_kernel<decltype(width)::value>, dim3(warp_blocks(size_t(p.batch))),
                  dim3(kWarpsPerBlock * kWarpSize), 0, stream, pdl, p);
  });
}

void moe_align(const AlignParams& p, cudaStream_t stream, bool pdl) {
  WD_CHECK(p.entries >= 1, "moe_align: entries = ", p.entries, " must be >= 1");
  WD_CHECK(p.experts >= 1 && p.experts <= kMaxTopKExperts, "moe_align: E = ", p.experts, " must be in [1, ",
           kMaxTopKExperts, "]");
  WD_CHECK(p.tile_tokens >= 1, "moe_align: tile_tokens = ", p.tile_tokens, " must be >= 1");
  WD_CHECK(p.ids && p.counts && p.offsets && p.sorted_entries && p.block_expert && p.entry_row && p.meta,
           "moe_align: a required pointer is null");
  if (p.entries > kAlignOneBlock && p.chunk_counts != nullptr) {
    const unsigned chunks = unsigned((p.entries + kAlignChunk - 1) / kAlignChunk);
    launch_kernel(align_count_kernel, dim3(chunks), dim3(256), 0, stream, pdl, p);
    launch_kernel(align_place_kernel, dim3(chunks), dim3(kAlignChunkWarps * kWarpSize), 0, stream, pdl, p);
    return;
  }
  // Per-warp counters for every expert: at most 8192 ints (32 KB) of shared memory.
  const int warps = std::min(32, std::max(1, 8192 / p.experts));
  launch_kernel(moe_align_kernel, dim3(1), dim3(warps * kWarpSize), size_t(warps) * p.experts * sizeof(int32_t), stream,
                pdl, p);
}

void permute_rows(const PermuteParams& p, cudaStream_t stream, bool pdl) {
  WD_CHECK(p.batch >= 1 && p.top_k >= 1 && p.top_k <= kMaxK, "permute_rows: batch = ", p.batch, ", K = ",
           p.top_k, " out of range");
  WD_CHECK(p.hidden > 0 && p.hidden % (p.quantize ? kActGroup : 8) == 0, "permute_rows: H = ", p.hidden,
           p.quantize ? " must be a multiple of 128 (activation groups)" : " must be a multiple of 8");
  WD_CHECK(p.x && p.entry_row && p.a && (!p.quantize || p.a_scales), "permute_rows: a required pointer is null");
  WD_CHECK(reinterpret_cast<uintptr_t>(p.x) % 16 == 0, "permute_rows: x must be 16-byte aligned");
  WD_CHECK(!p.a16_order || (!p.quantize && p.hidden % 16 == 0),
           "permute_rows: the W8A16 K order takes BF16 rows and H % 16 == 0; H = ", p.hidden);
  const unsigned threads = row_threads(p.hidden);
  const long wave = resident_blocks(permute_rows_kernel, int(threads), 0);
  launch_kernel(permute_rows_kernel, dim3(unsigned(std::min<long>(p.batch, wave))), dim3(threads), 0, stream, pdl, p);
}

void silu_mul(const SiluMulParams& p, cudaStream_t stream, bool pdl) {
  WD_CHECK(p.max_rows >= 1, "silu_mul: max_rows = ", p.max_rows, " must be >= 1");
  WD_CHECK(p.intermediate > 0 && p.intermediate % (p.quantize ? kActGroup : 8) == 0, "silu_mul: I = ",
           p.intermediate,
           p.quantize ? " must be a multiple of 128 (activation groups)" : " must be a multiple of 8");
  WD_CHECK(p.gate_up && p.sorted_entries && p.meta && p.h && (!p.quantize || p.h_scales),
           "silu_mul: a required pointer is null");
  WD_CHECK(!p.a16_order || (!p.quantize && p.intermediate % 16 == 0),
           "silu_mul: the W8A16 K order takes BF16 h and I % 16 == 0; I = ", p.intermediate);
  // One wave of 256-thread blocks at most (a warp per item): the kernel
  // walks the items of the rows in use.
  const long resident = resident_blocks(silu_mul_kernel, kWarpsPerBlock * kWarpSize, 0);
  const size_t narrow_items = size_t(p.max_rows) * size_t((p.intermediate / 8 + kWarpSize - 1) / kWarpSize);
  const int item_batches = narrow_items <= 2 * size_t(resident) * kWarpsPerBlock ? 1 : kSiluBatch;
  const size_t slices = size_t(p.intermediate / 8 + item_batches * kWarpSize - 1) / (item_batches * kWarpSize);
  launch_kernel(silu_mul_kernel,
                dim3(unsigned(std::max(1L, std::min<long>(warp_blocks(size_t(p.max_rows) * slices), resident)))),
                dim3(kWarpsPerBlock * kWarpSize), 0, stream, pdl, p, item_batches);
}

void combine(const CombineParams& p, cudaStream_t stream, bool pdl) {
  WD_CHECK(p.batch >= 1 && p.top_k >= 1 && p.top_k <= kMaxK, "combine: batch = ", p.batch, ", K = ", p.top_k,
           " out of range");
  WD_CHECK(p.hidden > 0 && p.hidden % 8 == 0, "combine: H = ", p.hidden, " must be a multiple of 8");
  WD_CHECK(p.partials && p.entry_row && p.route_w && p.y, "combine: a required pointer is null");
  WD_CHECK((reinterpret_cast<uintptr_t>(p.y) | reinterpret_cast<uintptr_t>(p.residual)) % 16 == 0,
           "combine: y and the residual must be 16-byte aligned");
  launch_kernel(combine_kernel, dim3(unsigned(p.batch)), dim3(row_threads(p.hidden)), 0, stream, pdl, p);
}

void quantize_fp8_block128(const uint16_t* in, size_t matrices, size_t rows, size_t cols, uint8_t* q,
                           float* scales, cudaStream_t stream) {
  if (matrices == 0 || rows == 0 || cols == 0) return;
  WD_CHECK(in && q && scales, "quantize_fp8_block128: a required pointer is null");
  WD_CHECK(matrices < 65536, "quantize_fp8_block128: ", matrices, " matrices (at most 65535)");
  const dim3 grid(unsigned((cols + 127) / 128), unsigned((rows + 127) / 128), unsigned(matrices));
  quantize_fp8_block128_kernel<<<grid, 256, 0, stream>>>(in, rows, cols, q, scales);
  WD_CUDA_CHECK_LAUNCH();
}

}  // namespace wd::kernels
