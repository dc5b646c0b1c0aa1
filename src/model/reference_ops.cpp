// FP64 pieces of the reference forward. See warpdecode/model/reference_ops.h.
#include "warpdecode/model/reference_ops.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "warpdecode/error.h"

namespace wd::model::ops {

void rms_norm(const double* x, const double* w, int n, double eps, double* y) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

std::vector<float> rope_inv_freq(int head_dim, double theta) {
  WD_CHECK(head_dim > 0 && head_dim % 2 == 0, "RoPE head_dim ", head_dim, " must be even");
  // transformers: 1.0 / (base ** (arange(0, D, 2).float() / D)), all FP32.
  std::vector<float> f(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const float e = float(2 * i) / float(head_dim);
    f[size_t(i)] = 1.0f / std::pow(float(theta), e);
  }
  return f;
}

void apply_rope(double* x, int head_dim, int64_t pos, const std::vector<float>& inv_freq) {
  const int half = head_dim / 2;
  WD_CHECK(int(inv_freq.size()) == half, "RoPE: ", inv_freq.size(), " frequencies for head_dim ", head_dim);
  for (int j = 0; j < half; ++j) {
    const float angle = float(pos) * inv_freq[size_t(j)];  // one FP32 product, as transformers
    const double c = std::cos(double(angle)), s = std::sin(double(angle));
    const double a = x[j], b = x[j + half];
    x[j] = a * c - b * s;
    x[j + half] = b * c + a * s;
  }
}

void attention(const double* q, const double* k, const double* v, int64_t len, int nq, int nkv,
               int head_dim, double* out) {
  WD_CHECK(len >= 1 && nkv >= 1 && nq % nkv == 0, "attention: len ", len, ", nq ", nq, ", nkv ", nkv);
  const int group = nq / nkv;
  const double scale = 1.0 / std::sqrt(double(head_dim));
  std::vector<double> p(static_cast<size_t>(len));
  for (int h = 0; h < nq; ++h) {
    const int kv = h / group;
    const double* qh = q + size_t(h) * head_dim;
    double mx = -INFINITY;
    for (int64_t t = 0; t < len; ++t) {
      const double* kt = k + (size_t(t) * nkv + kv) * head_dim;
      double s = 0;
      for (int d = 0; d < head_dim; ++d) s += qh[d] * kt[d];
      p[size_t(t)] = s * scale;
      mx = std::max(mx, p[size_t(t)]);
    }
    double sum = 0;
    for (auto& x : p) sum += (x = std::exp(x - mx));
    double* oh = out + size_t(h) * head_dim;
    std::fill(oh, oh + head_dim, 0.0);
    for (int64_t t = 0; t < len; ++t) {
      const double* vt = v + (size_t(t) * nkv + kv) * head_dim;
      const double w = p[size_t(t)] / sum;
      for (int d = 0; d < head_dim; ++d) oh[d] += w * vt[d];
    }
  }
}

void matmul(const Matrix& w, const double* x, int T, double* y, int threads) {
  constexpr int64_t kRowsPerTask = 16;
  const int64_t rows = w.rows, cols = w.cols;
  const size_t tasks = size_t((rows + kRowsPerTask - 1) / kRowsPerTask);
  parallel_for(tasks, threads, [&](size_t task) {
    const int64_t r0 = int64_t(task) * kRowsPerTask, n = std::min(kRowsPerTask, rows - r0);
    std::vector<double> wr(size_t(n * cols));
    w.read_rows(r0, n, wr.data());
    for (int t = 0; t < T; ++t)
      for (int64_t r = 0; r < n; ++r) {
        const double* a = &wr[size_t(r * cols)];
        const double* b = x + size_t(t) * cols;
        double s = 0;
        for (int64_t c = 0; c < cols; ++c) s += a[c] * b[c];
        y[size_t(t) * rows + r0 + r] = s;
      }
  });
}

}  // namespace wd::model::ops
