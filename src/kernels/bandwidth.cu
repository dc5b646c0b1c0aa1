#include "kernels/bandwidth.cuh"

#include <algorithm>
#include <array>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "core/median.h"
#include "kernels/common.cuh"

namespace wd::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 8;

// Each thread's checksum of what it read, summed into *sink one atomic a
// warp: the loads cannot be optimised away, and a word read twice or not at
// all changes the sum (tests/gpu/test_bandwidth.cpp checks every pattern).
__device__ __forceinline__ unsigned fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

__device__ __forceinline__ void add_to_sink(unsigned acc, unsigned* sink) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sink, acc);
}

// Grid-stride: word i of the grid's pass, kUnroll passes in flight a thread
// (at any moment the grid touches kUnroll windows of grid × 16 bytes).
__global__ void __launch_bounds__(kThreads) stream_read_kernel(const uint4* data, size_t n, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = ld_stream(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += fold(v[u]);
  }
  for (; i < n; i += stride) acc += fold(ld_stream(data + i));
  add_to_sink(acc, sink);
}

// Warp chunks: each warp streams its own contiguous range (its share of the
// buffer, a multiple of 512 bytes), kDepth steps of 512 contiguous bytes in
// flight — the shape of warp decode's tiled weight items, which on some
// cards read faster than the grid-stride walk (session 43).
template <int kDepth, bool kEvictFirst>
__global__ void __launch_bounds__(kThreads) stream_read_chunks_kernel(const uint4* data, size_t n, unsigned* sink) {
  const int lane = threadIdx.x & 31;
  const size_t warps = size_t(gridDim.x) * (kThreads / 32);
  const size_t warp = size_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const size_t per = ((n + warps - 1) / warps + 31) & ~size_t(31);  // words a warp, a multiple of 32
  const size_t begin = warp * per < n ? warp * per : n;
  const size_t end = begin + per < n ? begin + per : n;
  [[maybe_unused]] const uint64_t pol = kEvictFirst ? l2_stream_policy(true) : 0;
  auto load = [&](size_t j) { return kEvictFirst ? ld_stream(data + j, pol) : ld_stream(data + j); };
  unsigned acc = 0;
  size_t j = begin + lane;
  for (; j + (kDepth - 1) * 32 < end; j += kDepth * 32) {
    uint4 v[kDepth];
#pragma unroll
    for (int u = 0; u < kDepth; ++u) v[u] = load(j + u * 32);
#pragma unroll
    for (int u = 0; u < kDepth; ++u) acc += fold(v[u]);
  }
  for (; j < end; j += 32) acc += fold(load(j));
  add_to_sink(acc, sink);
}

// The read kernel's walk with stores: kUnroll stores in flight a thread.
__global__ void __launch_bounds__(kThreads) stream_write_kernel(uint4* data, size_t n, unsigned seed) {
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  auto word = [&](size_t j) { return make_uint4(unsigned(j) ^ seed, seed, unsigned(j * 2654435761u), 0x3F800000u); };
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) data[i + u * stride] = word(i + u * stride);
  }
  for (; i < n; i += stride) data[i] = word(i);
}

__global__ void fill_kernel(uint4* data, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    data[i] = make_uint4(unsigned(i), unsigned(i >> 32) ^ 0x5A5A5A5Au, unsigned(i * 2654435761u), 0x3F800000u);
}

}  // namespace

const char* read_pattern_name(ReadPattern p) {
  switch (p) {
    case ReadPattern::kGridStride: return "grid-stride";
    case ReadPattern::kWarpChunks4: return "warp-chunks-d4";
    case ReadPattern::kWarpChunks8: return "warp-chunks-d8";
    case ReadPattern::kWarpChunks4EvictFirst: return "warp-chunks-d4-ef";
    case ReadPattern::kCount: break;
  }
  return "?";
}

void stream_read(const uint4* data, size_t n, unsigned* sink, cudaStream_t stream, ReadPattern pattern) {
  int sms = 0, dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int grid = sms * 4;  // 2048 threads an SM, every pattern
  switch (pattern) {
    case ReadPattern::kGridStride: stream_read_kernel<<<grid, kThreads, 0, stream>>>(data, n, sink); break;
    case ReadPattern::kWarpChunks4:
      stream_read_chunks_kernel<4, false><<<grid, kThreads, 0, stream>>>(data, n, sink);
      break;
    case ReadPattern::kWarpChunks8:
      stream_read_chunks_kernel<8, false><<<grid, kThreads, 0, stream>>>(data, n, sink);
      break;
    case ReadPattern::kWarpChunks4EvictFirst:
      stream_read_chunks_kernel<4, true><<<grid, kThreads, 0, stream>>>(data, n, sink);
      break;
    case ReadPattern::kCount: WD_CHECK(false, "stream_read: ReadPattern::kCount is not a read pattern");
  }
  WD_CUDA_CHECK_LAUNCH();
}

void stream_write(uint4* data, size_t n, unsigned seed, cudaStream_t stream) {
  int sms = 0, dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  stream_write_kernel<<<sms * 4, kThreads, 0, stream>>>(data, n, seed);
  WD_CUDA_CHECK_LAUNCH();
}

BandwidthResult measure_bandwidth(size_t bytes, int reps, cudaStream_t stream) {
  const size_t n = bytes / sizeof(uint4);
  DeviceBuffer<uint4> src(n), dst(n);
  DeviceBuffer<unsigned> sink(1);
  fill_kernel<<<2048, 256, 0, stream>>>(src.data(), n);  // never time zeros
  WD_CUDA_CHECK_LAUNCH();
  cudaEvent_t start, stop;
  WD_CUDA_CHECK(cudaEventCreate(&start));
  WD_CUDA_CHECK(cudaEventCreate(&stop));
  std::array<std::vector<float>, kReadPatterns> read_ms;
  std::vector<float> write_ms, copy_ms;
  auto time = [&](auto&& enqueue) {
    float ms = 0;
    WD_CUDA_CHECK(cudaEventRecord(start, stream));
    enqueue();
    WD_CUDA_CHECK(cudaEventRecord(stop, stream));
    WD_CUDA_CHECK(cudaEventSynchronize(stop));
    WD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  };
  // The patterns interleaved rep by rep, so that a drift of the card's state
  // (clock, temperature, a neighbour) falls on all of them alike.
  for (int r = -2; r < reps; ++r) {  // two warm-up runs
    for (int p = 0; p < kReadPatterns; ++p) {
      const float ms = time([&] { stream_read(src.data(), n, sink.data(), stream, ReadPattern(p)); });
      if (r >= 0) read_ms[p].push_back(ms);
    }
    const float wms = time([&] { stream_write(dst.data(), n, 0x9E3779B9u + unsigned(r), stream); });
    if (r >= 0) write_ms.push_back(wms);
    const float cms = time(
        [&] { WD_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), n * sizeof(uint4), cudaMemcpyDeviceToDevice, stream)); });
    if (r >= 0) copy_ms.push_back(cms);
  }
  WD_CUDA_CHECK(cudaEventDestroy(start));
  WD_CUDA_CHECK(cudaEventDestroy(stop));
  BandwidthResult res;
  res.bytes = n * sizeof(uint4);
  for (int p = 0; p < kReadPatterns; ++p) {
    res.read_pattern_tbps[p] = double(res.bytes) / (median(read_ms[p]) * 1e-3) / 1e12;
    res.read_tbps = std::max(res.read_tbps, res.read_pattern_tbps[p]);
  }
  res.write_tbps = double(res.bytes) / (median(write_ms) * 1e-3) / 1e12;
  res.copy_tbps = 2.0 * double(res.bytes) / (median(copy_ms) * 1e-3) / 1e12;
  return res;
}

}  // namespace wd::kernels
