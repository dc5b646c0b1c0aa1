// The CPU reference forward: its pieces against hand-computed values and
// properties, and the KV cache against full recompute.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "model_files.h"
#include "warpdecode/error.h"
#include "warpdecode/model/reference_model.h"
#include "warpdecode/model/reference_ops.h"

namespace wd::model {
namespace {

TEST(ReferenceOps, RmsNormAsTransformers) {
  const double x[2] = {3, 4}, w[2] = {1, 2};
  double y[2];
  ops::rms_norm(x, w, 2, 0.0, y);
  const double rms = std::sqrt(12.5);
  EXPECT_DOUBLE_EQ(y[0], 3 / rms);
  EXPECT_DOUBLE_EQ(y[1], 2 * 4 / rms);
  ops::rms_norm(x, w, 2, 0.5, y);  // eps inside the square root
  EXPECT_DOUBLE_EQ(y[0], 3 / std::sqrt(13.0));
}

TEST(ReferenceOps, RopeFrequencies) {
  const auto f = ops::rope_inv_freq(128, 1e6);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f[0], 1.0f);
  for (int i = 0; i < 64; ++i)
    EXPECT_NEAR(f[size_t(i)], std::pow(1e6, -2.0 * i / 128), 2e-7 * std::pow(1e6, -2.0 * i / 128)) << i;
  EXPECT_THROW(ops::rope_inv_freq(7, 1e4), InvalidArgument);
}

TEST(ReferenceOps, RopeRotatesHalvesNotNeighbours) {
  const int D = 8;
  const auto f = ops::rope_inv_freq(D, 10000.0);
  // rotate_half pairs x[j] with x[j + D/2]: a unit vector at 0 moves to D/2.
  std::vector<double> x(D, 0.0);
  x[0] = 1;
  ops::apply_rope(x.data(), D, 3, f);
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-7);
  EXPECT_NEAR(x[D / 2], std::sin(3.0), 1e-7);
  EXPECT_EQ(x[1], 0.0);
  // Position 0 is the identity.
  std::vector<double> y = {1, 2, 3, 4, 5, 6, 7, 8}, y0 = y;
  ops::apply_rope(y.data(), D, 0, f);
  EXPECT_EQ(y, y0);
}

TEST(ReferenceOps, RopeScoresDependOnRelativePositionOnly) {
  const int D = 64;
  const auto f = ops::rope_inv_freq(D, 1e6);
  std::vector<double> q(D), k(D);
  for (int i = 0; i < D; ++i) {
    q[size_t(i)] = std::sin(0.7 * i + 0.1);
    k[size_t(i)] = std::cos(1.3 * i - 0.4);
  }
  auto score = [&](int64_t m, int64_t n) {
    std::vector<double> a = q, b = k;
    ops::apply_rope(a.data(), D, m, f);
    ops::apply_rope(b.data(), D, n, f);
    return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
  };
  const double s = score(7, 3);
  // Angles are FP32 (as in transformers): equal to ~1e-6 relative, not bits.
  EXPECT_NEAR(score(107, 103), s, 1e-5 * std::abs(s) + 1e-9);
  EXPECT_NEAR(score(1004, 1000), s, 1e-4 * std::abs(s) + 1e-9);
  EXPECT_GT(std::abs(score(8, 3) - s), 1e-3);  // and it does depend on it
}

TEST(ReferenceOps, AttentionIsCausalGqaSoftmax) {
  const int D = 4, nq = 4, nkv = 2;
  // One position: every head returns its KV head's value.
  std::vector<double> q(nq * D, 0.3), k(nkv * D, 0.1), v = {1, 1, 1, 1, 2, 2, 2, 2}, out(nq * D);
  ops::attention(q.data(), k.data(), v.data(), 1, nq, nkv, D, out.data());
  EXPECT_EQ(out, (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}));
  // Two positions, one head: weights softmax(q·k / sqrt(D)).
  const double a = 1.7;
  const std::vector<double> q1 = {a, 0, 0, 0}, k2 = {0, 0, 0, 0, 1, 0, 0, 0}, v2 = {1, 0, 0, 0, 0, 1, 0, 0};
  std::vector<double> o(D);
  ops::attention(q1.data(), k2.data(), v2.data(), 2, 1, 1, D, o.data());
  const double p1 = 1 / (1 + std::exp(-a / 2));
  EXPECT_NEAR(o[0], 1 - p1, 1e-15);
  EXPECT_NEAR(o[1], p1, 1e-15);
}

struct TinyModel {
  std::string dir;
  ModelConfig config;
  Checkpoint ckpt;
  ModelWeights weights;
};

TinyModel tiny(const testing::TinyModelSpec& spec = {}) {
  const std::string dir = testing::make_temp_dir("ref");
  testing::write_tiny_model(dir, spec);
  ModelConfig c = load_config(dir);
  Checkpoint ckpt = Checkpoint::open(dir);
  ModelWeights w = ModelWeights::map(c, ckpt);
  return TinyModel{dir, c, std::move(ckpt), std::move(w)};
}

double max_abs_diff(const double* a, const double* b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

const std::vector<int32_t> kPrompt = {0, 17, 99, 3, 127, 42, 42, 8, 64};

TEST(ReferenceModel, KvCacheEqualsFullRecompute) {
  const TinyModel m = tiny();
  ReferenceModel ref(m.weights);
  const size_t V = 128, P = kPrompt.size();
  const std::vector<double> all = ref.forward(kPrompt);
  ASSERT_EQ(all.size(), P * V);
  EXPECT_EQ(ref.position(), int64_t(P));
  double scale = 0;
  for (double x : all) scale = std::max(scale, std::abs(x));
  ASSERT_GT(scale, 0.1);

  // Token by token through the cache.
  ref.reset();
  for (size_t t = 0; t < P; ++t) {
    const std::vector<double> one = ref.forward({kPrompt[t]});
    EXPECT_LE(max_abs_diff(one.data(), &all[t * V], V), 1e-12 * scale) << "position " << t;
  }
  // Two chunks.
  ref.reset();
  ref.forward(std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + 4));
  const std::vector<double> rest = ref.forward(std::vector<int32_t>(kPrompt.begin() + 4, kPrompt.end()));
  EXPECT_LE(max_abs_diff(rest.data(), &all[4 * V], (P - 4) * V), 1e-12 * scale);
  // Full recompute of every prefix without a cache.
  for (size_t len = 1; len <= P; ++len) {
    ref.reset();
    const std::vector<double> r = ref.forward(std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + long(len)));
    EXPECT_LE(max_abs_diff(&r[(len - 1) * V], &all[(len - 1) * V], V), 1e-12 * scale) << "prefix " << len;
  }
}

TEST(ReferenceModel, GreedyDecodingFollowsTheLogits) {
  const TinyModel m = tiny();
  ReferenceModel ref(m.weights);
  std::vector<double> logits;
  const std::vector<int32_t> tokens = ref.generate_greedy(kPrompt, 6, &logits);
  const size_t V = 128, P = kPrompt.size();
  ASSERT_EQ(tokens.size(), 6u);
  ASSERT_EQ(logits.size(), (P + 5) * V);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const double* row = &logits[(P - 1 + i) * V];
    EXPECT_EQ(tokens[i], int32_t(std::max_element(row, row + V) - row)) << i;
  }
  // The logits of the decoded tokens are those of one forward over the whole sequence.
  std::vector<int32_t> seq = kPrompt;
  seq.insert(seq.end(), tokens.begin(), tokens.end() - 1);
  ref.reset();
  const std::vector<double> full = ref.forward(seq);
  EXPECT_LE(max_abs_diff(full.data(), logits.data(), full.size()), 1e-11);
  // Deterministic: the same bits on every run, for any thread count, and
  // with the experts converted per forward instead of cached.
  ReferenceOptions one_thread;
  one_thread.threads = 1;
  one_thread.cache_experts = false;
  ReferenceModel serial(m.weights, one_thread);
  std::vector<double> logits1;
  EXPECT_EQ(serial.generate_greedy(kPrompt, 6, &logits1), tokens);
  EXPECT_EQ(logits1, logits);
}

TEST(ReferenceModel, TiedEmbeddingsAndMxfp8Experts) {
  testing::TinyModelSpec spec;
  spec.tie = true;
  const TinyModel m = tiny(spec);
  ReferenceModel bf16(m.weights);
  ReferenceOptions opt;
  opt.moe_format = StackFormat::kMXFP8;
  ReferenceModel mx(m.weights, opt);
  const std::vector<double> a = bf16.forward(kPrompt), b = mx.forward(kPrompt);
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += a[i] * a[i];
  }
  const double rel = std::sqrt(num / den);
  EXPECT_GT(rel, 1e-6);  // MXFP8 weights do change the result...
  EXPECT_LT(rel, 5e-2);  // ...by about their rounding (E4M3: 2^-4 relative per weight)
}

TEST(ReferenceModel, RefusesTokensOutsideTheVocabulary) {
  const TinyModel m = tiny();
  ReferenceModel ref(m.weights);
  try {
    ref.forward({5, 128});
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "token id 128 is outside the vocabulary [0, 128)");
  }
  EXPECT_THROW(ref.forward({}), InvalidArgument);
  EXPECT_THROW(ref.generate_greedy({}, 3), InvalidArgument);
}

// A forward that throws mid-way (here moe_input_hook, at the first MoE
// layer, after the attention of every layer before it appended its keys and
// values) leaves the cache as it was: the next call's logits are those of a
// model that never saw the failed one.
TEST(ReferenceModel, AFailedForwardLeavesTheCacheAsItWas) {
  const TinyModel m = tiny();
  ReferenceModel clean(m.weights);
  const std::vector<int32_t> first(kPrompt.begin(), kPrompt.begin() + 4), next = {kPrompt[4]};
  clean.forward(first);
  const std::vector<double> want = clean.forward(next);

  ReferenceOptions opt;
  bool fail = false;
  opt.moe_input_hook = [&](int, int64_t, int, const double*, uint16_t*) {
    if (fail) throw InvalidArgument("hook refused");
  };
  ReferenceModel ref(m.weights, opt);
  ref.forward(first);
  fail = true;
  EXPECT_THROW(ref.forward({7, 8, 9}), InvalidArgument);
  EXPECT_EQ(ref.position(), int64_t(first.size()));
  fail = false;
  EXPECT_EQ(ref.forward(next), want);
}

// Experts converted per forward (cache_experts = false): a format the MoE
// reference cannot read is refused at construction, as with the cache.
TEST(ReferenceModel, ExpertsConvertedPerForwardAreCheckedAtConstruction) {
  const TinyModel bf = tiny();
  ReferenceOptions opt;
  opt.moe_format = StackFormat::kFp8Block;
  opt.cache_experts = false;
  try {
    ReferenceModel ref(bf.weights, opt);
    FAIL() << "a BF16 checkpoint's experts accepted as fp8-block";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("needs FP8 experts with 128x128 block scales"), std::string::npos)
        << e.what();
  }
  testing::TinyModelSpec spec;
  spec.dtype = testing::SourceDType::kFp8Block;  // 24x24 blocks
  const TinyModel f24 = tiny(spec);
  EXPECT_THROW(ReferenceModel(f24.weights, opt), InvalidArgument);
  spec.block = 128;
  const TinyModel f128 = tiny(spec);
  ReferenceModel ok(f128.weights, opt);
  EXPECT_EQ(ok.forward({1, 2}).size(), 2u * 128u);
}

TEST(ReferenceModel, Fp8BlockCheckpointRunsThroughDequantizedWeights) {
  testing::TinyModelSpec spec;
  const TinyModel bf = tiny(spec);
  spec.dtype = testing::SourceDType::kFp8Block;
  const TinyModel f8 = tiny(spec);
  ReferenceModel a(bf.weights), b(f8.weights);
  const std::vector<double> la = a.forward(kPrompt), lb = b.forward(kPrompt);
  double num = 0, den = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    num += (la[i] - lb[i]) * (la[i] - lb[i]);
    den += la[i] * la[i];
  }
  // The FP8 checkpoint holds the BF16 weights to E4M3 precision.
  EXPECT_GT(std::sqrt(num / den), 1e-6);
  EXPECT_LT(std::sqrt(num / den), 0.1);
}

TEST(ReferenceModel, Fp8Block128ExpertsAsStored) {
  testing::TinyModelSpec spec;
  spec.dtype = testing::SourceDType::kFp8Block;
  spec.block = 128;
  const TinyModel m = tiny(spec);
  ReferenceOptions stored;
  stored.moe_format = StackFormat::kFp8Block;  // the foundation dequantizes E4M3 * scale exactly
  ReferenceModel a(m.weights, stored), b(m.weights);  // b: the same values rounded to BF16
  const TinyModel m24 = tiny([] {
    testing::TinyModelSpec s;
    s.dtype = testing::SourceDType::kFp8Block;  // 24x24 blocks: not layout.h's fp8-block128
    return s;
  }());
  EXPECT_THROW(ReferenceModel(m24.weights, stored), InvalidArgument);
  const std::vector<double> la = a.forward(kPrompt), lb = b.forward(kPrompt);
  double num = 0, den = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    num += (la[i] - lb[i]) * (la[i] - lb[i]);
    den += la[i] * la[i];
  }
  EXPECT_GT(std::sqrt(num / den), 0.0);   // E4M3 * FP32 scale is not BF16-exact...
  EXPECT_LT(std::sqrt(num / den), 1e-2);  // ...but within BF16 rounding of it
}

}  // namespace
}  // namespace wd::model
