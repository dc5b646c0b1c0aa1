// Memory-side ceiling of moe_down_tc's access pattern, with no compute: how
// fast HBM serves "16 rows of one expert, a P-byte piece of each row per warp"
// for the MXFP8 piece (64 bytes: one 16-byte load per lane and row) and the
// BF16 piece (128 bytes: two), at several depths of items in flight per warp.
// If the 64-byte pieces alone fall short of the 128-byte ones, the MXFP8
// kernels are bound by their access pattern, not by their instructions
// (docs/PERF_LOG.md v12). Also the tiled walks with their E8M0 scales, from a
// tensor of their own (as the kernels read them) or interleaved after each
// item's codes (PERF_LOG session 16: apart costs nothing at the kernels'
// depth; interleaved is slower).
//
//   build/bench/access_pattern
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/bandwidth.cuh"
#include "kernels/common.cuh"

namespace {

using namespace wd::kernels;

constexpr int kRows = 2048;   // H of qwen3-30b-a3b: 128 blocks of 16 rows
constexpr int kItems = 256;   // experts walked per launch

// The walk every pattern shares: items 0 .. steps-1 with kDepth in flight
// per warp (a ring of kDepth buffers of kWords 16-byte loads); load(buf, i)
// issues item i's loads (past the last item the caller clamps). An item's
// words are folded into a checksum before its buffer is reloaded; one write
// of it, under a condition that (almost) never holds, keeps the loads.
template <int kDepth, int kWords, typename Load>
__device__ __forceinline__ void walk(int steps, Load load, unsigned* sink) {
  uint4 r[kDepth][kWords];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) load(r[d], d);
  unsigned acc = 0;
  for (int it = 0; it < steps; it += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
#pragma unroll
      for (int w = 0; w < kWords; ++w) acc ^= r[d][w].x ^ r[d][w].y ^ r[d][w].z ^ r[d][w].w;
      load(r[d], it + d + kDepth);
    }
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// moe_down_tc's walk. Block b: rows [16b, 16b+16) of each walked expert;
// warp w: bytes [w·64·kLoads, (w+1)·64·kLoads) of each row; lane (g, q): rows
// g and g+8, kLoads 16-byte loads at q·16 (+ 64).
template <int kLoads, int kDepth>
__global__ void piece_read(const uint8_t* buf, size_t expert_bytes, int row_bytes, const int* experts,
                           unsigned* sink) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  const uint8_t* base = buf + size_t(blockIdx.x * 16 + g) * row_bytes + warp * 64 * kLoads + q * 16;
  const uint64_t pol = l2_stream_policy(true);
  walk<kDepth, 2 * kLoads>(kItems, [&](uint4 (&d)[2 * kLoads], int item) {
    const uint8_t* a = base + size_t(experts[min(item, kItems - 1)]) * expert_bytes;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < kLoads; ++c) d[h * kLoads + c] = ld_stream(a + size_t(h) * 8 * row_bytes + 64 * c, pol);
  }, sink);
}

// The same walk over a tiled layout: each (expert, 16-row tile, 64-byte
// unit) is 1 KB contiguous, lane l's two 16-byte pieces at 16·l and 512 + 16·l.
template <int kDepth>
__global__ void tiled_read(const uint8_t* buf, size_t expert_bytes, int row_bytes, const int* experts,
                           unsigned* sink) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, units = row_bytes / 64;
  const uint8_t* base = buf + (size_t(blockIdx.x) * units + warp) * 1024 + 16 * lane;
  const uint64_t pol = l2_stream_policy(true);
  walk<kDepth, 2>(kItems, [&](uint4 (&d)[2], int item) {
    const uint8_t* a = base + size_t(experts[min(item, kItems - 1)]) * expert_bytes;
    d[0] = ld_stream(a, pol);
    d[1] = ld_stream(a + 512, pol);
  }, sink);
}

// The tiled walk with each item's E8M0 scales as the kernels read them:
// kScaleBytes per item (down 32, gate_up 64), kScaleLoads byte loads a lane
// (down 2, gate_up 4) at lane-dependent offsets. kStride == 0: the scales in
// a tensor of their own, in item order (today's layout: a second, small
// stream from other DRAM pages); kStride > 0: item i at i·kStride with its
// scales right after its codes (one stream).
template <int kDepth, int kWords, int kScaleBytes, int kScaleLoads, int kStride>
__global__ void tiled_scaled_read(const uint8_t* buf, const uint8_t* scales, size_t expert_items,
                                  int items_per_block, int warps_per_item, const int* experts, unsigned* sink) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  constexpr int kItemBytes = kWords * 512;
  const size_t item0 = size_t(blockIdx.x) * items_per_block + warp / warps_per_item;
  const uint64_t pol = l2_stream_policy(true);
  // The walk's XOR takes words; the scale bytes ride in a fake word.
  walk<kDepth, kWords + 1>(kItems, [&](uint4 (&d)[kWords + 1], int it) {
    const size_t item = size_t(experts[min(it, kItems - 1)]) * expert_items + item0;
    const uint8_t* a = buf + item * (kStride ? kStride : kItemBytes) + 16 * lane;
#pragma unroll
    for (int w = 0; w < kWords; ++w) d[w] = ld_stream(a + 512 * w, pol);
    const uint8_t* sc = kStride ? buf + item * kStride + kItemBytes : scales + item * kScaleBytes;
    uint32_t v = 0;
#pragma unroll
    for (int j = 0; j < kScaleLoads; ++j) v = v * 131u + ld_byte(sc + 16 * j + 2 * g + q / 2);
    d[kWords] = make_uint4(v, 0, 0, 0);
  }, sink);
}

// moe_gate_up_tc's walk: block (16-neuron tile x, expert y of kItems); 4
// warps, warp w a quarter of the row (H bytes); lane (g, q) rows g, g+8,
// I+g, I+8+g; a round is kChunks 64-byte chunks of each row (16 bytes a
// lane), kDepth rounds in flight. kTiled: each (expert, tile, chunk) is 2 KB
// contiguous instead (32 rows × 64 bytes, lane l's pieces at 16·l + 512·r).
template <int kChunks, int kDepth, bool kTiled>
__global__ void gate_up_read(const uint8_t* buf, size_t expert_bytes, int row_bytes, int inter,
                             const int* experts, unsigned* sink) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  const int nc = row_bytes / 4 / 64;  // chunks per warp
  const uint8_t* ex = buf + size_t(experts[blockIdx.y]) * expert_bytes;
  const uint64_t pol = l2_stream_policy(true);
  auto addr = [&](int r, int c) -> const uint8_t* {
    const int chunk = warp * nc + c;
    if constexpr (kTiled)
      return ex + (size_t(blockIdx.x) * (row_bytes / 64) + chunk) * 2048 + 512 * r + 16 * lane;
    const int row = blockIdx.x * 16 + g + (r % 2) * 8 + (r / 2) * inter;
    return ex + size_t(row) * row_bytes + chunk * 64 + q * 16;
  };
  walk<kDepth, 4 * kChunks>(nc / kChunks, [&](uint4 (&d)[4 * kChunks], int round) {
#pragma unroll
    for (int u = 0; u < kChunks; ++u)
#pragma unroll
      for (int r = 0; r < 4; ++r) d[u * 4 + r] = ld_stream(addr(r, min(round * kChunks + u, nc - 1)), pol);
  }, sink);
}

// Median ms of 20 timed launches after 3 warm-ups; launch(rep) uses routing rep.
template <typename Launch>
float time_ms(Launch launch) {
  cudaEvent_t a, b;
  WD_CUDA_CHECK(cudaEventCreate(&a));
  WD_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int rep = 0; rep < 23; ++rep) {
    WD_CUDA_CHECK(cudaEventRecord(a));
    launch(rep);
    WD_CUDA_CHECK(cudaEventRecord(b));
    WD_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    WD_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (rep >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  WD_CUDA_CHECK(cudaEventDestroy(a));
  WD_CUDA_CHECK(cudaEventDestroy(b));
  return ms[ms.size() / 2];
}

template <int kLoads, int kDepth>
float run(const uint8_t* buf, size_t expert_bytes, int row_bytes, const int* experts, unsigned* sink) {
  const int warps = row_bytes / (64 * kLoads);
  return time_ms([&](int rep) {
    piece_read<kLoads, kDepth><<<kRows / 16, warps * 32>>>(buf, expert_bytes, row_bytes, experts + rep * kItems, sink);
  });
}

template <int kDepth>
float run_tiled(const uint8_t* buf, size_t expert_bytes, int row_bytes, const int* experts, unsigned* sink) {
  return time_ms([&](int rep) {
    tiled_read<kDepth><<<kRows / 16, (row_bytes / 64) * 32>>>(buf, expert_bytes, row_bytes, experts + rep * kItems, sink);
  });
}

// Down (1 KB items, 12 warps a block of 16 rows, I = 768) and gate_up (2 KB
// items, 4 warps of 8 chunks a block of 16 neurons, H = 2048) of qwen3-30b-a3b
// MXFP8, tiled, with scales: separate (kStride 0) or interleaved.
template <int kDepth, int kWords, int kScaleBytes, int kScaleLoads, int kStride>
float run_scaled(const uint8_t* buf, const uint8_t* scales, size_t expert_items, int blocks, int items_per_block,
                 int warps, const int* experts, unsigned* sink) {
  return time_ms([&](int rep) {
    tiled_scaled_read<kDepth, kWords, kScaleBytes, kScaleLoads, kStride>
        <<<blocks, warps * 32>>>(buf, scales, expert_items, items_per_block, 1, experts + rep * kItems, sink);
  });
}

// gate_up of qwen3-30b-a3b: H = 2048 (MXFP8) or 4096 (BF16) bytes a row, I = 768; kItems
// experts = blocks in y, I/16 tiles in x.
template <int kChunks, int kDepth, bool kTiled>
float run_gate_up(const uint8_t* buf, size_t expert_bytes, int row_bytes, const int* experts, unsigned* sink) {
  return time_ms([&](int rep) {
    gate_up_read<kChunks, kDepth, kTiled><<<dim3(768 / 16, kItems), 128>>>(buf, expert_bytes, row_bytes, 768,
                                                                          experts + rep * kItems, sink);
  });
}

}  // namespace

int main() {
  const size_t buf_bytes = size_t(4) << 30;
  const auto bw = measure_bandwidth(buf_bytes, 20, nullptr);
  std::printf("streaming read %.2f TB/s (4 GiB)\n", bw.read_tbps);
  wd::DeviceBuffer<uint8_t> buf_mem(buf_bytes), scales_mem(buf_bytes / 32);
  wd::DeviceBuffer<unsigned> sink_mem(1);
  wd::DeviceBuffer<int> experts_mem(size_t(kItems) * 23);
  buf_mem.fill_bytes(0x5a);
  uint8_t* const buf = buf_mem.data();
  unsigned* const sink = sink_mem.data();
  int* const experts = experts_mem.data();
  std::mt19937 rng(1);
  std::printf("%-34s %8s %8s %7s\n", "pattern (row bytes, piece, depth)", "us", "TB/s", "% read");
  auto report = [&](const char* name, int row_bytes, auto fn) {
    const size_t expert_bytes = size_t(kRows) * row_bytes;
    const int n_experts = int(buf_bytes / expert_bytes);
    std::vector<int> ids(size_t(kItems) * 23);
    for (int& e : ids) e = int(rng() % unsigned(n_experts));
    experts_mem.upload(ids);
    const float ms = fn(expert_bytes);
    const double tbps = double(kItems) * expert_bytes / (ms * 1e-3) / 1e12;
    std::printf("%-34s %8.1f %8.2f %7.1f\n", name, ms * 1e3, tbps, 100.0 * tbps / bw.read_tbps);
  };
#define WD_CASE(NAME, ROW, LOADS, DEPTH)                                                                    \
  report(NAME, ROW, [&](size_t eb) { return run<LOADS, DEPTH>(buf, eb, ROW, experts, sink); })
  WD_CASE("mxfp8 now: 768, 64 B x12 warps, d2", 768, 1, 2);
  WD_CASE("mxfp8 now: 768, 64 B x12 warps, d4", 768, 1, 4);
  WD_CASE("mxfp8 now: 768, 64 B x12 warps, d8", 768, 1, 8);
  WD_CASE("bf16 now: 1536, 128 B x12 warps, d2", 1536, 2, 2);
  WD_CASE("bf16 now: 1536, 128 B x12 warps, d4", 1536, 2, 4);
  WD_CASE("mxfp8 2-unit: 768, 128 B x6, d2", 768, 2, 2);
  WD_CASE("mxfp8 2-unit: 768, 128 B x6, d4", 768, 2, 4);
  WD_CASE("mxfp8 2-unit: 768, 128 B x6, d8", 768, 2, 8);
#undef WD_CASE
#define WD_TILED(NAME, ROW, DEPTH) \
  report(NAME, ROW, [&](size_t eb) { return run_tiled<DEPTH>(buf, eb, ROW, experts, sink); })
  WD_TILED("mxfp8 tiled 1 KB: 768, x12, d2", 768, 2);
  WD_TILED("mxfp8 tiled 1 KB: 768, x12, d3", 768, 3);
  WD_TILED("mxfp8 tiled 1 KB: 768, x12, d4", 768, 4);
#undef WD_TILED
  // gate_up: expert = 2I rows of H = 2048 bytes (MXFP8 qwen3-30b-a3b).
#define WD_GU(NAME, CH, DEPTH, TILED) \
  report(NAME, 1536, [&](size_t eb) { return run_gate_up<CH, DEPTH, TILED>(buf, eb, 2048, experts, sink); })
  WD_GU("gate_up mxfp8 rows, 1 chunk, d2", 1, 2, false);
  WD_GU("gate_up mxfp8 rows, 2 chunks, d2", 2, 2, false);
  WD_GU("gate_up mxfp8 tiled, 1 chunk, d2", 1, 2, true);
  WD_GU("gate_up mxfp8 tiled, 1 chunk, d4", 1, 4, true);
  WD_GU("gate_up mxfp8 tiled, 2 chunks, d2", 2, 2, true);
  report("gate_up bf16 rows, 2 chunks, d2", 3072,
         [&](size_t eb) { return run_gate_up<2, 2, false>(buf, eb, 4096, experts, sink); });
#undef WD_GU
  // Scales: down items 1 KB + 32 B (12 items a block of 16 rows, 128 blocks
  // of 12 warps), gate_up items 2 KB + 64 B (an expert's 1536 items walked by
  // 48 blocks of 32 warps, one item a warp per expert: not gate_up's own
  // walk; the question is only the scales' stream, every gate_up row below
  // walks the same way). Counted bytes: codes + scales (also where the
  // scales are not read: those rows are the same walk without its scale loads).
  scales_mem.fill_bytes(0x7f);
  uint8_t* const scales = scales_mem.data();
  auto report_scaled = [&](const char* name, size_t code_bytes, size_t scale_bytes, size_t stride, auto fn) {
    // An expert's codes + scales; its items at `stride` apart when interleaved.
    const size_t items = code_bytes / (scale_bytes == 32 ? 1024 : 2048);
    const size_t footprint = stride ? items * stride : code_bytes;
    const int n_experts = int(buf_bytes / footprint) - 1;
    std::vector<int> ids(size_t(kItems) * 23);
    for (int& e : ids) e = int(rng() % unsigned(n_experts));
    experts_mem.upload(ids);
    const float ms = fn(items);
    const double tbps = double(kItems) * (code_bytes + items * scale_bytes) / (ms * 1e-3) / 1e12;
    std::printf("%-34s %8.1f %8.2f %7.1f\n", name, ms * 1e3, tbps, 100.0 * tbps / bw.read_tbps);
  };
  const size_t down_codes = size_t(2048) * 768, gu_codes = size_t(1536) * 2048;
#define WD_DS(NAME, DEPTH, STRIDE, LOADS)                                                              \
  report_scaled(NAME, down_codes, 32, STRIDE, [&](size_t ei) {                                         \
    return run_scaled<DEPTH, 2, 32, LOADS, STRIDE>(buf, scales, ei, 128, 12, 12, experts, sink);       \
  })
  WD_DS("down tiled, scales not read, d2", 2, 0, 0);
  WD_DS("down tiled + scales apart, d2", 2, 0, 2);
  WD_DS("down tiled + scales apart, d3", 3, 0, 2);
  WD_DS("down tiled + scales apart, d4", 4, 0, 2);
  WD_DS("down interleaved 1056, d2", 2, 1056, 2);
  WD_DS("down interleaved 1056, d3", 3, 1056, 2);
  WD_DS("down interleaved 1152, d2", 2, 1152, 2);
  WD_DS("down interleaved 1152, d3", 3, 1152, 2);
#undef WD_DS
#define WD_GS(NAME, DEPTH, STRIDE, LOADS)                                                              \
  report_scaled(NAME, gu_codes, 64, STRIDE, [&](size_t ei) {                                           \
    return run_scaled<DEPTH, 4, 64, LOADS, STRIDE>(buf, scales, ei, 48, 32, 32, experts, sink);          \
  })
  WD_GS("gate_up tiled, scales not read, d2", 2, 0, 0);
  WD_GS("gate_up tiled + scales apart, d2", 2, 0, 4);
  WD_GS("gate_up tiled + scales apart, d3", 3, 0, 4);
  WD_GS("gate_up interleaved 2112, d2", 2, 2112, 4);
  WD_GS("gate_up interleaved 2176, d2", 2, 2176, 4);
#undef WD_GS
  return 0;
}
