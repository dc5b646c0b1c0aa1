// The accuracy harness on the CPU: compact expert copies against the full
// layer, the CPU models end to end on the tiny preset, NaN handling, drift,
// and the JSON records.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "accuracy/experts.h"
#include "accuracy/harness.h"
#include "accuracy/report.h"
#include "warpdecode/error.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {
namespace {

MoeShape tiny() { return preset_shape("tiny"); }

MoeWeights layer(WeightFormat f, uint64_t seed) {
  SyntheticSpec spec;
  spec.seed = seed;
  MoeWeights bf = MoeWeights::synthetic(tiny(), spec);
  if (f == WeightFormat::kMXFP8) return bf.to_mxfp8();
  if (f == WeightFormat::kFP8Block128) return bf.to_fp8_block128();
  return bf;
}

const CopyToHost kMemcpy = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };

template <typename T>
bool same_expert(const std::vector<T>& compact, size_t j, const std::vector<T>& full, size_t e) {
  const size_t n = full.size() / size_t(tiny().experts);
  return compact.size() % n == 0 && std::memcmp(&compact[j * n], &full[e * n], n * sizeof(T)) == 0;
}

TEST(AccuracyExperts, SliceHoldsExactlyTheAskedExperts) {
  for (WeightFormat f : kWeightFormats) {
    const MoeWeights w = layer(f, 3);
    const HostExperts h = slice_experts(w.view(), {9, 2, 9, 15, 0}, kMemcpy);
    ASSERT_EQ(h.ids, (std::vector<int32_t>{0, 2, 9, 15})) << to_string(f);
    EXPECT_EQ(h.shape.experts, 4);
    EXPECT_EQ(h.format, f);
    EXPECT_NO_THROW(h.view().validate());
    for (size_t j = 0; j < h.ids.size(); ++j) {
      const size_t e = size_t(h.ids[j]);
      EXPECT_TRUE(same_expert(h.router, j, w.router, e));
      if (f == WeightFormat::kBF16) {
        EXPECT_TRUE(same_expert(h.gate_up_bf16, j, w.gate_up_bf16, e));
        EXPECT_TRUE(same_expert(h.down_bf16, j, w.down_bf16, e));
      } else {
        EXPECT_TRUE(same_expert(h.gate_up_q, j, w.gate_up_q, e)) << to_string(f);
        EXPECT_TRUE(same_expert(h.down_q, j, w.down_q, e)) << to_string(f);
      }
      if (f == WeightFormat::kMXFP8) {
        EXPECT_TRUE(same_expert(h.gate_up_scales, j, w.gate_up_scales, e));
        EXPECT_TRUE(same_expert(h.down_scales, j, w.down_scales, e));
      }
      if (f == WeightFormat::kFP8Block128) {
        EXPECT_TRUE(same_expert(h.gate_up_block_scales, j, w.gate_up_block_scales, e));
        EXPECT_TRUE(same_expert(h.down_block_scales, j, w.down_block_scales, e));
      }
    }
    EXPECT_EQ(h.remap({15, 0, 9}), (std::vector<int32_t>{3, 0, 2}));
    EXPECT_THROW(h.remap({1}), InvalidArgument);
  }
  EXPECT_THROW(slice_experts(layer(WeightFormat::kBF16, 3).view(), {16}, kMemcpy), InvalidArgument);
}

// The judge on the compact layer computes the same bits as on the full one.
TEST(AccuracyExperts, ReferenceOnCompactLayerEqualsFullLayer) {
  const int B = 5;
  for (WeightFormat f : kWeightFormats) {
    const MoeWeights w = layer(f, 11);
    const auto x = synthetic_input(B, tiny().hidden, 5, InputKind::kOutliers);
    const reference::Routing full_r = reference::router(w.view(), x.data(), B);
    const reference::Routing only_r = reference::router(router_only_view(tiny(), w.router.data()), x.data(), B);
    ASSERT_EQ(full_r.ids, only_r.ids);
    ASSERT_EQ(full_r.weights, only_r.weights);
    const auto full = reference::moe_experts(w.view(), x.data(), full_r.ids.data(), full_r.weights.data(), B,
                                             reference::Precision::kFP64);
    const HostExperts h = slice_experts(w.view(), full_r.ids, kMemcpy);
    const auto compact = reference::moe_experts(h.view(), x.data(), h.remap(full_r.ids).data(), full_r.weights.data(),
                                                B, reference::Precision::kFP64);
    EXPECT_EQ(full, compact) << to_string(f);
  }
}

Common tiny_options() {
  Common o;
  o.preset = "tiny";
  o.shape = tiny();
  o.formats = {WeightFormat::kMXFP8, WeightFormat::kBF16, WeightFormat::kFP8Block128};
  o.batches = {1, 6};
  o.inputs = {InputKind::kGaussian, InputKind::kOutliers};
  o.seeds = 3;
  o.seed = 7;
  return o;
}

TEST(AccuracyHarness, CpuModelsOnTheTinyPreset) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  ASSERT_FALSE(backend->gpu());
  EXPECT_EQ(backend->source(), "cpu-model");
  const Common o = tiny_options();
  const auto recs = measure_layer(*backend, o);
  ASSERT_EQ(recs.size(), 3u * 2u * 2u);
  for (const auto& r : recs) {
    SCOPED_TRACE(std::string(to_string(r.format)) + " B=" + std::to_string(r.batch) + " " + to_string(r.inputs));
    EXPECT_EQ(r.source, "cpu-model");
    EXPECT_EQ(r.seeds, 3);
    const auto& warp = r.paths[int(Path::kWarp)];
    const auto& bf16 = r.paths[int(Path::kClassicalBf16)];
    const auto& fp8 = r.paths[int(Path::kClassicalFp8)];
    const auto& a16 = r.paths[int(Path::kClassicalW8A16)];
    ASSERT_TRUE(warp.runs && bf16.runs);
    EXPECT_EQ(warp.rel_l2.count, 3u);
    // W8A16: MXFP8 requests only, on the MXFP8 weights, with the BF16 path's
    // roundings: errors of BF16's size, far below W8A8's.
    ASSERT_EQ(a16.runs, r.format == WeightFormat::kMXFP8);
    if (a16.runs) {
      EXPECT_EQ(a16.weights, WeightFormat::kMXFP8);
      EXPECT_EQ(a16.rel_l2.count, 3u);
      EXPECT_GT(a16.rel_l2.median, warp.rel_l2.median);
      EXPECT_LT(a16.rel_l2.worst, 1e-2);
      EXPECT_LT(4.0 * a16.rel_l2.worst, fp8.rel_l2.median);
    }
    EXPECT_EQ(warp.weights, r.format == WeightFormat::kBF16 ? WeightFormat::kBF16 : WeightFormat::kMXFP8);
    EXPECT_EQ(bf16.weights, WeightFormat::kBF16);
    // The FP32 model with a BF16 output: one BF16 rounding (2^-9 relative at most).
    EXPECT_GT(warp.rel_l2.median, 0.0);
    EXPECT_LT(warp.rel_l2.worst, 4e-3);
    EXPECT_LE(warp.rel_l2.median, warp.rel_l2.worst);
    EXPECT_LT(warp.rel_l2.median, bf16.rel_l2.median);  // BF16 intermediates round more than once
    EXPECT_LT(bf16.rel_l2.worst, 1e-2);
    EXPECT_GT(r.ratio_bf16_over_warp.median, 1.0);
    if (r.format == WeightFormat::kBF16) {
      EXPECT_FALSE(fp8.runs);
      EXPECT_EQ(r.weight_quant.count, 0u);
      EXPECT_EQ(r.ratio_fp8_over_warp.count, 0u);
    } else {
      ASSERT_TRUE(fp8.runs);
      EXPECT_EQ(fp8.weights, r.format);
      // FP8 activations: 3-bit mantissas, errors of a few percent.
      EXPECT_GT(fp8.rel_l2.median, 5e-3);
      EXPECT_LT(fp8.rel_l2.worst, 0.0625);
      EXPECT_GT(r.ratio_fp8_over_warp.worst, 1.0);
      EXPECT_LE(r.ratio_fp8_over_warp.worst, r.ratio_fp8_over_warp.median);
      EXPECT_EQ(r.weight_quant.count, 3u);
      EXPECT_GT(r.weight_quant.median, 1e-3);  // 3-bit mantissas of the weights
    }
  }
}

TEST(AccuracyHarness, Deterministic) {
  Common o = tiny_options();
  o.formats = {WeightFormat::kMXFP8};
  o.batches = {3};
  auto a = make_cpu_backend(tiny(), OutputFormat::kFP32, 1);
  auto b = make_cpu_backend(tiny(), OutputFormat::kFP32, 0);
  const auto ra = measure_layer(*a, o), rb = measure_layer(*b, o);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(to_json(ra[i]).dump(), to_json(rb[i]).dump());
  // FP32 outputs: the FP32 model is within FP32 accumulation of FP64.
  EXPECT_LT(ra[0].paths[int(Path::kWarp)].rel_l2.worst, 1e-5);
}

// A given layer (Common::layer) is held for every seed: with one seed and
// the layer that seed would have drawn, the records are the synthetic run's
// exactly; with two, the second seed's differ (its own weights there, the
// given layer here). A layer of another shape or format, and drift, refuse.
TEST(AccuracyHarness, AGivenLayerIsHeldForEverySeed) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  Common o = tiny_options();
  o.seeds = 1;
  const auto synthetic = measure_layer(*backend, o);
  SyntheticSpec spec;
  spec.seed = layer_seed(o.seed, 0, 0);
  const auto bf16 = std::make_shared<const MoeWeights>(MoeWeights::synthetic(tiny(), spec));
  o.layer = converted_layer(bf16);
  const auto given = measure_layer(*backend, o);
  ASSERT_EQ(given.size(), synthetic.size());
  for (size_t i = 0; i < given.size(); ++i) EXPECT_EQ(to_json(given[i]).dump(), to_json(synthetic[i]).dump());

  o.seeds = 2;
  const auto held = measure_layer(*backend, o);
  Common o2 = o;
  o2.layer = nullptr;
  const auto drawn = measure_layer(*backend, o2);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_NE(to_json(held[i]).dump(), to_json(drawn[i]).dump());

  Common bad = o;
  const auto mxfp8 = std::make_shared<const MoeWeights>(bf16->to_mxfp8());
  bad.layer = [&](WeightFormat) { return mxfp8; };  // MXFP8 where BF16 is asked for
  EXPECT_THROW(measure_layer(*backend, bad), InvalidArgument);
  bad.layer = [](WeightFormat) { return std::shared_ptr<const MoeWeights>(); };
  EXPECT_THROW(measure_layer(*backend, bad), InvalidArgument);
  MoeShape other = tiny();
  other.hidden *= 2;
  bad.layer = converted_layer(std::make_shared<const MoeWeights>(MoeWeights::synthetic(other, spec)));
  EXPECT_THROW(measure_layer(*backend, bad), InvalidArgument);
  DriftOptions d;
  static_cast<Common&>(d) = o;
  d.layers = 2;
  EXPECT_THROW(measure_drift(*backend, d), Error);
}

// A given layer's FP8 weights are the ones measured, not a conversion of its
// BF16 weights (an FP8 checkpoint's own block-128 bytes): given another
// seed's FP8 weights, the weight-quantization figure (FP8 layer against BF16
// layer) is that of two unrelated layers, while each path stays as close to
// the reference on the weights it ran as on converted ones. The CPU backend
// holds the given tensors themselves, not copies.
TEST(AccuracyHarness, AGivenLayersOwnFp8WeightsAreMeasured) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  Common o = tiny_options();
  o.formats = {WeightFormat::kMXFP8, WeightFormat::kFP8Block128};
  o.seeds = 1;
  o.inputs = {InputKind::kGaussian};
  SyntheticSpec a, b;
  a.seed = 11;
  b.seed = 12;
  const auto bf16 = std::make_shared<const MoeWeights>(MoeWeights::synthetic(tiny(), a));
  const LayerWeights other = converted_layer(std::make_shared<const MoeWeights>(MoeWeights::synthetic(tiny(), b)));
  std::map<WeightFormat, std::shared_ptr<const MoeWeights>> fp8;
  for (WeightFormat f : o.formats) fp8[f] = other(f);
  o.layer = converted_layer(bf16);
  const auto converted = measure_layer(*backend, o);
  o.layer = [&](WeightFormat f) { return f == WeightFormat::kBF16 ? bf16 : fp8.at(f); };
  const auto own = measure_layer(*backend, o);
  ASSERT_EQ(own.size(), converted.size());
  for (size_t i = 0; i < own.size(); ++i) {
    SCOPED_TRACE(to_string(own[i].format));
    EXPECT_LT(converted[i].weight_quant.median, 0.1);
    EXPECT_GT(own[i].weight_quant.median, 0.5);
    for (Path p : {Path::kWarp, Path::kClassicalFp8}) {
      EXPECT_LT(own[i].paths[int(p)].rel_l2.worst, 2 * converted[i].paths[int(p)].rel_l2.worst + 1e-3) << to_string(p);
      EXPECT_GT(own[i].paths[int(p)].rel_l2.worst, 0.0) << to_string(p);
    }
  }
  for (WeightFormat f : o.formats) EXPECT_GT(fp8[f].use_count(), 1) << to_string(f);  // held, not copied
}

// A backend whose classical FP8 path writes NaN: the errors are NaN, the
// JSON null, and nothing is dropped.
class NaNFp8 final : public Backend {
 public:
  explicit NaNFp8(std::unique_ptr<Backend> b) : b_(std::move(b)) {}
  bool gpu() const override { return false; }
  std::string describe(Path p) const override { return b_->describe(p); }
  void set_layer(uint64_t seed, const std::vector<WeightFormat>& f) override { b_->set_layer(seed, f); }
  void set_layer_weights(const LayerWeights& w, const std::vector<WeightFormat>& f) override {
    b_->set_layer_weights(w, f);
  }
  const std::vector<uint16_t>& router() const override { return b_->router(); }
  HostExperts slice(WeightFormat f, const std::vector<int32_t>& ids) override { return b_->slice(f, ids); }
  PathRouting route(Path p, WeightFormat f, const uint16_t* x, int batch) override { return b_->route(p, f, x, batch); }
  std::vector<double> experts(Path p, WeightFormat f, const uint16_t* x, const PathRouting& r, int batch) override {
    auto y = b_->experts(p, f, x, r, batch);
    if (p == Path::kClassicalFp8) y[y.size() / 2] = NAN;
    return y;
  }

 private:
  std::unique_ptr<Backend> b_;
};

TEST(AccuracyHarness, NonFiniteOutputsShowAsNull) {
  NaNFp8 backend(make_cpu_backend(tiny(), OutputFormat::kBF16));
  Common o = tiny_options();
  o.formats = {WeightFormat::kMXFP8};
  o.batches = {2};
  o.inputs = {InputKind::kGaussian};
  const auto recs = measure_layer(backend, o);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(std::isnan(recs[0].paths[int(Path::kClassicalFp8)].rel_l2.median));
  const Json j = to_json(recs[0]);
  EXPECT_TRUE(j["err_classical_fp8"].is_null());
  EXPECT_TRUE(j["ratio_fp8_over_warp"].is_null());
  EXPECT_TRUE(j["err_warp"].is_number());
  // What tells "ran, non-finite" from "did not run": every seed counted.
  EXPECT_EQ(j["non_finite"]["classical_fp8"], o.seeds);
  EXPECT_EQ(j["non_finite"]["warp"], 0);
  EXPECT_TRUE(to_json(recs[0])["non_finite"].contains("classical_w8a16") ==
              recs[0].paths[int(Path::kClassicalW8A16)].runs);
  EXPECT_NE(report::accuracy_table(Json{{"records", Json::array({j})}}).find("| NaN |"), std::string::npos);

  DriftOptions d;
  static_cast<Common&>(d) = o;
  d.layers = 3;
  const auto drift = measure_drift(backend, d);
  ASSERT_EQ(drift.size(), 1u);
  for (int l = 0; l < 3; ++l) {
    EXPECT_TRUE(std::isnan(drift[0].rel_l2[int(Path::kClassicalFp8)][l].median)) << "depth " << l + 1;
    EXPECT_TRUE(std::isfinite(drift[0].rel_l2[int(Path::kWarp)][l].median)) << "depth " << l + 1;
  }
  const Json dj = to_json(drift[0]);
  EXPECT_EQ(dj["non_finite"]["classical_fp8"], Json::array({d.seeds, d.seeds, d.seeds}));
  EXPECT_EQ(dj["non_finite"]["warp"], Json::array({0, 0, 0}));
  EXPECT_TRUE(dj["worst"].contains("ratio_bf16_over_warp"));
  // Reroutes: a mean over the seeds whose stream was still routed at that
  // depth. The FP8 stream turns NaN at depth 1 and is not routed after it.
  const auto& fp8_rer = drift[0].reroutes[int(Path::kClassicalFp8)];
  EXPECT_TRUE(std::isfinite(fp8_rer[0]));
  EXPECT_TRUE(std::isnan(fp8_rer[1]) && std::isnan(fp8_rer[2])) << fp8_rer[1] << " " << fp8_rer[2];
  EXPECT_TRUE(std::isfinite(drift[0].reroutes[int(Path::kWarp)][2]));
  EXPECT_NE(report::drift_table(dj).find("| NaN |"), std::string::npos) << report::drift_table(dj);
}

TEST(AccuracyHarness, JsonHasTheIssueFields) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  Common o = tiny_options();
  o.formats = {WeightFormat::kMXFP8, WeightFormat::kBF16};
  o.batches = {4};
  o.inputs = {InputKind::kOutliers};
  o.seeds = 2;
  const auto recs = measure_layer(*backend, o);
  ASSERT_EQ(recs.size(), 2u);
  const Json mx = to_json(recs[0]), bf = to_json(recs[1]);
  for (const char* k : {"preset", "format", "batch", "inputs", "err_warp", "err_classical_bf16", "err_classical_fp8",
                        "ratio_fp8_over_warp", "err_weight_quant", "source", "seeds", "worst"})
    EXPECT_TRUE(mx.contains(k)) << k;
  EXPECT_EQ(mx["preset"], "tiny");
  EXPECT_EQ(mx["format"], "mxfp8");
  EXPECT_EQ(mx["batch"], 4);
  EXPECT_EQ(mx["inputs"], "outliers");
  EXPECT_EQ(mx["source"], "cpu-model");
  EXPECT_DOUBLE_EQ(mx["ratio_fp8_over_warp"].get<double>(), recs[0].ratio_fp8_over_warp.median);
  EXPECT_EQ(mx["weights"]["warp"], "mxfp8");
  EXPECT_TRUE(bf["err_classical_fp8"].is_null());
  EXPECT_TRUE(bf["ratio_fp8_over_warp"].is_null());
  EXPECT_TRUE(bf["err_weight_quant"].is_null());
}

TEST(AccuracyDrift, ErrorsPerDepthOnTheTinyPreset) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  DriftOptions d;
  d.preset = "tiny";
  d.shape = tiny();
  d.formats = {WeightFormat::kMXFP8};
  d.batches = {4};
  d.inputs = {InputKind::kGaussian, InputKind::kOutliers};
  d.seeds = 2;
  d.layers = tiny().num_layers;
  const auto recs = measure_drift(*backend, d);
  ASSERT_EQ(recs.size(), 2u);
  for (const auto& r : recs) {
    ASSERT_EQ(r.layers, 4);
    for (Path p : kAllPaths) {
      ASSERT_TRUE(r.runs[int(p)]);
      ASSERT_EQ(r.rel_l2[int(p)].size(), 4u);
      for (const auto& s : r.rel_l2[int(p)]) {
        EXPECT_TRUE(std::isfinite(s.median));
        EXPECT_GT(s.median, 0.0);
      }
    }
    // Each layer adds error: more at the bottom of the stack than after one layer.
    EXPECT_GT(r.rel_l2[int(Path::kWarp)][3].median, r.rel_l2[int(Path::kWarp)][0].median);
    EXPECT_GT(r.ratio_fp8_over_warp[3].median, 1.0);
    ASSERT_EQ(r.weight_quant.size(), 4u);
    const Json j = to_json(r);
    EXPECT_EQ(j["depth"].size(), 4u);
    EXPECT_EQ(j["err_warp"].size(), 4u);
    EXPECT_EQ(j["reroutes"]["warp"].size(), 4u);
    EXPECT_EQ(j["residual"], "fp32");
  }
}

TEST(AccuracyDrift, OneLayerStackIsTheFirstLayerPlusTheResidual) {
  // Depth 1 of the FP64-judged warp model: r1 = x + moe(bf16(rmsnorm(x)));
  // its error against the FP64 stack is that layer's error scaled by
  // ‖moe‖/‖r1‖, so it is far below the one-layer figure.
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  DriftOptions d;
  d.preset = "tiny";
  d.shape = tiny();
  d.formats = {WeightFormat::kBF16};
  d.batches = {3};
  d.inputs = {InputKind::kGaussian};
  d.seeds = 1;
  d.layers = 1;
  const auto r = measure_drift(*backend, d);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].runs[int(Path::kClassicalFp8)]);
  EXPECT_LT(r[0].rel_l2[int(Path::kWarp)][0].median, 1e-3);
  EXPECT_TRUE(to_json(r[0])["err_classical_fp8"].is_null());
}

TEST(AccuracyHarness, RejectsBadOptions) {
  auto backend = make_cpu_backend(tiny(), OutputFormat::kBF16);
  Common o = tiny_options();
  o.seeds = 0;
  EXPECT_THROW(measure_layer(*backend, o), InvalidArgument);
  o = tiny_options();
  o.batches = {0};
  EXPECT_THROW(measure_layer(*backend, o), InvalidArgument);
  DriftOptions d;
  static_cast<Common&>(d) = tiny_options();
  d.layers = 0;
  EXPECT_THROW(measure_drift(*backend, d), InvalidArgument);
  EXPECT_THROW(parse_input_kind("uniform"), InvalidArgument);
  EXPECT_THROW(parse_output_format("fp16"), InvalidArgument);
  EXPECT_THROW(parse_residual_format("fp64"), InvalidArgument);
}

}  // namespace
}  // namespace wd::accuracy
