#include "kernels/bandwidth.cuh"

#include <algorithm>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/common.cuh"

namespace wd::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 8;

__global__ void __launch_bounds__(kThreads) stream_read_kernel(const uint4* data, size_t n, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * kThreads;
  size_t i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = ld_stream(data + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = ld_stream(data + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // practically never true; keeps the loads alive
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

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void stream_read(const uint4* data, size_t n, unsigned* sink, cudaStream_t stream) {
  int sms = 0, dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  stream_read_kernel<<<sms * 4, kThreads, 0, stream>>>(data, n, sink);
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
  std::vector<float> read_ms, write_ms, copy_ms;
  for (int r = -2; r < reps; ++r) {  // two warm-up runs
    float ms = 0;
    WD_CUDA_CHECK(cudaEventRecord(start, stream));
    stream_read(src.data(), n, sink.data(), stream);
    WD_CUDA_CHECK(cudaEventRecord(stop, stream));
    WD_CUDA_CHECK(cudaEventSynchronize(stop));
    WD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) read_ms.push_back(ms);
    WD_CUDA_CHECK(cudaEventRecord(start, stream));
    stream_write(dst.data(), n, 0x9E3779B9u + unsigned(r), stream);
    WD_CUDA_CHECK(cudaEventRecord(stop, stream));
    WD_CUDA_CHECK(cudaEventSynchronize(stop));
    WD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) write_ms.push_back(ms);
    WD_CUDA_CHECK(cudaEventRecord(start, stream));
    WD_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), n * sizeof(uint4), cudaMemcpyDeviceToDevice, stream));
    WD_CUDA_CHECK(cudaEventRecord(stop, stream));
    WD_CUDA_CHECK(cudaEventSynchronize(stop));
    WD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (r >= 0) copy_ms.push_back(ms);
  }
  WD_CUDA_CHECK(cudaEventDestroy(start));
  WD_CUDA_CHECK(cudaEventDestroy(stop));
  BandwidthResult res;
  res.bytes = n * sizeof(uint4);
  res.read_tbps = double(res.bytes) / (median(read_ms) * 1e-3) / 1e12;
  res.write_tbps = double(res.bytes) / (median(write_ms) * 1e-3) / 1e12;
  res.copy_tbps = 2.0 * double(res.bytes) / (median(copy_ms) * 1e-3) / 1e12;
  return res;
}

}  // namespace wd::kernels
