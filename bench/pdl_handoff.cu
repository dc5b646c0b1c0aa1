// What the hand-off between two dependent kernels costs: a producer grid
// shaped like moe_gate_up_tc at B = 1 (384 blocks of 4 warps, each busy for
// a fixed time, then writing its 128 floats of "h") and a consumer grid
// shaped like moe_down_tc on qwen3-30b-a3b (128 blocks of 12 warps, each
// warp reading all of h once it may), in three hand-offs:
//
//   stream  plain stream order (the consumer launched after the producer)
//   pdl     programmatic dependent launch: the producer's blocks signal at
//           their start, the consumer's warps call griddepcontrol.wait
//   flag    PDL launch, but the consumer's warps poll a flag instead of
//           waiting: every producer block, after its stores, a block
//           barrier and a release, counts itself (atom.acq_rel, wrapping);
//           the last one publishes the flag (st.release); lane 0 of each
//           consumer warp spins on ld.acquire, and the consumer's last block
//           clears the flag (every warp has passed it by then)
//
// Why: at B = 1 warp decode's two kernels spend 2-3 µs between gate_up's
// last store and down's first use of h (PERF_LOG session 33); if the
// griddepcontrol.wait release were a large part of that, a flag hand-off in
// the real kernels would be worth building. Measured (session 40, H200):
// PDL releases the consumer 0.51 µs after the producer's last store, stream
// order 0.77-1.02 µs, the flag 2.8-3.6 µs (its 384 acq_rel atomics on one
// word serialise); the flag in the real kernels cost the layer 1.5-2.5 µs
// at B = 1 (bench/results/warp/s40). So the hand-off is not where B = 1's
// time goes, and PDL is the right one. Printed: µs per producer + consumer
// pair (CUDA graph of kPairs pairs, median of kReps replays), and from
// %globaltimer stamps the median over pairs of (first / last consumer warp
// past its wait) − (last producer block's stores done). The consumer checks
// every h value it reads; a wrong one fails the run (rc 1).
//
//   build/bench/pdl_handoff
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"
#include "core/median.h"

namespace {

using namespace wd::kernels;
using wd::DeviceBuffer;
using wd::median;

constexpr int kProducerBlocks = 384, kProducerThreads = 128;
constexpr int kConsumerBlocks = 128, kConsumerThreads = 384;
constexpr int kH = kProducerBlocks * kProducerThreads;  // floats of "h"
constexpr int kPairs = 16, kReps = 25;

enum Mode { kStream = 0, kPdl = 1, kFlag = 2 };

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned atom_inc_acq_rel(unsigned* p, unsigned wrap) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(wrap) : "memory");
  return old;
}

// sync: [0] producer blocks done (wraps each pair), [1] the flag, [2]
// consumer blocks done (wraps).
__global__ void producer(float* h, unsigned* sync, int mode, int pair, unsigned spin_ns,
                         unsigned long long* t_done) {
  allow_next_kernel();
  const unsigned long long t0 = now_ns();
  while (now_ns() - t0 < spin_ns) {
  }
  const int i = blockIdx.x * kProducerThreads + threadIdx.x;
  h[i] = float(pair * 7 + i % 1000);
  __syncthreads();
  if (threadIdx.x == 0) {
    t_done[blockIdx.x] = now_ns();
    if (mode == kFlag && atom_inc_acq_rel(sync, kProducerBlocks - 1) == kProducerBlocks - 1) st_release(sync + 1, 1);
  }
}

__global__ void consumer(const float* h, unsigned* sync, int mode, int pair, unsigned long long* t_pass,
                         unsigned* bad) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (mode == kPdl) wait_for_previous_kernel();
  if (mode == kFlag) {
    if (lane == 0)
      while (ld_acquire(sync + 1) == 0) {
      }
    __syncwarp();
  }
  if (lane == 0) t_pass[blockIdx.x * (kConsumerThreads / 32) + warp] = now_ns();
  // Each warp reads a 1/kConsumerBlocks slice of h, as down's warps read h
  // from L2, and checks it.
  const int per_block = kH / kConsumerBlocks;
  unsigned wrong = 0;
  for (int j = threadIdx.x; j < per_block; j += kConsumerThreads) {
    const int i = blockIdx.x * per_block + j;
    wrong += __ldcg(h + i) != float(pair * 7 + i % 1000);
  }
  if (wrong) atomicAdd(bad, wrong);
  if (mode == kFlag) {
    __syncthreads();
    if (threadIdx.x == 0 && atom_inc_acq_rel(sync + 2, kConsumerBlocks - 1) == kConsumerBlocks - 1)
      st_release(sync + 1, 0);
  }
}

void enqueue_pair(int mode, int pair, float* h, unsigned* sync, unsigned spin_ns, unsigned long long* t_done,
                  unsigned long long* t_pass, unsigned* bad, cudaStream_t s) {
  producer<<<kProducerBlocks, kProducerThreads, 0, s>>>(h, sync, mode, pair, spin_ns, t_done);
  WD_CUDA_CHECK_LAUNCH();
  launch_kernel(consumer, dim3(kConsumerBlocks), dim3(kConsumerThreads), 0, s, mode != kStream, h, sync, mode, pair,
                t_pass, bad);
}

}  // namespace

int main() {
  cudaStream_t s;
  WD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr int kWarps = kConsumerBlocks * kConsumerThreads / 32;
  DeviceBuffer<float> h(kH);
  DeviceBuffer<unsigned> sync(4), bad(1);
  DeviceBuffer<unsigned long long> t_done(size_t(kPairs) * kProducerBlocks), t_pass(size_t(kPairs) * kWarps);
  sync.fill_bytes(0);
  bad.fill_bytes(0);

  std::printf("hand-off between a %d×%d producer and a %d×%d consumer (µs)\n", kProducerBlocks, kProducerThreads,
              kConsumerBlocks, kConsumerThreads);
  std::printf("%-8s %8s %12s %14s %14s\n", "mode", "spin", "pair", "first pass", "last pass");
  const char* names[] = {"stream", "pdl", "flag"};
  for (unsigned spin_ns : {2000u, 10000u}) {
    for (int mode : {kStream, kPdl, kFlag}) {
      cudaGraph_t g;
      cudaGraphExec_t ge;
      WD_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int p = 0; p < kPairs; ++p)
        enqueue_pair(mode, p, h.data(), sync.data(), spin_ns, t_done.data() + size_t(p) * kProducerBlocks,
                     t_pass.data() + size_t(p) * kWarps, bad.data(), s);
      WD_CUDA_CHECK(cudaStreamEndCapture(s, &g));
      WD_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      cudaEvent_t e0, e1;
      WD_CUDA_CHECK(cudaEventCreate(&e0));
      WD_CUDA_CHECK(cudaEventCreate(&e1));
      std::vector<double> pair_us, first, last;
      for (int r = 0; r < kReps + 3; ++r) {
        WD_CUDA_CHECK(cudaEventRecord(e0, s));
        WD_CUDA_CHECK(cudaGraphLaunch(ge, s));
        WD_CUDA_CHECK(cudaEventRecord(e1, s));
        WD_CUDA_CHECK(cudaEventSynchronize(e1));
        if (r < 3) continue;  // warm-up
        float ms;
        WD_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        pair_us.push_back(1000.0 * ms / kPairs);
        const std::vector<unsigned long long> done = t_done.download(), pass = t_pass.download();
        for (int p = 0; p < kPairs; ++p) {
          const auto d = *std::max_element(done.begin() + size_t(p) * kProducerBlocks,
                                           done.begin() + size_t(p + 1) * kProducerBlocks);
          const auto mm = std::minmax_element(pass.begin() + size_t(p) * kWarps, pass.begin() + size_t(p + 1) * kWarps);
          first.push_back((double(*mm.first) - double(d)) / 1000.0);
          last.push_back((double(*mm.second) - double(d)) / 1000.0);
        }
      }
      std::printf("%-8s %8.1f %12.2f %14.2f %14.2f\n", names[mode], spin_ns / 1000.0, median(pair_us), median(first),
                  median(last));
      WD_CUDA_CHECK(cudaGraphExecDestroy(ge));
      WD_CUDA_CHECK(cudaGraphDestroy(g));
      WD_CUDA_CHECK(cudaEventDestroy(e0));
      WD_CUDA_CHECK(cudaEventDestroy(e1));
    }
  }
  WD_CUDA_CHECK(cudaStreamDestroy(s));
  if (const unsigned wrong = bad.download()[0]) {
    std::printf("FAILED: %u values of h read before they were written\n", wrong);
    return 1;
  }
  return 0;
}
