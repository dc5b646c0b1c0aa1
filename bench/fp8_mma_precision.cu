// How exactly does one FP8 tensor-core MMA (mma.sync m16n8k32, E4M3 × E4M3,
// FP32 accumulate) sum its 32 products? The answer decides whether a
// decode-free MXFP8 down kernel (raw E4M3 weight codes straight into the MMA,
// h split into E4M3 pieces; docs/PERF_LOG.md, session 26, "Next") can keep
// the FP32 path's 2e-5 relative L2. Every E4M3 × E4M3 product and every sum
// of 32 of them is exact in FP64, so each MMA output is compared with its
// exact value; the BF16 MMA (m16n8k16, two of them for k = 32) that today's
// kernels use runs on the same values as the yardstick.
//
// Checks first, on small integers (every partial sum exact in any
// accumulator): the fragment layouts below (PTX ISA, "Matrix fragments for
// mma.m16n8k32" with .e4m3, and m16n8k16 .bf16). The program exits 1 if they
// do not give the exact result, so a wrong layout cannot pass as a
// precision figure.
//
//   build/bench/fp8_mma_precision
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/mma.cuh"
#include "warpdecode/formats.h"

namespace {

constexpr int kM = 16, kN = 8, kK = 32;
constexpr int kTiles = 4096;  // independent 16×8×32 problems a case

// One tile a warp: A (16×32, row-major E4M3 codes), B (32×8 stored as 8
// columns of 32 codes), C in (16×8 FP32); D = A·B + C with the FP8 MMA and,
// on the same values as BF16, with two BF16 MMAs (k 0-15, then 16-31).
__global__ void mma_kernel(const uint8_t* a, const uint8_t* b, const float* c, float* d_fp8, float* d_bf16) {
  const int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const uint8_t* A = a + size_t(tile) * kM * kK;
  const uint8_t* B = b + size_t(tile) * kN * kK;
  const float* C = c + size_t(tile) * kM * kN;
  // E4M3 fragments: a0 (row g, k 4q..4q+3), a1 (row g+8, same k), a2 / a3 the
  // same rows at k + 16; b0 (k 4q..4q+3, column g), b1 (k + 16). Byte i of a
  // register is element i.
  auto word = [](const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  };
  const uint32_t a0 = word(A + g * kK + 4 * q), a1 = word(A + (g + 8) * kK + 4 * q);
  const uint32_t a2 = word(A + g * kK + 16 + 4 * q), a3 = word(A + (g + 8) * kK + 16 + 4 * q);
  const uint32_t b0 = word(B + g * kK + 4 * q), b1 = word(B + g * kK + 16 + 4 * q);
  // C / D element i of a lane: row g + 8·(i / 2), column 2q + i % 2.
  auto at = [&](int i) { return (g + 8 * (i / 2)) * kN + 2 * q + i % 2; };
  float d[4], e[4];
  for (int i = 0; i < 4; ++i) d[i] = e[i] = C[at(i)];
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));

  // BF16 fragments (m16n8k16): a0 (row g, k 2q, 2q+1), a1 (row g+8), a2 (row
  // g, k 2q+8, 2q+9), a3 (row g+8); b0 (k 2q, 2q+1, column g), b1 (k 2q+8,
  // 2q+9). The E4M3 values are BF16 values exactly (wd::e4m3_to_float, then
  // the top 16 bits).
  auto bf = [](uint8_t code) { return uint32_t(__float_as_uint(wd::e4m3_to_float(code)) >> 16); };
  auto pair = [&](const uint8_t* p) { return bf(p[0]) | bf(p[1]) << 16; };
  for (int k0 = 0; k0 < kK; k0 += 16) {
    const uint32_t x0 = pair(A + g * kK + k0 + 2 * q), x1 = pair(A + (g + 8) * kK + k0 + 2 * q);
    const uint32_t x2 = pair(A + g * kK + k0 + 8 + 2 * q), x3 = pair(A + (g + 8) * kK + k0 + 8 + 2 * q);
    const uint32_t y0 = pair(B + g * kK + k0 + 2 * q), y1 = pair(B + g * kK + k0 + 8 + 2 * q);
    wd::kernels::mma_bf16(e, x0, x1, x2, x3, y0, y1);
  }
  for (int i = 0; i < 4; ++i) {
    d_fp8[size_t(tile) * kM * kN + at(i)] = d[i];
    d_bf16[size_t(tile) * kM * kN + at(i)] = e[i];
  }
}

struct Case {
  const char* what;
  std::vector<uint8_t> a, b;
  std::vector<float> c;
};

// Per MMA output: the exact D (FP64), the sum of |terms| (|A·B| products and
// |C|), the largest |term|.
struct Exact {
  std::vector<double> d, abs_sum, max_term;
};

Exact exact(const Case& cs) {
  Exact x;
  for (int t = 0; t < kTiles; ++t)
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kN; ++j) {
        const double c = cs.c[(size_t(t) * kM + i) * kN + j];
        double s = c, as = std::fabs(c), mx = std::fabs(c);
        for (int k = 0; k < kK; ++k) {
          const double p = double(wd::e4m3_to_float(cs.a[(size_t(t) * kM + i) * kK + k])) *
                           wd::e4m3_to_float(cs.b[(size_t(t) * kN + j) * kK + k]);
          s += p, as += std::fabs(p), mx = std::fmax(mx, std::fabs(p));
        }
        x.d.push_back(s), x.abs_sum.push_back(as), x.max_term.push_back(mx);
      }
  return x;
}

struct Stats {
  double rel_l2 = 0;        // ||D - exact|| / ||exact||
  double max_err_max = 0;   // max |D - exact| / max |term|, in units of 2^-23
  double max_err_abs = 0;   // max |D - exact| / Σ|terms|, in units of 2^-23
  long inexact = 0;         // outputs that differ from the exact value rounded once to FP32
};

Stats compare(const std::vector<float>& d, const Exact& x) {
  Stats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const double err = std::fabs(double(d[i]) - x.d[i]);
    num += err * err, den += x.d[i] * x.d[i];
    if (x.max_term[i] > 0) s.max_err_max = std::fmax(s.max_err_max, err / x.max_term[i] * 0x1p23);
    if (x.abs_sum[i] > 0) s.max_err_abs = std::fmax(s.max_err_abs, err / x.abs_sum[i] * 0x1p23);
    s.inexact += float(x.d[i]) != d[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : 0;
  return s;
}

uint8_t code_of(float v) { return wd::float_to_e4m3(v); }

// A: a weight block of MXFP8 (Gaussian codes scaled so the block max is near
// 448, as quantization leaves them); B: one of h's E4M3 pieces (Gaussian).
// c_scale: C in, relative to a typical |A·B| sum (0: none).
Case make_case(const char* what, std::mt19937& rng, double a_sigma, double b_sigma, double c_scale,
               bool integers = false) {
  Case cs{what, {}, {}, {}};
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_int_distribution<int> small(-3, 3);
  for (size_t i = 0; i < size_t(kTiles) * kM * kK; ++i)
    cs.a.push_back(integers ? code_of(float(small(rng))) : code_of(float(a_sigma * n01(rng))));
  for (size_t i = 0; i < size_t(kTiles) * kN * kK; ++i)
    cs.b.push_back(integers ? code_of(float(small(rng))) : code_of(float(b_sigma * n01(rng))));
  const double typical = a_sigma * b_sigma * std::sqrt(double(kK));
  for (size_t i = 0; i < size_t(kTiles) * kM * kN; ++i)
    cs.c.push_back(integers ? float(small(rng)) : float(c_scale * typical * n01(rng)));
  return cs;
}

}  // namespace

int main() {
  std::mt19937 rng(20261201);
  std::vector<Case> cases;
  cases.push_back(make_case("layout check: integers -3..3", rng, 0, 0, 0, true));
  cases.push_back(make_case("weights x h piece, C = 0", rng, 112.0, 1.0, 0.0));
  cases.push_back(make_case("weights x h piece, C ~ sum", rng, 112.0, 1.0, 1.0));
  cases.push_back(make_case("weights x h piece, C ~ 64 sums", rng, 112.0, 1.0, 64.0));
  cases.push_back(make_case("wide: sigma 64 x 64, C = 0", rng, 64.0, 64.0, 0.0));

  const size_t na = size_t(kTiles) * kM * kK, nb = size_t(kTiles) * kN * kK, nc = size_t(kTiles) * kM * kN;
  wd::DeviceBuffer<uint8_t> a(na), b(nb);
  wd::DeviceBuffer<float> c(nc), d8(nc), d16(nc);
  std::printf("# one mma.sync m16n8k32 E4M3 (FP32 accumulate) against the exact sum; BF16: two m16n8k16 on the same values\n");
  std::printf("# errors: rel L2 over %d tiles; max |err| / max |term| and / sum |terms| in units of 2^-23; outputs not the exact sum rounded once\n", kTiles);
  std::printf("%-34s | %-9s %9s %12s %12s %8s\n", "case", "mma", "rel L2", "err/max_term", "err/sum_abs", "inexact");
  int rc = 0;
  for (const Case& cs : cases) {
    a.upload(cs.a);
    b.upload(cs.b);
    c.upload(cs.c);
    d8.fill_bytes(0xFF);  // NaN: an unwritten output fails the comparison
    d16.fill_bytes(0xFF);
    mma_kernel<<<kTiles / 4, 128>>>(a.data(), b.data(), c.data(), d8.data(), d16.data());
    WD_CUDA_CHECK_LAUNCH();
    WD_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> h8 = d8.download(), h16 = d16.download();
    const Exact x = exact(cs);
    const Stats s8 = compare(h8, x), s16 = compare(h16, x);
    for (const auto& [label, s] : {std::pair{"e4m3 k32", s8}, std::pair{"bf16 2xk16", s16}})
      std::printf("%-34s | %-9s %9.2e %12.3g %12.3g %8ld\n", cs.what, label, s.rel_l2, s.max_err_max, s.max_err_abs,
                  s.inexact);
    if (&cs == &cases[0] && (s8.inexact != 0 || s16.inexact != 0)) {
      std::printf("FAIL: integer sums are not exact: the fragment layout is wrong\n");
      rc = 1;
    }
  }
  return rc;
}
