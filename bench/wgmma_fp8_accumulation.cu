// How exactly does the FP8 wgmma (m64n8k32, E4M3 × E4M3, FP32 D) add its
// products into D over a long K? The W8A8 block-128 GEMMs of the classical
// path (classical_tma_gemm.cu) never let it: each 128-K block's MMAs start
// from zero (a partial-sum set) and are promoted into FP32 accumulators by an
// FFMA, as the engines' FP8 kernels do, because the Hopper FP8 MMA is
// reported to keep only about 14 bits when it accumulates. That partial set
// costs 64 registers a consumer thread, which is what keeps the 128-token
// tile from holding more tokens (docs/CLASSICAL.md, session 40). If D were
// kept exactly, the promotion could become one FMUL a k-block (D scaled by
// the ratio of consecutive blocks' scales before their MMAs) and the partial
// set would go. (bench/fp8_mma_precision asked the same of mma.sync: exact.)
//
// Each problem is one warpgroup: A 64 × K and B 8 × K E4M3 codes, K = 2048
// (16 blocks of 128, gate_up's H on qwen3-30b-a3b), staged a block at a time
// into shared memory in the 128-byte-swizzled K-major layout the GEMMs use,
// four k32 wgmmas a block. Three ways: "chain" accumulates every block into D
// (scale-d 1); "promote" starts each block from zero and adds it to FP32
// registers; "per k32" does so for every single wgmma. All against the
// exact sum (FP64: every product and partial sum of these codes is exact
// there). A layout check first (small integers:
// every sum exact in any accumulator): the program exits 1 if it fails, so
// a wrong layout cannot pass as a precision figure.
// Measured (session 40, H200): relative L2 8.5e-4 chained, 1.3e-4 promoted,
// 4.6e-5 per k32 (mma.sync: 2.4e-9): the FP8 wgmma keeps about 13 bits as
// it adds, within one instruction too, so the promotion stays
// (docs/CLASSICAL.md).
//
//   build/bench/wgmma_fp8_accumulation
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/classical_wgmma.cuh"
#include "warpdecode/formats.h"

namespace {

using wd::DeviceBuffer;

constexpr int kM = 64, kN = 8, kBlocks = 16, kK = 128 * kBlocks;
constexpr int kProblems = 512;

// One problem a block of 128 threads. D element i of a thread: row 16·warp +
// g + 8·(i / 2), column 2q + i % 2 (classical_wgmma.cuh). Compiled for
// sm_90a only (elsewhere the kernel is empty and main() does not run it).
__global__ void __launch_bounds__(128) accumulate(const uint8_t* a, const uint8_t* b, float* d_chain,
                                                  float* d_promote, float* d_step) {
#if WD_WGMMA_AVAILABLE
  using namespace wd::kernels::wgmma;
  // A: 64 rows × 128 B, then B: 8 rows, 128-byte swizzle, from a 1024-byte
  // aligned base (the swizzle atom).
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw)), base = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (base - raw);
  const int p = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  const uint8_t* A = a + size_t(p) * kM * kK;
  const uint8_t* B = b + size_t(p) * kN * kK;
  // Block kb of A and B into shared memory: chunk c (16 bytes) of row r at
  // (c ^ (r % 8)) · 16 in the row.
  auto stage = [&](int kb) {
    __syncthreads();  // the previous block's wgmmas are done (each thread waited for its own)
    for (int i = tid; i < (kM + kN) * 8; i += 128) {
      const int r = i / 8, c = i % 8;
      const uint8_t* src = r < kM ? A + size_t(r) * kK + kb * 128 + c * 16 : B + size_t(r - kM) * kK + kb * 128 + c * 16;
      *reinterpret_cast<uint4*>(smem + r * 128 + ((c ^ (r % 8)) << 4)) = *reinterpret_cast<const uint4*>(src);
    }
    fence_proxy_async();
    __syncthreads();
    fence();
  };
  // The staged block's k32 steps ks0 .. ks0 + n - 1 into d, the first
  // overwriting d unless accumulate_first; then waited for.
  auto mmas = [&](float(&d)[4], int ks0, int n, bool accumulate_first) {
    for (int ks = ks0; ks < ks0 + n; ++ks)
      wgmma_m64n8_e4m3(d, sw128_desc(base + ks * 32), sw128_desc(base + kM * 128 + ks * 32),
                       accumulate_first || ks > ks0);
    commit();
    wait<0>();
  };
  float chain[4] = {}, part[4] = {}, prom[4] = {}, step[4] = {};
  for (int kb = 0; kb < kBlocks; ++kb) {
    stage(kb);
    mmas(chain, 0, 4, kb > 0);
  }
  for (int kb = 0; kb < kBlocks; ++kb) {
    stage(kb);
    mmas(part, 0, 4, false);
    for (int i = 0; i < 4; ++i) prom[i] += part[i];
  }
  // Each k32 wgmma on its own, from zero, added in FP32 registers: what one
  // instruction's own sum keeps.
  for (int kb = 0; kb < kBlocks; ++kb) {
    stage(kb);
    for (int ks = 0; ks < 4; ++ks) {
      if (ks > 0) fence();  // part was read since the last wgmma
      mmas(part, ks, 1, false);
      for (int i = 0; i < 4; ++i) step[i] += part[i];
    }
  }
  for (int i = 0; i < 4; ++i) {
    const int row = 16 * warp + g + 8 * (i / 2), col = 2 * q + i % 2;
    d_chain[(size_t(p) * kM + row) * kN + col] = chain[i];
    d_promote[(size_t(p) * kM + row) * kN + col] = prom[i];
    d_step[(size_t(p) * kM + row) * kN + col] = step[i];
  }
#endif
}

struct Case {
  const char* what;
  std::vector<uint8_t> a, b;
};

// sigma of the values before E4M3 rounding; integers: -3..3.
Case make_case(const char* what, std::mt19937& rng, double a_sigma, double b_sigma, bool integers = false) {
  Case cs{what, {}, {}};
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_int_distribution<int> small(-3, 3);
  for (size_t i = 0; i < size_t(kProblems) * kM * kK; ++i)
    cs.a.push_back(wd::float_to_e4m3(integers ? float(small(rng)) : float(a_sigma * n01(rng))));
  for (size_t i = 0; i < size_t(kProblems) * kN * kK; ++i)
    cs.b.push_back(wd::float_to_e4m3(integers ? float(small(rng)) : float(b_sigma * n01(rng))));
  return cs;
}

struct Stats {
  double rel_l2 = 0, max_ulps = 0;  // max |err| / |exact| in units of 2^-23
  long inexact = 0;                 // outputs other than the exact sum rounded once
};

Stats compare(const std::vector<float>& d, const std::vector<double>& x) {
  Stats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const double err = std::fabs(double(d[i]) - x[i]);
    num += err * err, den += x[i] * x[i];
    if (x[i] != 0) s.max_ulps = std::fmax(s.max_ulps, err / std::fabs(x[i]) * 0x1p23);
    s.inexact += float(x[i]) != d[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : 0;
  return s;
}

}  // namespace

int main() {
  int major = 0;
  WD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major != 9) {
    std::printf("wgmma_fp8_accumulation: needs an sm_90 GPU\n");
    return 0;
  }
  std::mt19937 rng(20261203);
  std::vector<Case> cases;
  cases.push_back(make_case("layout check: integers -3..3", rng, 0, 0, true));
  // Block-128 W8A8: weights and activations each quantized so a block's
  // largest |value| is near 448 (sigma ~ 112).
  cases.push_back(make_case("w8a8 block-128: 112 x 112", rng, 112.0, 112.0));
  cases.push_back(make_case("weights 112 x activations 1", rng, 112.0, 1.0));

  const size_t na = size_t(kProblems) * kM * kK, nb = size_t(kProblems) * kN * kK, nd = size_t(kProblems) * kM * kN;
  DeviceBuffer<uint8_t> a(na), b(nb);
  const char* ways[3] = {"chain", "promote", "per k32"};
  DeviceBuffer<float> d[3] = {DeviceBuffer<float>(nd), DeviceBuffer<float>(nd), DeviceBuffer<float>(nd)};
  const int smem = (kM + kN) * 128 + 1024;
  std::printf("# wgmma m64n8k32 E4M3, FP32 D, K = %d: D chained over all K (chain), each 128-K block from zero\n"
              "# added in FP32 registers (promote), or each k32 wgmma alone so added (per k32); against the exact\n"
              "# sum. max err in units of 2^-23 of |exact|.\n", kK);
  std::printf("%-30s | %-8s %9s %12s %8s\n", "case", "way", "rel L2", "max err", "inexact");
  int rc = 0;
  for (const Case& cs : cases) {
    a.upload(cs.a);
    b.upload(cs.b);
    for (auto& dw : d) dw.fill_bytes(0xFF);  // NaN: an unwritten output fails the comparison
    accumulate<<<kProblems, 128, smem>>>(a.data(), b.data(), d[0].data(), d[1].data(), d[2].data());
    WD_CUDA_CHECK_LAUNCH();
    WD_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> x(nd);
    for (int p = 0; p < kProblems; ++p)
      for (int i = 0; i < kM; ++i)
        for (int j = 0; j < kN; ++j) {
          double s = 0;
          for (int k = 0; k < kK; ++k)
            s += double(wd::e4m3_to_float(cs.a[(size_t(p) * kM + i) * kK + k])) *
                 wd::e4m3_to_float(cs.b[(size_t(p) * kN + j) * kK + k]);
          x[(size_t(p) * kM + i) * kN + j] = s;
        }
    bool exact = true;
    for (int w = 0; w < 3; ++w) {
      const Stats st = compare(d[w].download(), x);
      std::printf("%-30s | %-8s %9.2e %12.3g %8ld\n", cs.what, ways[w], st.rel_l2, st.max_ulps, st.inexact);
      exact &= st.inexact == 0;
    }
    if (&cs == &cases[0] && !exact) {
      std::printf("FAIL: integer sums are not exact: the layout is wrong\n");
      rc = 1;
    }
  }
  return rc;
}
