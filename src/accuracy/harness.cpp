// See accuracy/harness.h.
#include "accuracy/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "core/synthetic_rng.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/model/reference_ops.h"
#include "warpdecode/reference.h"

namespace wd::accuracy {

const char* to_string(InputKind k) { return k == InputKind::kGaussian ? "gaussian" : "outliers"; }

InputKind parse_input_kind(const std::string& s) {
  if (s == "gaussian") return InputKind::kGaussian;
  if (s == "outliers") return InputKind::kOutliers;
  throw InvalidArgument(detail::concat("unknown input kind '", s, "' (allowed: gaussian, outliers)"));
}

const char* to_string(ResidualFormat r) { return r == ResidualFormat::kFP32 ? "fp32" : "bf16"; }

ResidualFormat parse_residual_format(const std::string& s) {
  if (s == "fp32") return ResidualFormat::kFP32;
  if (s == "bf16") return ResidualFormat::kBF16;
  throw InvalidArgument(detail::concat("unknown residual format '", s, "' (allowed: fp32, bf16)"));
}

uint64_t layer_seed(uint64_t base, int s, int layer) {
  return rng::splitmix64(rng::splitmix64(base + uint64_t(s)) + uint64_t(layer));
}

uint64_t input_seed(uint64_t base, int s, int batch) {
  return rng::splitmix64(rng::splitmix64(base + uint64_t(s)) ^ (0x1A2B3C4D00000000ull + uint64_t(batch)));
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void validate(const Common& o) {
  o.shape.validate();
  WD_CHECK(!o.formats.empty() && !o.batches.empty() && !o.inputs.empty(), "accuracy: no format, batch or input kind");
  WD_CHECK(o.seeds >= 1, "accuracy: seeds = ", o.seeds, " must be >= 1");
  for (int b : o.batches) WD_CHECK(b >= 1 && b <= 4096, "accuracy: batch = ", b, " must be in [1, 4096]");
}

// BF16 and every format a path runs for the requests.
std::vector<WeightFormat> formats_needed(const std::vector<WeightFormat>& requests) {
  std::set<WeightFormat> s{WeightFormat::kBF16};
  for (WeightFormat f : requests) {
    for (Path p : kAllPaths)
      if (path_runs(p, f)) s.insert(path_weights(p, f));
    s.insert(f);
  }
  return {s.begin(), s.end()};
}

// Whether path p runs for request f on this backend.
bool runs(const Backend& b, Path p, WeightFormat f) { return path_runs(p, f) && b.available(p); }

PathRouting fp64_router(const Backend& backend, const MoeShape& shape, const uint16_t* x, int batch) {
  reference::Routing r = reference::router(router_only_view(shape, backend.router().data()), x, batch);
  return PathRouting{std::move(r.ids), std::move(r.weights)};
}

std::vector<double> samples(const std::vector<reference::ErrorStats>& v, double reference::ErrorStats::*field) {
  std::vector<double> out;
  for (const auto& e : v) out.push_back(e.*field);
  return out;
}

}  // namespace

// ---- one layer ---------------------------------------------------------------------------------
std::vector<LayerRecord> measure_layer(Backend& backend, const Common& opt, const Progress& progress) {
  validate(opt);
  const MoeShape& s = opt.shape;
  const std::vector<WeightFormat> needed = formats_needed(opt.formats);
  // Samples per (format index, batch index, input index): per path, and the weight quantization error.
  struct Samples {
    std::array<std::vector<reference::ErrorStats>, kPaths> path;
    std::vector<reference::ErrorStats> quant;
  };
  std::map<std::tuple<size_t, size_t, size_t>, Samples> all;
  const auto t0 = Clock::now();
  if (opt.layer) backend.set_layer_weights(opt.layer, needed);
  for (int seed = 0; seed < opt.seeds; ++seed) {
    if (!opt.layer) backend.set_layer(layer_seed(opt.seed, seed, 0), needed);
    // Inputs and FP64 routings of every (batch, inputs) case, then one host
    // copy per format of the experts any of them is routed to.
    std::map<std::pair<size_t, size_t>, std::pair<std::vector<uint16_t>, PathRouting>> cases;
    std::vector<int32_t> routed;
    for (size_t bi = 0; bi < opt.batches.size(); ++bi)
      for (size_t ki = 0; ki < opt.inputs.size(); ++ki) {
        const int B = opt.batches[bi];
        auto x = synthetic_input(B, s.hidden, input_seed(opt.seed, seed, B), opt.inputs[ki]);
        PathRouting r = fp64_router(backend, s, x.data(), B);
        routed.insert(routed.end(), r.ids.begin(), r.ids.end());
        cases[{bi, ki}] = {std::move(x), std::move(r)};
      }
    std::map<WeightFormat, HostExperts> held;
    for (WeightFormat f : needed) held.emplace(f, backend.slice(f, routed));
    for (size_t bi = 0; bi < opt.batches.size(); ++bi) {
      const int B = opt.batches[bi];
      for (size_t ki = 0; ki < opt.inputs.size(); ++ki) {
        const auto& [x, routing] = cases[{bi, ki}];
        std::map<WeightFormat, std::vector<double>> ref;
        for (WeightFormat f : needed) {
          const HostExperts& h = held.at(f);
          ref[f] = reference::moe_experts(h.view(), x.data(), h.remap(routing.ids).data(), routing.weights.data(), B,
                                          reference::Precision::kFP64);
        }
        std::map<std::pair<Path, WeightFormat>, std::vector<double>> ran;  // each (path, weights) once
        for (size_t fi = 0; fi < opt.formats.size(); ++fi) {
          const WeightFormat F = opt.formats[fi];
          Samples& smp = all[{fi, bi, ki}];
          for (Path p : kAllPaths) {
            if (!runs(backend, p, F)) continue;
            const WeightFormat wf = path_weights(p, F);
            auto it = ran.find({p, wf});
            if (it == ran.end()) it = ran.emplace(std::make_pair(p, wf), backend.experts(p, F, x.data(), routing, B)).first;
            smp.path[int(p)].push_back(reference::compare(ref[wf].data(), it->second.data(), it->second.size()));
          }
          if (F != WeightFormat::kBF16)
            smp.quant.push_back(reference::compare(ref[WeightFormat::kBF16].data(), ref[F].data(), ref[F].size()));
        }
      }
    }
    if (progress)
      progress(detail::concat("accuracy: seed ", seed + 1, "/", opt.seeds, " done (", int(seconds_since(t0)), " s)"));
  }

  std::vector<LayerRecord> out;
  for (size_t fi = 0; fi < opt.formats.size(); ++fi)
    for (size_t bi = 0; bi < opt.batches.size(); ++bi)
      for (size_t ki = 0; ki < opt.inputs.size(); ++ki) {
        const Samples& smp = all[{fi, bi, ki}];
        LayerRecord r;
        r.preset = opt.preset;
        r.source = backend.source();
        r.shape = s;
        r.format = opt.formats[fi];
        r.batch = opt.batches[bi];
        r.inputs = opt.inputs[ki];
        r.seeds = opt.seeds;
        r.output = opt.output;
        for (Path p : kAllPaths) {
          PathStats& ps = r.paths[int(p)];
          ps.runs = runs(backend, p, r.format);
          ps.weights = path_weights(p, r.format);
          ps.rel_l2 = summarize(samples(smp.path[int(p)], &reference::ErrorStats::rel_l2));
          ps.max_rel = summarize(samples(smp.path[int(p)], &reference::ErrorStats::max_rel));
        }
        r.weight_quant = summarize(samples(smp.quant, &reference::ErrorStats::rel_l2));
        r.weight_quant_max = summarize(samples(smp.quant, &reference::ErrorStats::max_rel));
        std::vector<double> fp8, bf16;
        const auto& w = smp.path[int(Path::kWarp)];
        for (size_t i = 0; i < w.size(); ++i) {
          if (!smp.path[int(Path::kClassicalFp8)].empty())
            fp8.push_back(error_ratio(smp.path[int(Path::kClassicalFp8)][i].rel_l2, w[i].rel_l2));
          bf16.push_back(error_ratio(smp.path[int(Path::kClassicalBf16)][i].rel_l2, w[i].rel_l2));
        }
        r.ratio_fp8_over_warp = summarize(fp8, Worst::kSmallest);
        r.ratio_bf16_over_warp = summarize(bf16, Worst::kSmallest);
        out.push_back(r);
      }
  return out;
}

// ---- drift through a stack of layers -----------------------------------------------------------
namespace {

// bf16(rmsnorm(r)) per token, unit gain, eps 1e-6 (Qwen3's rms_norm_eps).
std::vector<uint16_t> moe_input(const std::vector<double>& r, int batch, int hidden) {
  static constexpr double kEps = 1e-6;
  const std::vector<double> ones(size_t(hidden), 1.0);
  std::vector<double> n(static_cast<size_t>(hidden));
  std::vector<uint16_t> x(r.size());
  for (int b = 0; b < batch; ++b) {
    model::ops::rms_norm(&r[size_t(b) * hidden], ones.data(), hidden, kEps, n.data());
    for (int h = 0; h < hidden; ++h) x[size_t(b) * hidden + h] = float_to_bf16(float(n[size_t(h)]));
  }
  return x;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double d) { return std::isfinite(d); });
}

// Tokens whose expert set differs between two routings (B, K).
int reroutes(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int batch, int k) {
  int n = 0;
  for (int t = 0; t < batch; ++t) {
    std::vector<int32_t> x(a.begin() + t * k, a.begin() + (t + 1) * k), y(b.begin() + t * k, b.begin() + (t + 1) * k);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    n += x != y;
  }
  return n;
}

// One (format, batch, inputs) configuration during one seed's walk.
struct Walk {
  WeightFormat format;
  int batch;
  InputKind inputs;
  std::map<WeightFormat, std::vector<double>> stack;  // FP64 residual stream per weight format
  std::map<WeightFormat, PathRouting> stack_routing;  // this layer's
  std::map<WeightFormat, std::vector<uint16_t>> stack_x;
  std::array<std::vector<double>, kPaths> r;          // each path's residual stream
  std::array<bool, kPaths> alive{};
};

}  // namespace

std::vector<DriftRecord> measure_drift(Backend& backend, const DriftOptions& opt, const Progress& progress) {
  validate(opt);
  const MoeShape& s = opt.shape;
  WD_CHECK(opt.layers >= 1 && opt.layers <= 1024, "drift: layers = ", opt.layers, " must be in [1, 1024]");
  WD_CHECK(!opt.layer, "drift: the stack is synthetic, one layer of seeded weights a depth (not a given layer)");
  const std::vector<WeightFormat> needed = formats_needed(opt.formats);
  const int L = opt.layers, K = s.top_k, H = s.hidden;

  // Per configuration: per path and depth the per-seed errors; the quantization error; reroute counts.
  struct Samples {
    std::array<std::vector<std::vector<double>>, kPaths> err;  // [path][depth][seed]
    std::vector<std::vector<double>> quant;                    // [depth][seed]
    std::array<std::vector<double>, kPaths> reroutes;          // [path][depth] summed over seeds
    std::array<std::vector<int>, kPaths> routed;               // [path][depth] seeds whose stream was routed
  };
  std::vector<Walk> proto;
  for (WeightFormat f : opt.formats)
    for (int B : opt.batches)
      for (InputKind k : opt.inputs) proto.push_back(Walk{f, B, k, {}, {}, {}, {}, {}});
  std::vector<Samples> smp(proto.size());
  for (auto& sm : smp) {
    for (auto& e : sm.err) e.assign(size_t(L), {});
    sm.quant.assign(size_t(L), {});
    for (auto& rr : sm.reroutes) rr.assign(size_t(L), 0.0);
    for (auto& n : sm.routed) n.assign(size_t(L), 0);
  }

  const auto t0 = Clock::now();
  for (int seed = 0; seed < opt.seeds; ++seed) {
    std::vector<Walk> walks = proto;
    for (Walk& w : walks) {
      const auto x0 = synthetic_input(w.batch, H, input_seed(opt.seed, seed, w.batch), w.inputs);
      std::vector<double> r0d(x0.size());
      for (size_t i = 0; i < x0.size(); ++i) r0d[i] = bf16_to_float(x0[i]);
      w.stack[WeightFormat::kBF16] = r0d;
      for (Path p : kAllPaths) {
        w.alive[int(p)] = runs(backend, p, w.format);
        if (w.alive[int(p)]) {
          w.stack[path_weights(p, w.format)] = r0d;
          w.r[int(p)] = r0d;
        }
      }
      w.stack[w.format] = r0d;
    }
    for (int l = 0; l < L; ++l) {
      backend.set_layer(layer_seed(opt.seed, seed, l), needed);
      // FP64 stacks: route each, then copy out per format the union of the experts they need.
      std::map<WeightFormat, std::vector<int32_t>> want;
      for (Walk& w : walks)
        for (auto& [f, r] : w.stack) {
          w.stack_x[f] = moe_input(r, w.batch, H);
          w.stack_routing[f] = fp64_router(backend, s, w.stack_x[f].data(), w.batch);
          auto& ids = want[f];
          ids.insert(ids.end(), w.stack_routing[f].ids.begin(), w.stack_routing[f].ids.end());
        }
      for (auto& [f, ids] : want) {
        const HostExperts held = backend.slice(f, ids);
        for (Walk& w : walks) {
          const auto it = w.stack.find(f);
          if (it == w.stack.end()) continue;
          const PathRouting& rt = w.stack_routing[f];
          const auto y = reference::moe_experts(held.view(), w.stack_x[f].data(), held.remap(rt.ids).data(),
                                                rt.weights.data(), w.batch, reference::Precision::kFP64);
          for (size_t i = 0; i < y.size(); ++i) it->second[i] += y[i];
        }
      }
      // The paths, each on its own residual stream.
      for (size_t c = 0; c < walks.size(); ++c) {
        Walk& w = walks[c];
        for (Path p : kAllPaths) {
          if (!runs(backend, p, w.format)) continue;
          auto& err = smp[c].err[int(p)][size_t(l)];
          if (!w.alive[int(p)]) {
            err.push_back(NAN);
            continue;
          }
          const WeightFormat wf = path_weights(p, w.format);
          const auto x = moe_input(w.r[int(p)], w.batch, H);
          const PathRouting rt = backend.route(p, w.format, x.data(), w.batch);
          smp[c].reroutes[int(p)][size_t(l)] += reroutes(rt.ids, w.stack_routing[wf].ids, w.batch, K);
          ++smp[c].routed[int(p)][size_t(l)];
          const auto y = backend.experts(p, w.format, x.data(), rt, w.batch);
          auto& r = w.r[int(p)];
          for (size_t i = 0; i < r.size(); ++i) {
            const double v = r[i] + y[i];
            r[i] = opt.residual == ResidualFormat::kFP32 ? double(float(v)) : double(bf16_to_float(float_to_bf16(float(v))));
          }
          w.alive[int(p)] = all_finite(r);  // a NaN stream cannot be routed: its later depths are NaN
          const auto& ref = w.stack[wf];
          err.push_back(reference::compare(ref.data(), r.data(), r.size()).rel_l2);
        }
        if (w.format != WeightFormat::kBF16) {
          const auto& a = w.stack[WeightFormat::kBF16];
          const auto& q = w.stack[w.format];
          smp[c].quant[size_t(l)].push_back(reference::compare(a.data(), q.data(), a.size()).rel_l2);
        }
      }
    }
    if (progress)
      progress(detail::concat("drift: seed ", seed + 1, "/", opt.seeds, ", ", L, " layers done (",
                              int(seconds_since(t0)), " s)"));
  }

  std::vector<DriftRecord> out;
  for (size_t c = 0; c < proto.size(); ++c) {
    DriftRecord d;
    d.preset = opt.preset;
    d.source = backend.source();
    d.shape = s;
    d.format = proto[c].format;
    d.batch = proto[c].batch;
    d.inputs = proto[c].inputs;
    d.seeds = opt.seeds;
    d.layers = L;
    d.output = opt.output;
    d.residual = opt.residual;
    for (Path p : kAllPaths) {
      d.runs[int(p)] = runs(backend, p, d.format);
      d.weights[int(p)] = path_weights(p, d.format);
      for (int l = 0; l < L; ++l) {
        d.rel_l2[int(p)].push_back(summarize(smp[c].err[int(p)][size_t(l)]));
        // Over the seeds whose stream was still finite at this depth (a dead
        // stream is not routed): NaN where none was.
        const int n = smp[c].routed[int(p)][size_t(l)];
        d.reroutes[int(p)].push_back(n ? smp[c].reroutes[int(p)][size_t(l)] / n : NAN);
      }
    }
    for (int l = 0; l < L; ++l) {
      d.weight_quant.push_back(summarize(smp[c].quant[size_t(l)]));
      std::vector<double> fp8, bf16;
      const auto& w = smp[c].err[int(Path::kWarp)][size_t(l)];
      for (size_t i = 0; i < w.size(); ++i) {
        if (d.runs[int(Path::kClassicalFp8)])
          fp8.push_back(error_ratio(smp[c].err[int(Path::kClassicalFp8)][size_t(l)][i], w[i]));
        bf16.push_back(error_ratio(smp[c].err[int(Path::kClassicalBf16)][size_t(l)][i], w[i]));
      }
      d.ratio_fp8_over_warp.push_back(summarize(fp8, Worst::kSmallest));
      d.ratio_bf16_over_warp.push_back(summarize(bf16, Worst::kSmallest));
    }
    out.push_back(std::move(d));
  }
  return out;
}

// ---- JSON --------------------------------------------------------------------------------------
namespace {

Json shape_json(const MoeShape& s) {
  return {{"hidden", s.hidden}, {"intermediate", s.intermediate}, {"experts", s.experts}, {"top_k", s.top_k}};
}

// NaN (a path that produced non-finite output) is written as null.
Json num(double v) { return std::isfinite(v) ? Json(v) : Json(); }

Json summary_json(const Summary& s) { return {{"median", num(s.median)}, {"worst", num(s.worst)}}; }

const char* const kErrKey[kPaths] = {"err_warp", "err_classical_bf16", "err_classical_fp8", "err_classical_w8a16"};

}  // namespace

Json to_json(const LayerRecord& r) {
  Json j;
  j["preset"] = r.preset;
  j["format"] = to_string(r.format);
  j["batch"] = r.batch;
  j["inputs"] = to_string(r.inputs);
  for (Path p : kAllPaths) j[kErrKey[int(p)]] = r.paths[int(p)].runs ? num(r.paths[int(p)].rel_l2.median) : Json();
  j["ratio_fp8_over_warp"] = r.paths[int(Path::kClassicalFp8)].runs ? num(r.ratio_fp8_over_warp.median) : Json();
  j["err_weight_quant"] = r.weight_quant.count ? num(r.weight_quant.median) : Json();
  j["ratio_bf16_over_warp"] = num(r.ratio_bf16_over_warp.median);
  j["source"] = r.source;
  j["seeds"] = r.seeds;
  j["output"] = to_string(r.output);
  j["shape"] = shape_json(r.shape);
  j["statistic"] = "median over seeds of the relative L2 error vs FP64; worst = largest error, smallest ratio";
  Json worst, weights, max_rel, non_finite;
  for (Path p : kAllPaths) {
    const PathStats& ps = r.paths[int(p)];
    if (!ps.runs) continue;
    worst[kErrKey[int(p)]] = num(ps.rel_l2.worst);
    weights[to_string(p)] = to_string(ps.weights);
    max_rel[to_string(p)] = summary_json(ps.max_rel);
    // Seeds whose error was NaN or Inf: what tells a path that ran and wrote
    // non-finite output (its err_* null) from one that did not run.
    non_finite[to_string(p)] = ps.rel_l2.non_finite;
  }
  if (r.paths[int(Path::kClassicalFp8)].runs) worst["ratio_fp8_over_warp"] = num(r.ratio_fp8_over_warp.worst);
  worst["ratio_bf16_over_warp"] = num(r.ratio_bf16_over_warp.worst);
  if (r.weight_quant.count) {
    worst["err_weight_quant"] = num(r.weight_quant.worst);
    max_rel["weight_quant"] = summary_json(r.weight_quant_max);
  }
  j["worst"] = worst;
  j["weights"] = weights;
  j["max_rel"] = max_rel;
  j["non_finite"] = non_finite;
  return j;
}

Json to_json(const DriftRecord& d) {
  auto medians = [](const std::vector<Summary>& v) {
    Json a = Json::array();
    for (const auto& s : v) a.push_back(num(s.median));
    return a;
  };
  auto worsts = [](const std::vector<Summary>& v) {
    Json a = Json::array();
    for (const auto& s : v) a.push_back(num(s.worst));
    return a;
  };
  Json j;
  j["preset"] = d.preset;
  j["format"] = to_string(d.format);
  j["batch"] = d.batch;
  j["inputs"] = to_string(d.inputs);
  j["layers"] = d.layers;
  Json depth = Json::array();
  for (int l = 1; l <= d.layers; ++l) depth.push_back(l);
  j["depth"] = depth;
  Json worst, weights, rer, non_finite;
  for (Path p : kAllPaths) {
    if (!d.runs[int(p)]) {
      j[kErrKey[int(p)]] = nullptr;
      continue;
    }
    j[kErrKey[int(p)]] = medians(d.rel_l2[int(p)]);
    worst[kErrKey[int(p)]] = worsts(d.rel_l2[int(p)]);
    weights[to_string(p)] = to_string(d.weights[int(p)]);
    rer[to_string(p)] = d.reroutes[int(p)];
    Json counts = Json::array();
    for (const auto& s : d.rel_l2[int(p)]) counts.push_back(s.non_finite);
    non_finite[to_string(p)] = counts;
  }
  const bool fp8 = d.runs[int(Path::kClassicalFp8)];
  j["ratio_fp8_over_warp"] = fp8 ? medians(d.ratio_fp8_over_warp) : Json();
  j["err_weight_quant"] = d.format != WeightFormat::kBF16 ? medians(d.weight_quant) : Json();
  j["ratio_bf16_over_warp"] = medians(d.ratio_bf16_over_warp);
  if (fp8) worst["ratio_fp8_over_warp"] = worsts(d.ratio_fp8_over_warp);
  worst["ratio_bf16_over_warp"] = worsts(d.ratio_bf16_over_warp);
  if (d.format != WeightFormat::kBF16) worst["err_weight_quant"] = worsts(d.weight_quant);
  j["worst"] = worst;
  j["weights"] = weights;
  j["reroutes"] = rer;
  j["non_finite"] = non_finite;
  j["source"] = d.source;
  j["seeds"] = d.seeds;
  j["output"] = to_string(d.output);
  j["residual"] = to_string(d.residual);
  j["shape"] = shape_json(d.shape);
  j["statistic"] = "per depth: median over seeds of ||r_path - r_fp64|| / ||r_fp64|| of the residual stream";
  return j;
}

}  // namespace wd::accuracy
