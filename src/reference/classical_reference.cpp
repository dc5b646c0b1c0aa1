// CPU reference of the classical path. See warpdecode/classical_reference.h.
#include "warpdecode/classical_reference.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/parallel.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/weights.h"

namespace wd::reference {
namespace {

constexpr int kGroup = 128;

// Expert e's gate_up (2I, H) or down (H, I) dequantized to FP64, exactly.
std::vector<double> dequantize_expert(const MoeWeightsView& w, bool gate_up, size_t e) {
  const MoeShape& s = w.shape;
  const size_t rows = gate_up ? s.gate_up_rows() : size_t(s.hidden);
  const size_t cols = gate_up ? size_t(s.hidden) : size_t(s.intermediate);
  const size_t base = e * rows * cols;
  std::vector<double> out(rows * cols);
  switch (w.format) {
    case WeightFormat::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(gate_up ? w.gate_up : w.down) + base;
      for (size_t i = 0; i < rows * cols; ++i) out[i] = bf16_to_float(p[i]);
      break;
    }
    case WeightFormat::kMXFP8: {
      const uint8_t* p = static_cast<const uint8_t*>(gate_up ? w.gate_up : w.down) + base;
      const uint8_t* sc = (gate_up ? w.gate_up_scales : w.down_scales) + base / kMxBlock;
      for (size_t i = 0; i < rows * cols; ++i) out[i] = double(e4m3_to_float(p[i])) * e8m0_to_float(sc[i / kMxBlock]);
      break;
    }
    case WeightFormat::kFP8Block128: {
      const uint8_t* p = static_cast<const uint8_t*>(gate_up ? w.gate_up : w.down) + base;
      const float* bs = gate_up ? w.gate_up_block_scales : w.down_block_scales;
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c)
          out[r * cols + c] = double(e4m3_to_float(p[r * cols + c])) * bs[fp8_block128_scale_index(s, gate_up, e, r, c)];
      break;
    }
  }
  return out;
}

double dot(const double* a, const double* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

double round_bf16(double v) { return bf16_to_float(float_to_bf16(float(v))); }

// v (n values, n % 128 == 0 or a single partial group) -> dequantized W8A8 values.
void quantize_dequantize(const float* v, size_t n, double* out) {
  uint8_t q[kGroup];
  for (size_t g0 = 0; g0 < n; g0 += kGroup) {
    const int m = int(std::min<size_t>(kGroup, n - g0));
    const float s = quantize_activation_group(v + g0, m, q);
    for (int i = 0; i < m; ++i) out[g0 + i] = double(e4m3_to_float(q[i])) * double(s);
  }
}

}  // namespace

float quantize_activation_group(const float* v, int n, uint8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const float s = e4m3_scale(amax);
  for (int i = 0; i < n; ++i) q[i] = float_to_e4m3(v[i] / s);
  return s;
}

std::vector<double> classical_experts(const MoeWeightsView& w, const uint16_t* x, const int32_t* ids,
                                      const double* weights, int batch, int threads, bool silu_fused,
                                      bool bf16_activations) {
  w.validate();
  WD_CHECK(w.space == MemorySpace::kHost, "the classical CPU reference needs weights in host memory");
  WD_CHECK(batch >= 1, "batch = ", batch, " must be >= 1");
  const MoeShape& s = w.shape;
  const size_t H = s.hidden, I = s.intermediate, K = s.top_k, B = batch;
  const bool w8a8 = classical_quantizes_activations(w.format) && !bf16_activations;
  if (w8a8)
    WD_CHECK(H % kGroup == 0 && I % kGroup == 0, "classical reference: W8A8 needs H = ", H, " and I = ", I,
             " to be multiples of 128");
  for (size_t i = 0; i < B * K; ++i)
    WD_CHECK(ids[i] >= 0 && ids[i] < s.experts, "routing: expert id ", ids[i], " at slot ", i, " is outside [0, ",
             s.experts, ")");

  // Stage 4: the activations every expert GEMM sees (one copy per token).
  std::vector<double> a(B * H);
  std::vector<float> xf(H);
  for (size_t b = 0; b < B; ++b) {
    for (size_t h = 0; h < H; ++h) xf[h] = bf16_to_float(x[b * H + h]);
    if (w8a8) quantize_dequantize(xf.data(), H, &a[b * H]);
    else for (size_t h = 0; h < H; ++h) a[b * H + h] = xf[h];
  }

  // Entries grouped by expert (stage 3), each expert's weights decoded once.
  std::map<int32_t, std::vector<size_t>> by_expert;
  for (size_t i = 0; i < B * K; ++i) by_expert[ids[i]].push_back(i);
  std::vector<std::pair<int32_t, std::vector<size_t>>> groups(by_expert.begin(), by_expert.end());
  std::vector<double> partial(B * K * H);  // stage 7 output per entry
  parallel_for(groups.size(), threads, [&](size_t gi) {
    const size_t e = size_t(groups[gi].first);
    const std::vector<double> gu = dequantize_expert(w, true, e), dn = dequantize_expert(w, false, e);
    std::vector<double> h(I);
    std::vector<float> hf(I);
    for (size_t entry : groups[gi].second) {
      const double* ab = &a[(entry / K) * H];
      for (size_t i = 0; i < I; ++i) {
        double g = dot(&gu[i * H], ab, H), u = dot(&gu[(I + i) * H], ab, H);  // stage 5
        if (!silu_fused) g = round_bf16(g), u = round_bf16(u);                  // stored BF16
        const double hv = g / (1.0 + std::exp(-g)) * u;             // stage 6
        if (w8a8) hf[i] = float(hv);
        else h[i] = round_bf16(hv);
      }
      if (w8a8) quantize_dequantize(hf.data(), I, h.data());
      for (size_t d = 0; d < H; ++d) partial[entry * H + d] = round_bf16(dot(&dn[d * I], h.data(), I));  // stage 7
    }
  });

  // Stage 8: weighted sum in slot order.
  std::vector<double> y(B * H, 0.0);
  for (size_t b = 0; b < B; ++b)
    for (size_t k = 0; k < K; ++k) {
      const double wk = weights[b * K + k];
      for (size_t d = 0; d < H; ++d) y[b * H + d] += wk * partial[(b * K + k) * H + d];
    }
  return y;
}

}  // namespace wd::reference
