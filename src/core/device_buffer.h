// RAII device allocation. Allocation happens at set-up time only: the forward
// paths take views over buffers allocated up front (engine-ready: no
// cudaMalloc inside a forward call).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/cuda_check.h"

namespace wd {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n) WD_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);  // no throw from a destructor; a failure here is already fatal
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFree(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    WD_CHECK(host.size() == n_, "upload: host size ", host.size(), " != device size ", n_);
    if (n_) WD_CUDA_CHECK(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) WD_CUDA_CHECK(cudaMemcpy(host.data(), p_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  // Fill every byte with `byte` (0xFF makes FP32/BF16 NaN: the poison value).
  void fill_bytes(int byte) {
    if (n_) WD_CUDA_CHECK(cudaMemset(p_, byte, bytes()));
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace wd
