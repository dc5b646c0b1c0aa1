#include "kernels/launch.cuh"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace wd::kernels {
namespace {

std::mutex g_mutex;
std::map<std::pair<const void*, int>, size_t> g_smem_limit;                   // (kernel, device) -> limit set
std::map<std::tuple<const void*, int, int, size_t>, long> g_resident;        // (kernel, device, threads, smem)
std::map<std::tuple<const void*, int, int, size_t, int>, long> g_clusters;   // (..., cluster size)

int current_device() {
  int dev = 0;
  WD_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

// With g_mutex held. Set even below 48 KB: that default bounds static plus
// dynamic shared memory, and a kernel with static shared memory needs the
// attribute for less dynamic memory than that.
void raise_smem_limit(const void* kernel, int dev, size_t bytes) {
  if (bytes == 0) return;
  size_t& limit = g_smem_limit[{kernel, dev}];
  if (limit >= bytes) return;
  WD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  limit = bytes;
}

}  // namespace

void ensure_dynamic_smem(const void* kernel, size_t bytes) {
  if (bytes == 0) return;
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  raise_smem_limit(kernel, dev, bytes);
}

long resident_blocks(const void* kernel, int threads, size_t smem) {
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto key = std::make_tuple(kernel, dev, threads, smem);
  if (const auto it = g_resident.find(key); it != g_resident.end()) return it->second;
  raise_smem_limit(kernel, dev, smem);
  int sms = 0, per_sm = 0;
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  WD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  const long n = std::max(1L, long(sms) * per_sm);
  g_resident[key] = n;
  return n;
}

namespace {
// With g_mutex held: clusters of `cluster` blocks the device holds at once
// (0: none fits).
long active_clusters(const void* kernel, int dev, int threads, size_t smem, int cluster) {
  const auto key = std::make_tuple(kernel, dev, threads, smem, cluster);
  if (const auto it = g_clusters.find(key); it != g_clusters.end()) return it->second;
  raise_smem_limit(kernel, dev, smem);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(cluster));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim = {unsigned(cluster), 1, 1};
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  // A size the device or kernel cannot take at all (non-portable sizes
  // above 8 where unsupported) comes back as an error, not as 0: here it
  // means "not this size", and the error (not sticky) is cleared.
  int clusters = 0;
  cudaError_t err = cluster > 8 ? cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)
                                : cudaSuccess;
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    clusters = 0;
  }
  g_clusters[key] = clusters;
  return clusters;
}
}  // namespace

long resident_clusters(const void* kernel, int threads, size_t smem, int cluster) {
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  return std::max(1L, active_clusters(kernel, dev, threads, smem, cluster));
}

int largest_cluster(const void* kernel, int threads, size_t smem, int wanted) {
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int c = wanted; c > 1; --c)
    if (active_clusters(kernel, dev, threads, smem, c) > 0) return c;
  return 1;
}

}  // namespace wd::kernels
