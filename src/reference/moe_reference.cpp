// FP64 (and FP32) CPU reference of the MoE layer. See warpdecode/reference.h.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "core/parallel.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

namespace wd::reference {
namespace {

// One expert weight tensor as stored: gate_up (E, 2I, H) or down (E, H, I).
struct WeightTensor {
  const MoeWeightsView* w;
  bool gate_up;
};

// Decodes row `row` (length cols) of a weight tensor stored (rows_total, cols)
// in `format` into acc-typed values. MXFP8 dequantization is exact in FP64
// and in FP32 (a 4-bit significand times a power of two); FP8 block-128
// (E4M3 times an FP32 scale) is exact in FP64.
template <typename AccT>
void load_row(WeightTensor t, size_t row, size_t cols, AccT* out) {
  const WeightFormat format = t.w->format;
  const void* data = t.gate_up ? t.w->gate_up : t.w->down;
  const uint8_t* scales = t.gate_up ? t.w->gate_up_scales : t.w->down_scales;
  if (format == WeightFormat::kBF16) {
    const uint16_t* p = static_cast<const uint16_t*>(data) + row * cols;
    for (size_t i = 0; i < cols; ++i) out[i] = AccT(bf16_to_float(p[i]));
  } else if (format == WeightFormat::kFP8Block128) {
    const MoeShape& s = t.w->shape;
    const size_t rows_per_expert = t.gate_up ? s.gate_up_rows() : size_t(s.hidden);
    const size_t e = row / rows_per_expert, r = row % rows_per_expert;
    const float* bs = t.gate_up ? t.w->gate_up_block_scales : t.w->down_block_scales;
    const uint8_t* p = static_cast<const uint8_t*>(data) + row * cols;
    for (size_t c0 = 0; c0 < cols; c0 += kFp8BlockSize) {
      const AccT scale = AccT(bs[fp8_block128_scale_index(s, t.gate_up, e, r, c0)]);
      for (size_t i = c0; i < std::min(cols, c0 + kFp8BlockSize); ++i) out[i] = AccT(e4m3_to_float(p[i])) * scale;
    }
  } else {
    const uint8_t* p = static_cast<const uint8_t*>(data) + row * cols;
    const uint8_t* s = scales + row * (cols / kMxBlock);
    for (size_t i = 0; i < cols; ++i)
      out[i] = AccT(e4m3_to_float(p[i])) * AccT(e8m0_to_float(s[i / kMxBlock]));
  }
}

template <typename AccT>
AccT dot(const AccT* a, const AccT* b, size_t n) {
  AccT s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <typename AccT>
AccT silu(AccT g) {
  return g / (AccT(1) + std::exp(-g));
}

void check_host(const MoeWeightsView& w) {
  w.validate();
  WD_CHECK(w.space == MemorySpace::kHost, "the CPU reference needs weights in host memory");
}

void check_finite_input(const uint16_t* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    WD_CHECK(std::isfinite(bf16_to_float(x[i])), "input activation ", i,
             " is not finite (NaN or Inf): the reference refuses to check it");
}

// h as the tensor-core kernels hold it: a BF16 pair whose sum is within
// 2^-17 |h| (Precision::kFP32SplitH).
float split_bf16_sum(float h) {
  const float hi = bf16_to_float(float_to_bf16(h));
  return hi + bf16_to_float(float_to_bf16(h - hi));
}

template <typename AccT>
std::vector<double> experts_impl(const MoeWeightsView& w, const uint16_t* x, const int32_t* ids,
                                 const double* weights, int batch, int threads, bool split_h = false) {
  const MoeShape& s = w.shape;
  const size_t H = s.hidden, I = s.intermediate, K = s.top_k, B = batch;
  std::vector<AccT> xs(B * H);
  for (size_t i = 0; i < B * H; ++i) xs[i] = AccT(bf16_to_float(x[i]));

  // act[b][k][i] = silu(gate·x) * (up·x)
  std::vector<AccT> act(B * K * I);
  parallel_for(B * K, threads, [&](size_t bk) {
    const size_t b = bk / K;
    const size_t e = size_t(ids[bk]);
    std::vector<AccT> g(H), u(H);
    for (size_t i = 0; i < I; ++i) {
      load_row(WeightTensor{&w, true}, e * 2 * I + i, H, g.data());
      load_row(WeightTensor{&w, true}, e * 2 * I + I + i, H, u.data());
      act[bk * I + i] = silu(dot(g.data(), &xs[b * H], H)) * dot(u.data(), &xs[b * H], H);
      if constexpr (std::is_same_v<AccT, float>)
        if (split_h) act[bk * I + i] = split_bf16_sum(act[bk * I + i]);
    }
  });

  // y[b][d] = Σ_k w_k · down[e_k][d] · act[b][k]
  std::vector<double> y(B * H);
  constexpr size_t kRowsPerTask = 64;
  const size_t tasks_per_token = (H + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(B * tasks_per_token, threads, [&](size_t task) {
    const size_t b = task / tasks_per_token;
    const size_t d0 = (task % tasks_per_token) * kRowsPerTask, d1 = std::min(H, d0 + kRowsPerTask);
    std::vector<AccT> row(I);
    std::vector<AccT> acc(d1 - d0, AccT(0));
    for (size_t k = 0; k < K; ++k) {
      const size_t e = size_t(ids[b * K + k]);
      const AccT wk = AccT(weights[b * K + k]);
      for (size_t d = d0; d < d1; ++d) {
        load_row(WeightTensor{&w, false}, e * H + d, I, row.data());
        acc[d - d0] += wk * dot(row.data(), &act[(b * K + k) * I], I);
      }
    }
    for (size_t d = d0; d < d1; ++d) y[b * H + d] = double(acc[d - d0]);
  });
  return y;
}

}  // namespace

RoutingView Routing::view(std::vector<float>& weights_f32) const {
  weights_f32.assign(weights.begin(), weights.end());
  return RoutingView{batch, top_k, ids.data(), weights_f32.data()};
}

Routing router(const MoeWeightsView& w, const uint16_t* x, int batch) {
  check_host(w);
  WD_CHECK(batch >= 1, "batch = ", batch, " must be >= 1");
  const MoeShape& s = w.shape;
  const size_t H = s.hidden, E = s.experts, K = s.top_k;
  check_finite_input(x, size_t(batch) * H);
  Routing r;
  r.batch = batch;
  r.top_k = s.top_k;
  r.ids.resize(batch * K);
  r.weights.resize(batch * K);
  r.logits.resize(batch * E);
  parallel_for(size_t(batch), 0, [&](size_t b) {
    double* lg = &r.logits[b * E];
    for (size_t e = 0; e < E; ++e) {
      double acc = 0;
      for (size_t h = 0; h < H; ++h)
        acc += double(bf16_to_float(w.router[e * H + h])) * double(bf16_to_float(x[b * H + h]));
      lg[e] = acc;
    }
    softmax_topk(lg, int(E), int(K), s.norm_topk_prob, &r.ids[b * K], &r.weights[b * K]);
  });
  return r;
}

void softmax_topk(const double* logits, int experts, int top_k, bool norm_topk_prob, int32_t* ids,
                  double* weights) {
  const size_t E = size_t(experts), K = size_t(top_k);
  const double mx = *std::max_element(logits, logits + E);
  std::vector<double> p(E);
  double sum = 0;
  for (size_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[e] - mx));
  for (auto& v : p) v /= sum;
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  // Top-K by probability; ties go to the lower expert index.
  std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t c) {
    return p[a] != p[c] ? p[a] > p[c] : a < c;
  });
  double topsum = 0;
  for (size_t k = 0; k < K; ++k) topsum += p[order[k]];
  for (size_t k = 0; k < K; ++k) {
    ids[k] = order[k];
    weights[k] = norm_topk_prob ? p[order[k]] / topsum : p[order[k]];
  }
}

double min_topk_gap(const Routing& r, int experts) {
  double gap = INFINITY;
  for (int b = 0; b < r.batch; ++b) {
    std::vector<double> lg(r.logits.begin() + size_t(b) * experts,
                           r.logits.begin() + size_t(b + 1) * experts);
    std::sort(lg.begin(), lg.end(), std::greater<double>());
    for (int k = 0; k + 1 < experts && k < r.top_k; ++k) gap = std::min(gap, lg[k] - lg[k + 1]);
  }
  return gap;
}

std::vector<double> moe_experts(const MoeWeightsView& w, const uint16_t* x, const int32_t* ids,
                                const double* weights, int batch, Precision p, int threads) {
  check_host(w);
  WD_CHECK(batch >= 1, "batch = ", batch, " must be >= 1");
  check_finite_input(x, size_t(batch) * w.shape.hidden);
  for (size_t i = 0; i < size_t(batch) * w.shape.top_k; ++i) {
    WD_CHECK(ids[i] >= 0 && ids[i] < w.shape.experts, "routing: expert id ", ids[i],
             " at slot ", i, " is outside [0, ", w.shape.experts, ")");
    WD_CHECK(std::isfinite(weights[i]), "routing: weight at slot ", i, " is not finite");
  }
  return p == Precision::kFP64 ? experts_impl<double>(w, x, ids, weights, batch, threads)
                               : experts_impl<float>(w, x, ids, weights, batch, threads, p == Precision::kFP32SplitH);
}

std::vector<double> moe_layer(const MoeWeightsView& w, const uint16_t* x, int batch, Precision p,
                              Routing* routing_out, int threads) {
  Routing r = router(w, x, batch);
  auto y = moe_experts(w, x, r.ids.data(), r.weights.data(), batch, p, threads);
  if (routing_out) *routing_out = std::move(r);
  return y;
}

ErrorStats compare(const double* ref, const double* out, size_t n) {
  ErrorStats st;
  double num = 0, den = 0, max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(out[i])) {
      ++st.non_finite;
      continue;
    }
    const double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    max_err = std::max(max_err, std::abs(d));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  if (st.non_finite) {
    st.rel_l2 = st.max_rel = NAN;
    return st;
  }
  st.rel_l2 = den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
  st.max_rel = max_ref > 0 ? max_err / max_ref : (max_err > 0 ? INFINITY : 0.0);
  return st;
}

}  // namespace wd::reference
