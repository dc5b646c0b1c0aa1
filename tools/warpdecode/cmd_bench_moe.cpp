// warpdecode bench-moe: µs per MoE layer, unique bytes, achieved TB/s and %
// of the read bandwidth this run measured on this card. See bench/moe_bench.h
// for the method.
#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/json_write.h"
#include "kernels/bandwidth.cuh"
#include "kernels/moe_tc.cuh"
#include "classical_path.h"
#include "moe_bench.h"
#include "tools/warpdecode/batch_list.h"
#include "tools/warpdecode/commands.h"
#include "tools/warpdecode/shape_options.h"
#include "warpdecode/error.h"

namespace wd::cli {
namespace {

struct Opts {
  std::vector<std::string> presets{"qwen3-30b-a3b"};
  ShapeOverrides overrides;  // applied to every preset; not with the tunes
  std::vector<std::string> formats{"bf16", "mxfp8"};
  std::vector<int> batches{1, 2, 4, 8, 16, 32, 64};
  std::string json;
  int calls = 16, replays = 30;
  int max_batch = 64;  // of the layer object whose default is timed: it fixes the kernel family
  double bw_gib = 4.0;
  bool sweep = false, no_router = false, stages = false, families = false;
  bool tune_untiled = false;
  bool untile = false;  // --untile (with --tune-untiled)
  bool no_classical = false, tune = false, classical_sweep = false, no_warp = false;  // the classical path (issue 4)
  bool tiled_gate_up = false;  // MXFP8 weights also keep the tiled gate_up copy (swept against the canonical)
  bool tiled_only = false;     // BF16 and MXFP8 weights as both tiled copies alone (DeviceWeightsOptions::tiled_only())
  bool tiled_beside = false;   // both tiled copies beside the canonical tensors (DeviceWeightsOptions::tiled_beside_canonical())
  std::vector<std::string> classical_configs;  // labels timed beside the default
  std::string tune_json = "crossover.json";
  std::string sweep_filter;  // --sweep times only the default and configurations whose label contains this
  std::vector<int> tune_batches;
  uint64_t seed = 1;
  std::string routing = "uniform";  // or "balanced" (bench::Options::balanced_routing)
};

std::string config_label(const WarpDecodeConfig& c) { return c.label(); }

// Each streaming-read pattern's rate, by name (the header's read_tbps is the
// fastest of them).
nlohmann::json read_patterns_json(const kernels::BandwidthResult& bw) {
  nlohmann::json j = nlohmann::json::object();
  for (int p = 0; p < kernels::kReadPatterns; ++p) j[kernels::read_pattern_name(kernels::ReadPattern(p))] = bw.read_pattern_tbps[p];
  return j;
}

// The default configuration, then each knob changed alone (one at a time).
// With a filter, only the default and the configurations whose label
// contains it (e.g. "tc/": the tensor-core family). Deep loads only where
// they change the kernel (WarpDecodeConfig::tc_deep_loads_apply).
std::vector<WarpDecodeConfig> sweep_configs(const WarpDecodeConfig& d, const MoeShape& shape, WeightFormat format,
                                            const std::string& filter, bool tiled_gate_up) {
  const bool deep_applies = WarpDecodeConfig::tc_deep_loads_apply(shape, format);
  std::vector<WarpDecodeConfig> v{d};
  auto add = [&](WarpDecodeConfig c) {
    if (!filter.empty() && c.label().find(filter) == std::string::npos) return;
    for (const auto& o : v)
      if (o.label() == c.label()) return;
    v.push_back(c);
  };
  for (int t : {1, 4}) { auto c = d; c.gate_up_tokens_per_pass = t; add(c); }
  for (int n : {2, 4}) { auto c = d; c.gate_up_neurons_per_warp = n; add(c); }
  for (int n : {1, 4}) { auto c = d; c.down_rows_per_warp = n; add(c); }
  { auto c = d; c.mx8_int_decode = !d.mx8_int_decode; add(c); }
  { auto c = d; c.programmatic_launch = !d.programmatic_launch; add(c); }
  for (int n : {0, 1}) { auto c = d; c.gate_up_prefetch = n; add(c); }
  for (int n : {0, 2}) { auto c = d; c.down_prefetch = n; add(c); }
  { auto c = d; c.evict_first = !d.evict_first; add(c); }
  { auto c = d; c.down_stage_h = !d.down_stage_h; add(c); }
  if (d.gate_up_tokens_per_pass == 1)
    for (int n : {1, 2}) { auto c = d; c.gate_up_narrow = true; c.gate_up_neurons_per_warp = n; add(c); }
  { auto c = d; c.down_stage_h = !d.down_stage_h; c.down_rows_per_warp = 5 - d.down_rows_per_warp; add(c); }
  { auto c = d; c.evict_first = !d.evict_first; c.programmatic_launch = !d.programmatic_launch; add(c); }
  // The tensor-core family: deep loads, PDL and the L2 policy on and off.
  for (bool deep : {true, false})
    for (bool pdl : {true, false})
      for (bool ef : {true, false}) {
        if (deep && !deep_applies) continue;
        WarpDecodeConfig c;
        c.tensor_cores = true;
        c.tc_deep_loads = deep;
        c.evict_first = ef;
        c.programmatic_launch = pdl;
        c.tc_tiled_down = d.tc_tiled_down;
        c.tc_tiled_gate_up = d.tc_tiled_gate_up;
        c.tc_gate_up_two_tiles = d.tc_gate_up_two_tiles && !deep;  // no two-tile kernel with deep rounds
        add(c);
      }
  // The tensor cores on the tiled gate_up copy, shallow rounds: gate_up's
  // two-tile passes on and off (elsewhere "/2t" would label one-tile passes).
  if (d.tensor_cores && d.tc_tiled_gate_up && !d.tc_deep_loads) {
    auto c = d;
    c.tc_gate_up_two_tiles = !d.tc_gate_up_two_tiles;
    add(c);
  }
  // The tensor cores: down's paired general walk on and off, where the shape
  // takes it (elsewhere "/pairs" would label the one-warp walk).
  if (d.tensor_cores && format == WeightFormat::kMXFP8 && d.tc_tiled_down &&
      kernels::down_tc_pairs_fit(shape.hidden, shape.intermediate)) {
    auto c = d;
    c.tc_down_pairs = !d.tc_down_pairs;
    add(c);
  }
  // MXFP8: the default without the tiled down weights.
  if (d.tc_tiled_down) { auto c = d; c.tc_tiled_down = false; add(c); }
  // MXFP8 with --tiled-gate-up: gate_up on the tiled copy and on the canonical.
  if (tiled_gate_up && d.tensor_cores && format == WeightFormat::kMXFP8) {
    auto c = d;
    c.tc_tiled_gate_up = !d.tc_tiled_gate_up;
    add(c);
  }
  return v;
}

// The default, and the other kernel family's measured default for this batch
// (scalar or tensor cores) where the shape allows it: the two side by side.
std::vector<WarpDecodeConfig> family_configs(const MoeShape& shape, int batch, WeightFormat format,
                                             const WarpDecodeConfig& d, TableCard card) {
  std::vector<WarpDecodeConfig> v{d};
  const KernelFamily other = d.tensor_cores ? KernelFamily::kScalar : KernelFamily::kTensorCores;
  if (other == KernelFamily::kScalar || WarpDecodeConfig::tensor_cores_fit(shape))
    v.push_back(WarpDecodeConfig::for_batch(shape, batch, format, other, d.tc_tiled_gate_up, card));
  return v;
}

// Per path, the range of the records' SM clocks and the share of samples
// under the software power cap (records without samples say nothing).
void print_clock_summary(const nlohmann::json& records) {
  std::map<std::string, std::vector<double>> mhz, capped;
  for (const auto& r : records)
    if (r.contains("sm_clock_mhz")) {
      mhz[r["path"].get<std::string>()].push_back(r["sm_clock_mhz"].get<double>());
      capped[r["path"].get<std::string>()].push_back(r["power_capped_share"].get<double>());
    }
  for (const auto& [path, v] : mhz) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const auto& c = capped[path];
    const double share = std::accumulate(c.begin(), c.end(), 0.0) / double(c.size());
    std::printf("# SM clock, %s: %.0f-%.0f MHz over %zu records (median of each one's settle replays); "
                "software power cap in %.0f %% of samples\n",
                path.c_str(), *lo, *hi, v.size(), 100.0 * share);
  }
}

void run(const Opts& o) {
  // Formats and shapes first: a bad one is refused before anything needs a GPU.
  std::vector<WeightFormat> formats;
  for (const auto& f : o.formats) formats.push_back(parse_weight_format(f));
  std::vector<MoeShape> shapes;
  std::vector<std::string> names;  // the presets', with what was overridden
  for (const auto& p : o.presets) {
    shapes.push_back(o.overrides.apply(p));
    names.push_back(o.overrides.label(p));
  }

  WD_CHECK(o.calls >= 1 && o.replays >= 3, "need --calls >= 1 and --replays >= 3");
  WD_CHECK(o.bw_gib > 0 && o.bw_gib <= 1024, "--bw-gib = ", o.bw_gib, " must be in (0, 1024]");
  const std::vector<ClassicalConfig> candidates = ClassicalConfig::candidates();
  for (const auto& l : o.classical_configs)
    WD_CHECK(std::any_of(candidates.begin(), candidates.end(), [&](const ClassicalConfig& c) { return c.label() == l; }),
             "--classical-config '", l, "' is no classical configuration's label (--classical-sweep times them all)");
  // A tune's ladder ascends (crossover_from_ladder): the batches as a set.
  std::vector<int> tune_ladder = o.tune_batches.empty() ? bench::default_tune_ladder() : o.tune_batches;
  std::sort(tune_ladder.begin(), tune_ladder.end());
  tune_ladder.erase(std::unique(tune_ladder.begin(), tune_ladder.end()), tune_ladder.end());
  // The JSON is written after the measurements: an unwritable path is refused before them.
  if (!o.json.empty()) json_write::check_writable(o.json);
  if (o.tune || o.tune_untiled) json_write::check_writable(o.tune_json);

  const auto gpu = query_gpu();
  WD_CHECK(gpu.has_value(), "bench-moe needs a CUDA GPU, and none was found");
  // A buffer the L2 holds much of would make the L2 the read ceiling.
  WD_CHECK(o.bw_gib * double(1 << 30) >= 8.0 * double(gpu->l2_bytes), "--bw-gib = ", o.bw_gib,
           " is below 8x this card's L2 (", double(gpu->l2_bytes) / (1 << 20), " MiB): the ceiling would be the L2's");
  // The card whose measured defaults warp decode runs here (as WarpDecodeMoe's).
  const TableCard card = table_card(gpu->name);
  cudaStream_t stream;
  WD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto bw = kernels::measure_bandwidth(size_t(o.bw_gib * double(1 << 30)), 20, stream);
  std::printf("# %s | %d SMs | %.0f GiB | L2 %.0f MiB | %s | SM clock %d MHz, mem %d MHz (now)\n", gpu->name.c_str(),
              gpu->sms, double(gpu->memory_bytes) / (1 << 30), double(gpu->l2_bytes) / (1 << 20),
              cuda_versions(*gpu).c_str(), gpu->sm_clock_mhz, gpu->mem_clock_mhz);
  std::printf("# measured now: streaming read %.3f TB/s, streaming write %.3f TB/s, D2D copy %.3f TB/s (%.1f GiB buffer) | %s\n",
              bw.read_tbps, bw.write_tbps, bw.copy_tbps, o.bw_gib, build_description().c_str());
  std::printf("# read ceiling = the fastest of its patterns:");
  for (int p = 0; p < kernels::kReadPatterns; ++p)
    std::printf(" %s %.3f", kernels::read_pattern_name(kernels::ReadPattern(p)), bw.read_pattern_tbps[p]);
  std::printf(" TB/s\n");
  std::printf("# µs per MoE layer: CUDA-graph replay of at least %d calls (a multiple of the weight copies), median of "
              "%d replays; weights cycled, fresh routing each call\n", o.calls, o.replays);
  if (o.routing != "uniform") std::printf("# routing: %s (not uniform random top-K)\n", o.routing.c_str());
  if (const std::string n = unmeasured_card_note(gpu->name); !n.empty()) std::printf("# note: %s\n", n.c_str());
  int device = 0;
  WD_CUDA_CHECK(cudaGetDevice(&device));
  bench::ClockSampler clock(device);
  if (clock.available())
    std::printf("# SM clock and power: NVML, sampled during the last 150 ms of each layer's ~250 ms of settle replays (power limit %.0f W)\n",
                clock.power_limit_w());
  else
    std::printf("# SM clock and power: not sampled (%s)\n", clock.unavailable_reason().c_str());

  nlohmann::json doc;
  doc["header"] = {{"card", gpu->name},
                   {"sms", gpu->sms},
                   {"memory_gib", double(gpu->memory_bytes) / (1 << 30)},
                   {"l2_mib", double(gpu->l2_bytes) / (1 << 20)},
                   {"read_tbps", bw.read_tbps},
                   {"read_patterns_tbps", read_patterns_json(bw)},
                   {"write_tbps", bw.write_tbps},
                   {"copy_tbps", bw.copy_tbps},
                   {"bandwidth_buffer_gib", o.bw_gib},
                   {"cuda_runtime", gpu->cuda_runtime},
                   {"driver", gpu->driver},
                   {"cuda_driver", gpu->cuda_driver},
                   {"sm_clock_mhz", gpu->sm_clock_mhz},
                   {"mem_clock_mhz", gpu->mem_clock_mhz},
                   {"max_sm_clock_mhz", gpu->max_sm_clock_mhz},
                   {"commit", build_commit()},
                   {"build", build_description()},
                   {"command", command_line()},
                   {"max_batch", o.max_batch},
                   {"mxfp8_weights", o.tiled_only                       ? "tiled only (gate_up and down)"
                                     : o.tiled_gate_up || o.tiled_beside ? "canonical + tiled gate_up + tiled down"
                                                                         : "canonical + tiled down"},
                   {"bf16_weights", o.tiled_only     ? "tiled only (gate_up and down)"
                                    : o.tiled_beside ? "canonical + tiled gate_up + tiled down"
                                                     : "canonical"},
                   {"time_utc", std::time(nullptr)},
                   {"clock_sampling", clock.available() ? "nvml: median of each layer's settle replays"
                                                        : "none: " + clock.unavailable_reason()},
                   {"power_limit_w", clock.power_limit_w()},
                   {"method", "graph replay of N layer calls / N (N: at least `calls`, a multiple of the weight copies); median over replays; weight copies such that the calls between two uses of one copy read >= 8x L2 at B = 1 (where memory allows); fresh routing (see routing) and activations before every replay"},
                   {"routing", o.routing}};
  doc["records"] = nlohmann::json::array();
  // How every layer is timed, warp decode's and the classical path's alike.
  bench::Options opt;
  opt.calls = o.calls;
  opt.replays = o.replays;
  opt.seed = o.seed;
  opt.balanced_routing = o.routing == "balanced";
  opt.with_router = !o.no_router && !o.tune && !o.tune_untiled;  // the tunes compare the layers without their router
  opt.stages = o.stages && !o.tune && !o.tune_untiled;
  opt.clock = clock.available() ? &clock : nullptr;
  if (o.tune_untiled) {  // the same on tiled-only weights, the classical side un-tiling them
    bench::tune_untiled_crossover(o.presets, formats, tune_ladder,
                                  gpu->l2_bytes, opt, stream, doc["header"], o.tune_json, o.untile);
    WD_CUDA_CHECK(cudaStreamDestroy(stream));
    return;
  }
  if (o.tune) {  // crossover of warp decode and the classical path, for MoeDispatch
    bench::tune_crossover(o.presets, formats, tune_ladder,
                          gpu->l2_bytes, opt, stream, doc["header"], o.tune_json);
    WD_CUDA_CHECK(cudaStreamDestroy(stream));
    return;
  }

  std::printf("%-22s %-6s %4s %-14s %9s %9s %9s %10s %8s %10s %7s %6s\n", "preset", "format", "B",
              "config", "us_med", "us_min", "us_max", "us+router", "experts", "unique_MB",
              "TB/s", "%read");
  size_t free_b = 0, total_b = 0;
  for (size_t si = 0; si < shapes.size(); ++si)
    for (WeightFormat f : formats) {
      WD_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      DeviceWeightsOptions wopt;
      if (o.tiled_only) wopt = DeviceWeightsOptions::tiled_only();
      if (o.tiled_beside) wopt = DeviceWeightsOptions::tiled_beside_canonical();
      wopt.tiled_mxfp8_gate_up = wopt.tiled_mxfp8_gate_up || o.tiled_gate_up;
      bench::MoeBench mb(shapes[si], bench::held_format(f), gpu->l2_bytes, size_t(double(free_b) * 0.6), o.seed, stream,
                         wopt, f);
      // What the weights hold decides the default and which paths can read them:
      // tiled-only weights only the tensor-core kernels (and, BF16, the
      // classical path's TMA GEMM).
      const MoeWeightsView held = mb.weights(0).view();
      const bool tc_only = !held.has_canonical();
      const double b1_call = double(bench::batch_one_call_bytes(shapes[si], f));
      const int graph_calls = bench::calls_per_graph(o.calls, mb.copies());
      std::printf("# %s %s: %d weight copies of %.0f MiB (%.1fx L2); a B = 1 call reads %.1f MiB, the calls between "
                  "two uses of a copy %.1fx L2; %d calls a graph\n", names[si].c_str(), to_string(f), mb.copies(),
                  double(mb.layer_bytes()) / (1 << 20), double(mb.copies()) * double(mb.layer_bytes()) / double(gpu->l2_bytes),
                  b1_call / (1 << 20), double(mb.copies() - 1) * b1_call / double(gpu->l2_bytes), graph_calls);
      // Every record names the shape it ran, so a reader of the JSON needs no
      // copy of the presets (and --hidden/--intermediate overrides show).
      const nlohmann::json shape_j = {{"hidden", shapes[si].hidden},
                                      {"intermediate", shapes[si].intermediate},
                                      {"experts", shapes[si].experts},
                                      {"top_k", shapes[si].top_k}};
      auto push = [&](nlohmann::json r) {
        r["shape"] = shape_j;
        r["weight_copies"] = mb.copies();
        r["calls_per_graph"] = graph_calls;
        doc["records"].push_back(std::move(r));
      };
      for (int B : o.batches) {
        double warp_us = 0;  // default configuration, for the classical row's ratio
        const KernelFamily family = WarpDecodeConfig::default_family(shapes[si], f, std::max(B, o.max_batch));
        // The default on these weights (whether they hold the tiled gate_up copy).
        const WarpDecodeConfig dflt =
            WarpDecodeConfig::for_batch(shapes[si], B, f, family, held.gate_up_tiled != nullptr, card);
        auto configs = (o.no_warp || !warp_decode_streams(f)) ? std::vector<WarpDecodeConfig>{}
                       : o.sweep ? sweep_configs(dflt, shapes[si], f, o.sweep_filter, o.tiled_gate_up)
                       : o.families ? family_configs(shapes[si], B, f, dflt, card)
                                    : std::vector<WarpDecodeConfig>{dflt};
        if (tc_only) {
          WD_CHECK(dflt.tensor_cores, "bench-moe --tiled-only: the tensor-core kernels do not take ", names[si]);
          configs.erase(std::remove_if(configs.begin(), configs.end(),
                                       [](const WarpDecodeConfig& c) { return !c.tensor_cores; }),
                        configs.end());
        }
        for (const auto& cfg : configs) {
          bench::WarpPath path(cfg);
          const auto m = mb.run(B, path, opt);
          const bool is_default = config_label(cfg) == config_label(dflt);
          if (is_default) warp_us = m.experts.us_median;
          const double tbps = m.unique_bytes / (m.experts.us_median * 1e-6) / 1e12;
          const double pct = 100.0 * tbps / bw.read_tbps;
          std::printf("%-22s %-6s %4d %-14s %9.1f %9.1f %9.1f %10.1f %8.1f %10.1f %7.3f %6.1f\n",
                      names[si].c_str(), to_string(f), B, config_label(cfg).c_str(),
                      m.experts.us_median, m.experts.us_min, m.experts.us_max,
                      o.no_router ? 0.0 : m.with_router.us_median, m.distinct_experts,
                      m.unique_bytes / 1e6, tbps, pct);
          std::fflush(stdout);
          nlohmann::json rec = {{"preset", names[si]},
                                {"format", to_string(f)},
                                {"batch", B},
                                {"path", path.name()},
                                {"config", config_label(cfg)},
                                {"default_config", is_default},
                                {"family", cfg.tensor_cores ? "tensor-cores" : "scalar"},
                                {"us_median", m.experts.us_median},
                                {"us_min", m.experts.us_min},
                                {"us_max", m.experts.us_max},
                                {"distinct_experts", m.distinct_experts},
                                {"unique_bytes", m.unique_bytes},
                                {"tbps", tbps},
                                {"pct_read_bw", pct}};
          if (!o.no_router) rec["us_with_router"] = m.with_router.us_median;
          bench::add_clock_fields(rec, m.clock);
          for (const auto& st : m.stages) {
            const double st_tbps = st.bytes / (st.time.us_median * 1e-6) / 1e12;
            std::printf("%-22s %-6s %4d   stage %-18s %9.1f %9.1f %9.1f %10s %8s %10.1f %7.3f %6.1f\n", "", "", B,
                        st.name.c_str(), st.time.us_median, st.time.us_min, st.time.us_max, "", "",
                        st.bytes / 1e6, st_tbps, 100.0 * st_tbps / bw.read_tbps);
            rec["stages"].push_back({{"name", st.name}, {"us_median", st.time.us_median},
                                     {"bytes", st.bytes}, {"tbps", st_tbps}});
          }
          push(std::move(rec));
        }
        // Tiled-only weights: the classical path where it reads them as they
        // are (the TMA GEMM: BF16, MXFP8 in W8A16).
        if (!o.no_classical && (!tc_only || classical_reads_tiled_only(shapes[si], f, ClassicalMoe::wgmma_available()))) {
          push(bench::classical_row(mb, names[si], f, B, opt, warp_us, bw.read_tbps));
          const std::string default_label = ClassicalConfig::for_batch(shapes[si], B, f).label();
          if (!tc_only && (o.classical_sweep || !o.classical_configs.empty()))
            for (const auto& c : candidates) {
              const bool listed = std::find(o.classical_configs.begin(), o.classical_configs.end(), c.label()) !=
                                  o.classical_configs.end();
              if (c.label() == default_label || !c.supports(shapes[si], f) || (!o.classical_sweep && !listed))
                continue;
              push(bench::classical_row(mb, names[si], f, B, opt, warp_us, bw.read_tbps, nullptr, c));
            }
        }
      }
    }
  WD_CUDA_CHECK(cudaStreamDestroy(stream));
  print_clock_summary(doc["records"]);
  if (!o.json.empty()) {
    json_write::to_file(doc, o.json);
    std::printf("# wrote %s\n", o.json.c_str());
  }
}

}  // namespace

void add_bench_moe(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench-moe", "Time the MoE layer on this GPU against its measured read bandwidth");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--preset", o->presets, "Shape presets (repeat or comma-separate)")->delimiter(',')->capture_default_str();
  o->overrides.add_to(cmd);
  cmd->add_option("--format", o->formats, "Weight formats: bf16, mxfp8, fp8-block128 (classical path only)")->delimiter(',')->capture_default_str();
  add_batch_list(cmd, "--batch,-b", o->batches, "Batch sizes");
  cmd->add_option("--json", o->json, "Also write the figures as JSON to this file");
  cmd->add_option("--calls", o->calls, "Layer calls per timed graph (at least; rounded up to a multiple of the weight copies)")
      ->capture_default_str();
  cmd->add_option("--replays", o->replays, "Timed graph replays (median reported)")->capture_default_str();
  cmd->add_option("--bw-gib", o->bw_gib, "Buffer size of the bandwidth measurement, GiB")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of weights, routing and activations")->capture_default_str();
  cmd->add_option("--routing", o->routing,
                  "Routing of the timed calls: uniform (random top-K) or balanced (every expert the same share of a "
                  "call's entries: a diagnostic of what uneven expert loads cost)")
      ->check(CLI::IsMember({"uniform", "balanced"}))
      ->capture_default_str();
  cmd->add_flag("--sweep", o->sweep, "Time every kernel configuration, not only the default");
  cmd->add_option("--sweep-filter", o->sweep_filter,
                  "With --sweep: only the default and configurations whose label contains this (e.g. tc/)");
  cmd->add_option("--max-batch", o->max_batch,
                  "max_batch of the layer object whose default configuration is timed (it fixes the kernel "
                  "family, see WarpDecodeConfig::default_family)")->capture_default_str();
  cmd->add_flag("--families", o->families, "Time the default and the other kernel family (scalar / tensor cores)");
  cmd->add_flag("--no-router", o->no_router, "Skip the with-router timing");
  cmd->add_flag("--tiled-gate-up", o->tiled_gate_up,
                "MXFP8: keep the tiled gate_up copy too; --sweep then times gate_up on it and on the canonical");
  auto* only = cmd->add_flag("--tiled-only", o->tiled_only,
                             "BF16 and MXFP8 weights as their two tiled copies alone (the canonical memory; "
                             "DeviceWeightsOptions::tiled_only()): warp decode's tensor-core kernels, and the "
                             "classical row where it reads them as they are (BF16 on sm_90a)");
  cmd->add_flag("--tiled-beside-canonical", o->tiled_beside,
                "BF16 and MXFP8 weights with both tiled copies beside the canonical tensors (twice the memory; "
                "DeviceWeightsOptions::tiled_beside_canonical()): warp decode at the tiled-only speed, every "
                "path timed")
      ->excludes(only);
  cmd->add_flag("--stages", o->stages, "Also time each kernel (stage) of the path on its own");
  cmd->add_flag("--no-classical", o->no_classical, "Skip the classical expert-centric path");
  cmd->add_flag("--classical-sweep", o->classical_sweep, "Time every tile configuration of the classical path");
  cmd->add_option("--classical-config", o->classical_configs,
                  "Also time these classical configurations, by label (e.g. t8/pdl,t8/stream/pdl,t128/tma/silu/pdl)")
      ->delimiter(',');
  cmd->add_flag("--no-warp", o->no_warp, "Skip warp decode (e.g. prefill batches)");
  auto* tune = cmd->add_flag("--tune", o->tune, "Measure the warp/classical crossover per preset and format and write it (--tune-json)");
  auto* tune_untiled = cmd->add_flag("--tune-untiled", o->tune_untiled,
                "Like --tune, on tiled-only weights: warp decode against the classical path on them, reading them "
                "as they are where it can (BF16, MXFP8 in W8A16, on sm_90a), else un-tiling them first "
                "(MoeDispatch::untile_tiled_only's crossover)");
  tune->excludes(tune_untiled);
  cmd->add_flag("--untile", o->untile,
                "With --tune-untiled: the classical side un-tiles the weights even where it reads them as they are "
                "(the table's \"classical_reads\": \"untiled\" entries)")
      ->needs(tune_untiled);
  // A tune writes table entries for the presets' own shapes.
  for (const ShapeOverrides::Dim& d : o->overrides.dims()) d.option->excludes(tune)->excludes(tune_untiled);
  cmd->add_option("--tune-json", o->tune_json, "Crossover table written by --tune")->capture_default_str();
  add_batch_list(cmd, "--tune-batch", o->tune_batches, "Batch ladder of --tune (default 1 ... 1024)");
  cmd->callback([o] { run(*o); });
}

}  // namespace wd::cli
