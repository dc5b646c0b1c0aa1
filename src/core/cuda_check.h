// The one error path for CUDA calls: WD_CUDA_CHECK(expr) throws wd::CudaError
// naming the expression, file:line and the error's name and string.
// WD_CUDA_CHECK_LAUNCH() checks the last kernel launch.
// The runtime also records a failed call's error as the thread's last error,
// which the next WD_CUDA_CHECK_LAUNCH() would report against an unrelated
// launch; the throw clears it (a sticky error, a faulted context, stays).
#pragma once

#include <cuda_runtime.h>

#include "warpdecode/error.h"

namespace wd::detail {
[[noreturn]] inline void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();
  throw CudaError(concat("CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ") in ",
                         expr, " at ", file, ":", line));
}
}  // namespace wd::detail

#define WD_CUDA_CHECK(expr)                                                    \
  do {                                                                         \
    const cudaError_t wd_err_ = (expr);                                        \
    if (wd_err_ != cudaSuccess) ::wd::detail::throw_cuda(wd_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define WD_CUDA_CHECK_LAUNCH() WD_CUDA_CHECK(cudaGetLastError())
