// warpdecode check: the self-test a user runs on their own machine. Every
// implementation of the MoE layer in this build is run on fresh random
// inputs and compared with the FP64 CPU reference on the same (dequantized)
// weights; one line per implementation, pass/fail against its tolerance.
//
// Tolerances (relative L2 error vs FP64) and why:
//   CPU FP32 path                1e-5   FP32 accumulation over H and I terms
//   CPU router                   ids exact, weights 1e-12: top-K of the
//                                softmax of its logits, recomputed here
//   CPU classical emulation      1e-2   an independent implementation (its own
//                                dequantization, grouping by expert) with
//                                BF16 roundings of g, u, h and the partials
//   GPU warp decode, FP32 output 2e-5   FP32 registers, FP32 intermediate h
//   GPU warp decode, BF16 output 4e-3   one BF16 rounding of y (unit roundoff
//                                2^-8), and bit-equal to the FP32 output
//                                rounded to nearest even
//   GPU tiled-only weights       2e-5, and bit-equal to the default upload
//   GPU router                   ids exact, weights 1e-5 (inputs redrawn
//                                until no near-tie decides the top-k)
//   GPU classical path, MoeDispatch   check_classical.cpp (BF16 and W8A16
//                                1e-2, W8A8 2^-4 and at least 5e-3; each
//                                against its CPU emulation too)
// FP8 block-128 weights run the CPU reference and the classical path only
// (warp decode does not stream them).
//
// The weights are synthetic (a preset or custom shape), or with --model DIR
// one MoE layer of a Hugging Face checkpoint, its router included, as the
// loader converts it (layer_source.h); the inputs are Gaussian either way.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/warpdecode/check_rows.h"
#include "tools/warpdecode/commands.h"
#include "tools/warpdecode/layer_source.h"
#include "tools/warpdecode/shape_options.h"
#include "warpdecode/classical_reference.h"
#include "warpdecode/error.h"
#include "warpdecode/reference.h"
#include "warpdecode/weights.h"
#ifdef WD_HAVE_CUDA
#include "core/device_buffer.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/warp_decode.h"
#endif

namespace wd::cli {

CheckRow judge(const std::string& fmt, const std::string& path, const std::vector<double>& ref,
               const std::vector<double>& out, double tol) {
  const auto st = reference::compare(ref.data(), out.data(), ref.size());
  CheckRow r{fmt, path, st.rel_l2, st.max_rel, tol, st.non_finite == 0 && st.rel_l2 <= tol, "", false};
  if (st.non_finite) r.note = std::to_string(st.non_finite) + " non-finite outputs";
  return r;
}

namespace {

void print_row(const CheckRow& r) {
  char err[64] = "-", mx[64] = "-", tol[64] = "-";
  if (!std::isnan(r.rel_l2)) std::snprintf(err, sizeof err, "%.3e", r.rel_l2);
  if (!std::isnan(r.max_rel)) std::snprintf(mx, sizeof mx, "%.3e", r.max_rel);
  if (!std::isnan(r.tolerance)) std::snprintf(tol, sizeof tol, "%.0e", r.tolerance);
  std::printf("%-12s %-50s %-10s %-10s %-8s %-6s %s\n", r.format.c_str(), r.path.c_str(), err, mx, tol,
              r.skipped ? "skip" : r.pass ? "pass" : "FAIL", r.note.c_str());
  std::fflush(stdout);
}

// Inputs whose routing no near-tie decides (the GPU's FP32 router is checked
// against the FP64 one, its ids exactly): a token with a gap below 1e-4
// among its top K + 1 logits is redrawn on its own, so that a batch of any
// size is drawn in a few tries per token (redrawing the whole batch never
// ends at B = 1024 on qwen3-30b-a3b). Tokens without a near-tie keep the
// first draw.
std::pair<std::vector<uint16_t>, reference::Routing> untied_inputs(const MoeWeights& w, int batch, uint64_t seed) {
  const MoeShape& s = w.shape();
  const size_t H = size_t(s.hidden), E = size_t(s.experts), K = size_t(s.top_k);
  std::vector<uint16_t> x = synthetic_input(batch, s.hidden, seed * 1000, InputKind::kGaussian);
  reference::Routing routing = reference::router(w.view(), x.data(), batch);
  for (size_t b = 0; b < size_t(batch); ++b)
    for (uint64_t attempt = 1;; ++attempt) {
      reference::Routing one;
      one.batch = 1;
      one.top_k = s.top_k;
      one.logits.assign(routing.logits.begin() + b * E, routing.logits.begin() + (b + 1) * E);
      if (reference::min_topk_gap(one, s.experts) > 1e-4) break;
      WD_CHECK(attempt < 50, "could not draw token ", b, "'s input without a near-tie in its routing");
      const auto row = synthetic_input(1, s.hidden, (seed * 1000 + 1) * 1000003 + b * 64 + attempt, InputKind::kGaussian);
      const reference::Routing r1 = reference::router(w.view(), row.data(), 1);
      std::copy(row.begin(), row.end(), x.begin() + b * H);
      std::copy(r1.ids.begin(), r1.ids.end(), routing.ids.begin() + b * K);
      std::copy(r1.weights.begin(), r1.weights.end(), routing.weights.begin() + b * K);
      std::copy(r1.logits.begin(), r1.logits.end(), routing.logits.begin() + b * E);
    }
  return {std::move(x), std::move(routing)};
}

// The FP64 router's routing against what top-K of a softmax must be,
// recomputed here from its logits: K distinct experts, none left out with
// a larger logit than one taken, weights the softmax's probabilities of the
// taken experts (renormalised over them with norm_topk_prob).
CheckRow check_router(const MoeWeights& w, const reference::Routing& r) {
  const MoeShape& s = w.shape();
  const size_t E = size_t(s.experts), K = size_t(s.top_k);
  size_t bad_ids = 0;
  double w_err = 0;
  for (size_t b = 0; b < size_t(r.batch); ++b) {
    const double* logit = &r.logits[b * E];
    const int32_t* id = &r.ids[b * K];
    std::vector<bool> taken(E, false);
    double low = INFINITY;
    for (size_t k = 0; k < K; ++k) {
      const bool ok = id[k] >= 0 && size_t(id[k]) < E && !taken[size_t(id[k])];
      bad_ids += !ok;
      if (!ok) continue;
      taken[size_t(id[k])] = true;
      low = std::min(low, logit[id[k]]);
    }
    for (size_t e = 0; e < E; ++e) bad_ids += !taken[e] && logit[e] > low;
    const double top = *std::max_element(logit, logit + E);
    double all = 0, chosen = 0;
    for (size_t e = 0; e < E; ++e) all += std::exp(logit[e] - top);
    for (size_t k = 0; k < K && bad_ids == 0; ++k) chosen += std::exp(logit[id[k]] - top);
    for (size_t k = 0; k < K && bad_ids == 0; ++k) {
      const double p = std::exp(logit[id[k]] - top) / (s.norm_topk_prob ? chosen : all);
      w_err = std::max(w_err, std::abs(r.weights[b * K + k] - p) / p);
    }
  }
  CheckRow row{to_string(w.format()), "cpu router (top-k of the softmax)", NAN, w_err, 1e-12,
               bad_ids == 0 && w_err <= 1e-12, bad_ids ? std::to_string(bad_ids) + " ids wrong" : "ids exact", false};
  return row;
}

#ifdef WD_HAVE_CUDA
std::vector<CheckRow> check_gpu(const MoeWeights& w, const std::vector<uint16_t>& x, int batch,
                           const reference::Routing& routing, const std::vector<double>& ref) {
  std::vector<CheckRow> rows;
  const std::string fmt = to_string(w.format());
  const MoeShape& s = w.shape();
  const size_t BK = size_t(batch) * s.top_k, BH = size_t(batch) * s.hidden;
  auto dw = DeviceMoeWeights::upload(w);
  DeviceBuffer<uint16_t> dx(x);
  // One layer object per kernel family the shape takes; the first also
  // serves the router check (the router does not depend on the family).
  std::vector<KernelFamily> families{KernelFamily::kScalar};
  if (WarpDecodeConfig::tensor_cores_fit(s)) families.push_back(KernelFamily::kTensorCores);
  std::vector<std::unique_ptr<WarpDecodeMoe>> layers;
  for (KernelFamily fam : families) layers.push_back(std::make_unique<WarpDecodeMoe>(s, batch, fam));
  const WarpDecodeMoe& moe = *layers.front();

  // Router kernel against the FP64 router.
  DeviceBuffer<int32_t> ids(BK);
  DeviceBuffer<float> rw(BK);
  ids.fill_bytes(0xFF);
  rw.fill_bytes(0xFF);
  moe.route(dw.view(), dx.data(), batch, ids.data(), rw.data(), nullptr);
  const auto got_ids = ids.download();
  const auto got_w = rw.download();
  size_t id_mismatch = 0, non_finite = 0;
  double w_err = 0;
  for (size_t i = 0; i < BK; ++i) {
    id_mismatch += got_ids[i] != routing.ids[i];
    // A weight left unwritten is the NaN poison, which std::max would drop.
    non_finite += !std::isfinite(got_w[i]);
    w_err = std::max(w_err, std::abs(double(got_w[i]) - routing.weights[i]) / std::abs(routing.weights[i]));
  }
  CheckRow rr{fmt, "gpu router", NAN, non_finite ? NAN : w_err, 1e-5,
              id_mismatch == 0 && non_finite == 0 && w_err <= 1e-5, "", false};
  rr.note = id_mismatch ? std::to_string(id_mismatch) + " expert ids differ" : "ids exact";
  if (non_finite) add_note(rr, std::to_string(non_finite) + " weights not finite");
  rows.push_back(rr);

  // Expert kernels with the reference routing, FP32 and BF16 outputs, in each
  // kernel family the shape takes (the default object runs one of them).
  DeviceBuffer<int32_t> rid(routing.ids);
  DeviceBuffer<float> rwt(std::vector<float>(routing.weights.begin(), routing.weights.end()));
  const RoutingView rv{batch, s.top_k, rid.data(), rwt.data()};
  auto fp32_out = [&](const WarpDecodeMoe& fm, const MoeWeightsView& view) {
    return poisoned_fp32_output(BH, [&](const MoeOutput& o) { fm.experts(view, dx.data(), rv, o, nullptr); });
  };
  std::vector<double> tc_fp32;  // the tensor cores' FP32 output on the default upload
  for (size_t li = 0; li < families.size(); ++li) {
    const KernelFamily fam = families[li];
    const WarpDecodeMoe& fm = *layers[li];
    const std::string name = std::string("gpu warp ") + (fam == KernelFamily::kScalar ? "scalar" : "tensor-core");
    std::vector<double> y32;  // this family's FP32 output
    for (OutputType t : {OutputType::kFP32, OutputType::kBF16}) {
      std::vector<double> y(BH);
      if (t == OutputType::kFP32) {
        y = y32 = fp32_out(fm, dw.view());
        if (fam == KernelFamily::kTensorCores) tc_fp32 = y;
        rows.push_back(judge(fmt, name + " (fp32 out)", ref, y, 2e-5));
      } else {
        DeviceBuffer<uint16_t> dy(BH);
        dy.fill_bytes(0xFF);
        fm.experts(dw.view(), dx.data(), rv, MoeOutput{dy.data(), t, nullptr}, nullptr);
        const auto h = dy.download();
        for (size_t i = 0; i < BH; ++i) y[i] = bf16_to_float(h[i]);
        // Both outputs are stored from the same FP32 sum (deterministic):
        // the BF16 one must be its round-to-nearest-even, bit for bit. The
        // 4e-3 bound alone passes a truncating store (about 3.3e-3).
        CheckRow r = judge(fmt, name + " (bf16 out)", ref, y, 4e-3);
        size_t off = 0;
        for (size_t i = 0; i < BH; ++i) off += h[i] != float_to_bf16(float(y32[i]));
        r.pass = r.pass && off == 0;
        add_note(r, off ? std::to_string(off) + " VALUES ARE NOT the fp32 output rounded to nearest even"
                        : "the fp32 output rounded to nearest even");
        rows.push_back(r);
      }
    }
  }
  // Uploaded tiled-only (the tiled copies alone) and with both tiled copies
  // beside the canonical tensors: the tensor cores stream the tiled copies,
  // with the same bits as on the default upload.
  if (!tc_fp32.empty() && down_tiling_fits(s) && gate_up_tiling_fits(s)) {
    const std::pair<const char*, DeviceWeightsOptions> uploads[] = {
        {"tiled-only", DeviceWeightsOptions::tiled_only()},
        {"tiled beside canonical", DeviceWeightsOptions::tiled_beside_canonical()}};
    for (const auto& [label, options] : uploads) {
      const auto tiled = DeviceMoeWeights::upload(w, options);
      WD_CHECK(tiled.view().gate_up_tiled != nullptr && tiled.view().down_tiled != nullptr, "check: the ", label,
               " upload holds no tiled copies");
      const auto y = fp32_out(*layers.back(), tiled.view());
      CheckRow r = judge(fmt, std::string("gpu warp tensor-core, ") + label, ref, y, 2e-5);
      const bool same = y == tc_fp32;
      r.pass = r.pass && same;
      add_note(r, same ? "bits equal the default upload's" : "BITS DIFFER from the default upload's");
      rows.push_back(r);
    }
  }
  WD_CUDA_CHECK(cudaDeviceSynchronize());
  return rows;
}
#endif

}  // namespace

void add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "Self-test: every MoE implementation in this build against the FP64 reference");
  struct Opts {
    ShapeOptions shape;
    int batch = 4;
    std::string format = "all";
    uint64_t seed = 1;
    ModelOptions model;
  };
  auto o = std::make_shared<Opts>();
  o->shape.add_to(cmd);
  cmd->add_option("--batch,-b", o->batch, "Tokens in the batch")->capture_default_str();
  cmd->add_option("--format", o->format, "Weight format: bf16, mxfp8, fp8-block128 (the classical path only) or all")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed of weights and inputs (with --model, of the inputs)")
      ->capture_default_str();
  o->model.add_to(cmd,
                  "A Hugging Face Qwen3-MoE checkpoint directory: check one of its MoE layers, its real weights "
                  "(and router) converted as the loader converts them, instead of synthetic ones");
  cmd->callback([o] {
    WD_CHECK(o->batch >= 1 && o->batch <= 4096, "batch = ", o->batch, " must be in [1, 4096]");
    WD_CHECK(o->format == "all" || o->format == "bf16" || o->format == "mxfp8" || o->format == "fp8-block128",
             "unknown format '", o->format, "' (allowed: bf16, mxfp8, fp8-block128, all)");
    o->model.validate(o->shape);
    const LayerSource src = o->model.given() ? o->model.source()
                                             : synthetic_layer_source(o->shape.resolve(), o->shape.label(), o->seed);
    const MoeShape& s = src.shape;
    const auto gpu = query_gpu();
    std::printf("check %s: H=%d I=%d E=%d K=%d, B=%d, seed %llu; %s\n", src.label.c_str(),
                s.hidden, s.intermediate, s.experts, s.top_k, o->batch,
                (unsigned long long)o->seed,
                gpu ? ("GPU: " + gpu->name).c_str() : "no CUDA GPU: CPU paths only");
    const auto asked = [&](WeightFormat f) { return o->format == "all" || o->format == to_string(f); };
    for (WeightFormat f : kWeightFormats)
      if (asked(f) && src.unavailable(f).empty())
        std::printf("  %s weights: %s\n", to_string(f), src.origin(f).c_str());

    std::printf("%-12s %-50s %-10s %-10s %-8s %-6s\n", "format", "path", "rel_l2", "max_rel", "tol", "result");
    int failed = 0, passed = 0, skipped = 0;
    // Inputs and routing come from the first format's router: every format
    // keeps the layer's router in BF16, the same values.
    std::vector<uint16_t> x;
    reference::Routing routing;
    bool router_checked = false;  // one router (BF16 in every format): one row
    for (WeightFormat f : kWeightFormats) {
      if (!asked(f)) continue;
      std::vector<CheckRow> rows;
      if (const std::string why = src.unavailable(f); !why.empty()) {
        rows.push_back(CheckRow{to_string(f), "every path", NAN, NAN, NAN, false, why, true});
      } else {
        const std::shared_ptr<const MoeWeights> w = src.weights(f);
        const MoeWeights& wr = *w;
        if (x.empty()) std::tie(x, routing) = untied_inputs(wr, o->batch, o->seed);
        const auto ref = reference::moe_experts(wr.view(), x.data(), routing.ids.data(),
                                                routing.weights.data(), o->batch,
                                                reference::Precision::kFP64);
        const auto fp32 = reference::moe_experts(wr.view(), x.data(), routing.ids.data(),
                                                 routing.weights.data(), o->batch,
                                                 reference::Precision::kFP32);
        rows.push_back(judge(to_string(f), "cpu fp32", ref, fp32, 1e-5));
        // The rows above share the reference's code (its dequantization,
        // routing and expert loop); these two do not, so that a check
        // without a GPU can fail on a logic bug too.
        if (!router_checked) rows.push_back(check_router(wr, routing));
        router_checked = true;
        rows.push_back(judge(to_string(f), "cpu classical emulation, BF16 roundings", ref,
                             reference::classical_experts(wr.view(), x.data(), routing.ids.data(),
                                                          routing.weights.data(), o->batch, 0, false, true),
                             1e-2));
#ifdef WD_HAVE_CUDA
        if (gpu) {
          if (f != WeightFormat::kFP8Block128)
            for (auto& r : check_gpu(wr, x, o->batch, routing, ref)) rows.push_back(r);
          for (auto& r : check_classical(wr, x, o->batch, routing, ref)) rows.push_back(r);
        }
#endif
      }
      for (const auto& r : rows) {
        print_row(r);
        if (r.skipped) ++skipped;
        else if (r.pass) ++passed;
        else ++failed;
      }
    }
    const int total = passed + failed;
    if (failed) throw Error(detail::concat("check failed: ", failed, " of ", total, " implementations outside tolerance"));
    WD_CHECK(total > 0, "check: nothing was checked (every format unavailable on this source: see the notes)");
    std::printf("all %d checks passed", total);
    if (skipped) std::printf(" (%d not run on this shape or device: see their notes)", skipped);
    std::printf("\n");
  });
}

}  // namespace wd::cli
