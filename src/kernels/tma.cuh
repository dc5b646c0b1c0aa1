// Tensor-memory-accelerator loads, shared-memory barriers and cluster
// primitives (sm_90+), for the warp-specialised classical GEMM
// (classical_tma_gemm.cu) and the router's cluster (router.cu).
//
// The protocol: a producer thread announces the bytes a stage will receive
// (arrive_expect_tx) and issues TMA copies that complete against the same
// barrier; consumers wait on the barrier's phase parity, and tell the
// producer a slot is free by arriving on a second barrier. A barrier's phase
// flips when all its expected arrivals and bytes are in; waiting on parity
// 1 of a fresh barrier returns at once (the phase "before" the first),
// which lets the producer fill every slot once before the first release.
//
// Clusters: a multicast copy lands at the same shared-memory offset in every
// block of its mask and completes bytes on each one's barrier at that offset;
// a block may arrive on a barrier of another block of its cluster
// (arrive_peer). Bytes of a phase may complete before that phase's
// arrive_expect_tx: the phase cannot end while the producer's arrival is
// missing.
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
// One arrival on the barrier at the same offset in the other block of a
// cluster of two (rank read inside: nothing held live across the caller's
// code). Release at CTA scope, as the local arrive: it orders this thread's
// reads of the slot before the arrival, all a slot release needs (a
// cluster-scope release also waits for the thread's memory operations to be
// visible cluster-wide).
__device__ __forceinline__ void arrive_peer(uint32_t bar) {
  asm volatile(
      "{\n.reg .b32 r, remote;\n"
      "mov.u32 r, %%cluster_ctarank;\n"
      "xor.b32 r, r, 1;\n"
      "mapa.shared::cluster.u32 remote, %0, r;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every non-exited thread of the cluster (each warp whole) arrives, then waits
// for the others: barrier initialisation before remote use, and no block
// exits while another may still arrive on its barriers.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Stores v at the shared-memory address `addr` (an offset of this block's
// shared window) of cluster block `rank`; a cluster barrier's release and
// acquire order it before the owner's reads.
__device__ __forceinline__ void st_cluster(uint32_t addr, uint32_t rank, float v) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "st.shared::cluster.f32 [remote], %2;\n}\n" ::"r"(addr),
      "r"(rank), "f"(v)
      : "memory");
}
// cluster_sync in two halves, for work between them: arrive (relaxed:
// orders nothing; e.g. "this block has started") and wait (acquire).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
// One arrival when every cp.async this thread issued so far has landed (the
// barrier's arrival count must include it: .noinc).
__device__ __forceinline__ void arrive_on_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Orders the shared-memory writes this thread has observed through the
// generic proxy (cp.async copies, acquired by a barrier wait) before its
// async-proxy reads (wgmma operands) that follow.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
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
// load_2d into every block of `mask` (bit i: cluster rank i).
__device__ __forceinline__ void load_2d_multicast(uint32_t dst, const void* map, int x, int y, uint32_t bar,
                                                  uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "h"(mask)
      : "memory");
}
// The same for the rank-4 and rank-5 maps over the tiled BF16 weight copies
// (core/tiled_box_map.h), coordinates innermost first.
__device__ __forceinline__ void load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void load_4d_multicast(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                                  uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void load_5d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3, int c4,
                                        uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], "
      "[%7];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void load_5d_multicast(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                                  int c4, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3, %4, %5, %6}], [%7], %8;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar), "h"(mask)
      : "memory");
}
#endif

}  // namespace wd::kernels::tma
