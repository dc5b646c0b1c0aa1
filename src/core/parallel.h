// parallel_for over [0, n) on std::threads, in contiguous chunks. Results of
// the CPU reference never depend on the thread count: each index is computed
// by exactly one thread with the same arithmetic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace wd {

inline int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

template <typename F>
void parallel_for(size_t n, int threads, F&& f) {
  if (threads <= 0) threads = default_threads();
  const size_t t = std::min<size_t>(size_t(threads), n);
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  pool.reserve(t);
  for (size_t k = 0; k < t; ++k) {
    pool.emplace_back([&, k] {
      const size_t begin = n * k / t, end = n * (k + 1) / t;
      try {
        for (size_t i = begin; i < end; ++i) f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace wd
