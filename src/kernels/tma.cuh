// Tensor-memory-accelerator loads and shared-memory barriers (sm_90+), for
// the warp-specialised classical GEMM (classical_tma_gemm.cu).
//
// The protocol: a producer thread announces the bytes a stage will receive
// (arrive_expect_tx) and issues TMA copies that complete against the same
// barrier; consumers wait on the barrier's phase parity, and tell the
// producer a slot is free by arriving on a second barrier. A barrier's phase
// flips when all its expected arrivals and bytes are in; waiting on parity
// 1 of a fresh barrier returns at once (the phase "before" the first),
// which lets the producer fill every slot once before the first release.
#pragma once

#include <cstdint>

namespace wd::kernels::tma {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) and to the
// other threads; a __syncthreads() must follow before anyone uses them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival when every cp.async this thread issued so far has landed (the
// barrier's arrival count must include it: .noinc).
__device__ __forceinline__ void arrive_on_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// 2D tiled copy global -> shared of the box at (x = inner element, y = row),
// completing `bar`'s transaction bytes. Elements past the tensor's ends are
// filled with zeros (and still counted as bytes).
__device__ __forceinline__ void load_2d(uint32_t dst, const void* map, int x, int y, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
#endif

}  // namespace wd::kernels::tma
