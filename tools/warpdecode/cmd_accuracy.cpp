// warpdecode accuracy: the error of warp decode, the classical BF16 path and
// the classical W8A8 FP8 path against the FP64 reference, on the same
// weights and inputs, over many seeds; optionally through a stack of layers
// (drift). Method and definitions: src/accuracy/harness.h, docs/ACCURACY.md.
//
// With a CUDA GPU the paths are the GPU kernels. Without one (or with --cpu)
// they are CPU models of the paths, and every line and record says so.
// With --model DIR the one-layer study runs on a checkpoint's MoE layer
// (layer_source.h) instead of synthetic weights.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "accuracy/harness.h"
#include "core/json_write.h"
#include "tools/warpdecode/batch_list.h"
#include "tools/warpdecode/commands.h"
#include "tools/warpdecode/layer_source.h"
#include "tools/warpdecode/shape_options.h"
#include "warpdecode/error.h"

namespace wd::cli {
namespace {

using accuracy::Json;
using accuracy::Path;

struct Opts {
  ShapeOptions shape;
  std::vector<std::string> formats{"mxfp8"};
  std::vector<int> batches{1, 8, 32};
  std::vector<std::string> inputs{"gaussian", "outliers"};
  int seeds = 8;
  uint64_t seed = 1;
  std::string output = "bf16";
  std::string drift_layers = "0";
  std::vector<int> drift_batches{8};
  std::vector<std::string> drift_inputs;
  int drift_seeds = 3;
  std::string residual = "fp32";
  bool drift_only = false, cpu = false;
  std::string json;
  ModelOptions model;
  // Options given on the command line (CLI::App::count) that only one of
  // the two studies takes.
  std::vector<std::string> one_layer_given, drift_given;
};

// A statistic of a path that ran: NaN or inf where it wrote non-finite
// output ("-" is left for paths that did not run).
std::string cell(double v, const char* f) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void print_layer(const std::vector<accuracy::LayerRecord>& recs) {
  std::printf("%-16s %-12s %4s %-8s %-9s | %-19s | %-19s | %-19s | %-19s | %-13s | %-9s\n", "preset", "format", "B",
              "inputs", "source", "warp med / worst", "cl.bf16 med / worst", "cl.fp8 med / worst", "w8a16 med / worst",
              "fp8/warp med/min", "wquant");
  std::set<std::string> other_weights;  // "format rows: the weights warp decode ran" where they differ
  for (const auto& r : recs) {
    auto errs = [&](Path p) {
      const auto& ps = r.paths[int(p)];
      return ps.runs ? cell(ps.rel_l2.median, "%.2e") + " " + cell(ps.rel_l2.worst, "%.2e") : std::string("-");
    };
    const bool fp8 = r.paths[int(Path::kClassicalFp8)].runs;
    std::printf("%-16s %-12s %4d %-8s %-9s | %-19s | %-19s | %-19s | %-19s | %-13s | %-9s\n", r.preset.c_str(),
                to_string(r.format), r.batch, accuracy::to_string(r.inputs), r.source.c_str(), errs(Path::kWarp).c_str(),
                errs(Path::kClassicalBf16).c_str(), errs(Path::kClassicalFp8).c_str(),
                errs(Path::kClassicalW8A16).c_str(),
                fp8 ? (cell(r.ratio_fp8_over_warp.median, "%.2f") + " " + cell(r.ratio_fp8_over_warp.worst, "%.2f")).c_str()
                    : "-",
                r.weight_quant.count ? cell(r.weight_quant.median, "%.2e").c_str() : "-");
    const accuracy::PathStats& warp = r.paths[int(Path::kWarp)];
    if (warp.runs && warp.weights != r.format)
      other_weights.insert(std::string(to_string(r.format)) + " rows: " + to_string(warp.weights));
  }
  // As the report says it: warp decode does not stream every format (FP8
  // block-128), and its column is then its error on the weights it ran.
  for (const std::string& w : other_weights) std::printf("# warp decode ran other weights in %s\n", w.c_str());
  std::fflush(stdout);
}

void print_drift(const accuracy::DriftRecord& d) {
  std::printf("# drift %s %s, B = %d, %s inputs, %d layers (%s, %d seeds, residual %s): rel. L2 of the residual "
              "stream vs the FP64 stack, median over seeds\n",
              d.preset.c_str(), to_string(d.format), d.batch, accuracy::to_string(d.inputs), d.layers,
              d.source.c_str(), d.seeds, accuracy::to_string(d.residual));
  std::printf("%6s %10s %10s %10s %10s %9s %10s   %s\n", "depth", "warp", "cl.bf16", "cl.fp8", "cl.w8a16", "fp8/warp",
              "wquant", "reroutes warp/bf16/fp8/w8a16");
  std::vector<int> depths;
  for (int l = 1; l < d.layers; l = d.layers <= 8 ? l + 1 : l * 2) depths.push_back(l);
  depths.push_back(d.layers);
  const bool fp8 = d.runs[int(Path::kClassicalFp8)], a16 = d.runs[int(Path::kClassicalW8A16)],
             wq = d.format != WeightFormat::kBF16;
  for (int l : depths) {
    const size_t i = size_t(l - 1);
    std::printf("%6d %10s %10s %10s %10s %9s %10s   %s/%s/%s/%s\n", l, cell(d.rel_l2[0][i].median, "%.2e").c_str(),
                cell(d.rel_l2[1][i].median, "%.2e").c_str(), fp8 ? cell(d.rel_l2[2][i].median, "%.2e").c_str() : "-",
                a16 ? cell(d.rel_l2[3][i].median, "%.2e").c_str() : "-",
                fp8 ? cell(d.ratio_fp8_over_warp[i].median, "%.2f").c_str() : "-",
                wq ? cell(d.weight_quant[i].median, "%.2e").c_str() : "-", cell(d.reroutes[0][i], "%.1f").c_str(),
                cell(d.reroutes[1][i], "%.1f").c_str(), fp8 ? cell(d.reroutes[2][i], "%.1f").c_str() : "-",
                a16 ? cell(d.reroutes[3][i], "%.1f").c_str() : "-");
  }
  std::fflush(stdout);
}

void run(const Opts& o) {
  o.model.validate(o.shape);
  std::vector<WeightFormat> formats;
  for (const auto& f : o.formats) formats.push_back(parse_weight_format(f));
  accuracy::DriftOptions c;
  std::string label = o.shape.label(), model_label, weights_note;
  std::vector<std::string> not_measured;  // formats the checkpoint cannot give, and why
  MoeShape shape;
  if (!o.model.given()) {
    shape = o.shape.resolve();
    c.formats = formats;
  } else {
    WD_CHECK(o.drift_layers == "0" && !o.drift_only, "--model measures the checkpoint's layer alone: drift runs ",
             "synthetic stacks (drop ", o.drift_only ? "--drift-only" : "--drift-layers", ")");
    const LayerSource src = o.model.source();
    shape = src.shape;
    label = src.name;
    model_label = src.label;
    weights_note = "bf16: " + src.origin(WeightFormat::kBF16);
    c.formats.clear();
    for (WeightFormat f : formats) {
      if (const std::string why = src.unavailable(f); !why.empty()) {
        not_measured.push_back(detail::concat(to_string(f), ": not measured: ", why));
        continue;
      }
      c.formats.push_back(f);
      if (f != WeightFormat::kBF16) weights_note += detail::concat("; ", to_string(f), ": ", src.origin(f));
    }
    WD_CHECK(!c.formats.empty(), "accuracy: no format asked for can be measured on ", src.label, ": ",
             not_measured.front());
    c.layer = src.weights;
  }
  c.preset = label;
  c.shape = shape;
  c.batches = o.batches;
  c.inputs.clear();
  for (const auto& k : o.inputs) c.inputs.push_back(accuracy::parse_input_kind(k));
  c.seeds = o.seeds;
  c.seed = o.seed;
  c.output = accuracy::parse_output_format(o.output);
  c.residual = accuracy::parse_residual_format(o.residual);
  int layers = 0;
  if (o.drift_layers == "full") {
    layers = shape.num_layers;
  } else {
    try {
      size_t used = 0;
      layers = std::stoi(o.drift_layers, &used);
      WD_CHECK(used == o.drift_layers.size(), "");
    } catch (const std::exception&) {
      throw InvalidArgument("--drift-layers '" + o.drift_layers + "' must be a number of layers or 'full'");
    }
  }
  WD_CHECK(layers >= 0 && layers <= 1024, "--drift-layers = ", layers, " must be in [0, 1024] (or 'full')");
  WD_CHECK(!o.drift_only || layers > 0, "--drift-only needs --drift-layers");
  WD_CHECK(o.drift_seeds >= 1, "--drift-seeds = ", o.drift_seeds, " must be >= 1");
  // Everything the drift study takes is checked here, before the one-layer
  // study runs: a bad value must not cost that study's time first.
  std::vector<InputKind> drift_inputs;
  for (const auto& k : o.drift_inputs) drift_inputs.push_back(accuracy::parse_input_kind(k));
  // An option the run would not use is refused, not silently dropped.
  if (o.drift_only && !o.one_layer_given.empty())
    throw InvalidArgument(o.one_layer_given.front() + " does nothing with --drift-only (the drift study takes "
                          "--drift-batch and --drift-seeds)");
  if (layers == 0 && !o.drift_given.empty())
    throw InvalidArgument(o.drift_given.front() + " does nothing without --drift-layers");
  if (!o.json.empty()) json_write::check_writable(o.json);

  const auto gpu = query_gpu();
  std::unique_ptr<accuracy::Backend> backend;
#ifdef WD_HAVE_CUDA
  const int max_batch = std::max(*std::max_element(o.batches.begin(), o.batches.end()),
                                 *std::max_element(o.drift_batches.begin(), o.drift_batches.end()));
  if (gpu && !o.cpu) backend = accuracy::make_gpu_backend(shape, max_batch, c.output);
#endif
  if (!backend) backend = accuracy::make_cpu_backend(shape, c.output);

  std::printf("accuracy %s: H=%d I=%d E=%d K=%d, %d seeds from %llu, outputs %s\n", c.preset.c_str(), shape.hidden,
              shape.intermediate, shape.experts, shape.top_k, o.drift_only ? o.drift_seeds : c.seeds,
              (unsigned long long)c.seed, accuracy::to_string(c.output));
  if (c.layer)
    std::printf("weights: %s, the same layer for every seed (new inputs each)\n  %s\n", model_label.c_str(),
                weights_note.c_str());
  for (const auto& n : not_measured) std::printf("%s\n", n.c_str());
  if (backend->gpu())
    std::printf("GPU: %s, %s | %s\n", gpu->name.c_str(), cuda_versions(*gpu).c_str(), build_description().c_str());
  else
    std::printf("%s: every number below comes from CPU models of the paths (FP32 reference, classical CPU "
                "reference), not from GPU kernels\n",
                gpu ? "--cpu" : "no CUDA GPU");
  for (Path p : accuracy::kAllPaths) std::printf("  %-15s %s\n", accuracy::to_string(p), backend->describe(p).c_str());
  std::fflush(stdout);

  auto progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
  Json doc;
  Json header = {{"tool", "warpdecode accuracy"}, {"source", backend->source()}};
  if (backend->gpu() && gpu) {
    header["card"] = gpu->name;
    header["sms"] = gpu->sms;
    header["driver"] = gpu->driver;
    header["cuda_driver"] = gpu->cuda_driver;
    header["cuda_runtime"] = gpu->cuda_runtime;
    header["sm_clock_mhz"] = gpu->sm_clock_mhz;
    header["mem_clock_mhz"] = gpu->mem_clock_mhz;
    header["max_sm_clock_mhz"] = gpu->max_sm_clock_mhz;
  }
  header["commit"] = build_commit();
  header["build"] = build_description();
  header["command"] = command_line();
  header["time_utc"] = std::time(nullptr);
  header["output"] = accuracy::to_string(c.output);
  Json paths;
  for (Path p : accuracy::kAllPaths) paths[accuracy::to_string(p)] = backend->describe(p);
  header["paths"] = paths;
  header["weights"] = c.layer ? model_label + ", the same layer for every seed (new inputs each): " + weights_note
                               : "synthetic: BF16 N(0, 0.02) (SyntheticSpec defaults), one seed per layer; FP8 "
                                     "formats quantized from them";
  if (!not_measured.empty()) header["not_measured"] = not_measured;
  header["method"] =
      "one layer: FP64 router's routing given to every path; each path vs wd::reference::moe_experts (FP64) on the "
      "weights it ran; drift: r += moe(bf16(rmsnorm(r))) per layer, each path with its own router and residual stream";
  doc["header"] = header;
  doc["records"] = Json::array();
  doc["drift"] = Json::array();

  // Written after each part, so that a run stopped during the (long) drift
  // study keeps its one-layer records.
  auto write_json = [&] {
    if (!o.json.empty()) json_write::to_file(doc, o.json);
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.drift_only) {
    const auto recs = accuracy::measure_layer(*backend, c, progress);
    print_layer(recs);
    for (const auto& r : recs) doc["records"].push_back(accuracy::to_json(r));
    write_json();
  }
  if (layers > 0) {
    accuracy::DriftOptions d = c;
    d.layers = layers;
    d.batches = o.drift_batches;
    d.seeds = o.drift_seeds;
    if (!drift_inputs.empty()) d.inputs = drift_inputs;
    for (const auto& r : accuracy::measure_drift(*backend, d, progress)) {
      print_drift(r);
      doc["drift"].push_back(accuracy::to_json(r));
    }
  }
  std::printf("# %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  write_json();
  if (!o.json.empty()) std::printf("# wrote %s\n", o.json.c_str());
}

}  // namespace

void add_accuracy(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "accuracy", "Error of warp decode and the classical paths against the FP64 reference (one layer, and through a stack)");
  auto o = std::make_shared<Opts>();
  o->shape.add_to(cmd);
  cmd->add_option("--format", o->formats, "Weight formats: mxfp8, fp8-block128, bf16")->delimiter(',')->capture_default_str();
  add_batch_list(cmd, "--batch,-b", o->batches, "Batch sizes");
  cmd->add_option("--inputs", o->inputs, "Activations: gaussian, outliers")->delimiter(',')->capture_default_str();
  cmd->add_option("--seeds", o->seeds, "Random seeds (weights and inputs) per measurement")->capture_default_str();
  cmd->add_option("--seed", o->seed, "First seed")->capture_default_str();
  cmd->add_option("--output", o->output, "What the paths write: bf16 or fp32")->capture_default_str();
  cmd->add_option("--drift-layers", o->drift_layers, "Also measure drift through this many layers ('full': the preset's)")
      ->capture_default_str();
  add_batch_list(cmd, "--drift-batch", o->drift_batches, "Batch sizes of the drift study");
  cmd->add_option("--drift-inputs", o->drift_inputs, "Activations of the drift study (default: --inputs)")->delimiter(',');
  cmd->add_option("--drift-seeds", o->drift_seeds, "Seeds of the drift study")->capture_default_str();
  cmd->add_option("--residual", o->residual, "Residual stream of the paths in the drift study: fp32 or bf16")
      ->capture_default_str();
  cmd->add_flag("--drift-only", o->drift_only, "Skip the one-layer measurement");
  cmd->add_flag("--cpu", o->cpu, "Run the CPU models even where a GPU is present");
  cmd->add_option("--json", o->json, "Also write the records as JSON to this file");
  o->model.add_to(cmd,
                  "A Hugging Face Qwen3-MoE checkpoint directory: measure one of its MoE layers (its real weights and "
                  "router, in each format as `check --model` takes it) instead of synthetic weights; every seed draws "
                  "new inputs");
  cmd->callback([o, cmd] {
    o->one_layer_given.clear();
    o->drift_given.clear();
    for (const char* name : {"--batch", "--seeds"})
      if (cmd->count(name)) o->one_layer_given.push_back(name);
    for (const char* name : {"--drift-batch", "--drift-seeds", "--drift-inputs", "--residual"})
      if (cmd->count(name)) o->drift_given.push_back(name);
    run(*o);
  });
}

}  // namespace wd::cli
