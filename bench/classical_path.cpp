#include "classical_path.h"

#include <algorithm>
#include <cstdio>

#include "core/cuda_check.h"
#include "core/json_write.h"
#include "kernels/classical_fits.h"
#include "warpdecode/error.h"
#include "warpdecode/tune_ladder.h"

namespace wd::bench {

WeightFormat held_format(WeightFormat run_format) {
  return run_format == WeightFormat::kFP8Block128 ? WeightFormat::kBF16 : run_format;
}

namespace {
constexpr ClassicalStage kExpertStages[] = {ClassicalStage::kAlign,   ClassicalStage::kPermute,
                                            ClassicalStage::kGateUp,  ClassicalStage::kSiluMul,
                                            ClassicalStage::kDown,    ClassicalStage::kCombine};

// Weight bytes per element (scales included).
double weight_elem_bytes(const MoeShape& s, WeightFormat f) { return double(expert_bytes(s, f)) / s.expert_elems(); }
}  // namespace

// Napkin math per stage, B·K rows (padding not counted), for the stages as
// configuration c runs them:
//   align     ids read, sorted rows + entry rows written          ~ 3·B·K·4
//   permute   x read once, B·K rows written (+ scales)            B·H·2 + B·K·H·a
//             (0 where the gate_up GEMM gathers its rows from x)
//   gate_up   distinct experts' gate_up weights + rows in + out   D·2I·H·w + B·K·(H·a + 2I·2)
//             (out B·K·I·a where SiLU·up is fused into its epilogue)
//   silu_mul  rows in, rows out (+ scales)                        B·K·(2I·2 + I·a)  (0 where fused)
//   down      distinct experts' down weights + rows in + out      D·H·I·w + B·K·(I·a + H·2)
//   combine   B·K partial rows read, y written                    B·K·H·2 + B·H·2
// with a = activation bytes (2 for BF16 activations: BF16 weights or
// W8A16; 1 + 4/128 for W8A8) and w = weight bytes.
double classical_stage_bytes(ClassicalStage st, const MoeShape& s, WeightFormat f, const ClassicalConfig& c,
                             double distinct, int batch) {
  const double H = s.hidden, I = s.intermediate, BK = double(batch) * s.top_k, B = batch;
  const double a = f == WeightFormat::kBF16 || c.bf16_activations ? 2.0 : 1.0 + 4.0 / 128.0;
  const double w = weight_elem_bytes(s, f);
  switch (st) {
    case ClassicalStage::kRouterGemm: return double(s.experts) * H * 2 + B * H * 2 + B * s.experts * 4;
    case ClassicalStage::kTopK: return B * s.experts * 4 + BK * 8;
    case ClassicalStage::kAlign: return 3 * BK * 4;
    case ClassicalStage::kPermute: return c.gathers_rows(f) ? 0.0 : B * H * 2 + BK * H * a;
    case ClassicalStage::kGateUp: return distinct * 2 * I * H * w + BK * (H * a + (c.fuse_silu ? I * a : 2 * I * 2));
    case ClassicalStage::kSiluMul: return c.fuse_silu ? 0.0 : BK * (2 * I * 2 + I * a);
    case ClassicalStage::kDown: return distinct * H * I * w + BK * (I * a + H * 2);
    case ClassicalStage::kCombine: return BK * H * 2 + B * H * 2;
  }
  return 0;
}

// ---- ClassicalPath ------------------------------------------------------------------------
ClassicalPath::ClassicalPath(const MoeBench& bench, WeightFormat run_format, std::optional<ClassicalConfig> config,
                             bool untile)
    : bench_(bench), format_(run_format), fixed_(config), untile_(untile) {}

ClassicalPath::~ClassicalPath() = default;

std::string ClassicalPath::config() const { return std::string(untile_ ? "cl/untile/" : "cl/") + config_.label(); }

void ClassicalPath::prepare(const MoeShape& shape, int batch) {
  moe_ = std::make_unique<ClassicalMoe>(shape, batch);
  if (untile_ && !untiled_) untiled_ = std::make_unique<UntiledWeights>(shape, format_);
  // Tiled-only BF16 weights (bench-moe --tiled-only): the configuration that
  // reads them as they are.
  const bool tiled_only = !untile_ && !bench_.weights(0).view().has_canonical();
  config_ = fixed_        ? *fixed_
            : tiled_only ? ClassicalConfig::for_tiled_copies(shape, batch, ClassicalMoe::wgmma_available(), format_)
                         : ClassicalConfig::for_batch(shape, batch, format_);
  if (format_ != held_format(format_) && converted_.empty()) {
    for (int i = 0; i < bench_.copies(); ++i)
      converted_.push_back(DeviceFp8BlockWeights::quantize(bench_.weights(i).view(), nullptr));
    WD_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

MoeWeightsView ClassicalPath::mine(const MoeWeightsView& held) const {
  if (converted_.empty()) return held;
  for (int i = 0; i < bench_.copies(); ++i)
    if (bench_.weights(i).view().gate_up == held.gate_up) return converted_[size_t(i)].view();
  throw InvalidArgument("classical bench path: weights that are not the harness's copies");
}

void ClassicalPath::route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
                          cudaStream_t stream) {
  moe_->route(mine(w), x, batch, ids, weights, stream);
}

void ClassicalPath::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing, uint16_t* y,
                            cudaStream_t stream) {
  moe_->experts(untiled_ ? untiled_->untile(w, stream) : mine(w), x, routing, MoeOutput{y, OutputType::kBF16, nullptr},
                config_, stream);
}

std::vector<std::string> ClassicalPath::stages() const {
  std::vector<std::string> v;
  for (ClassicalStage s : kExpertStages) v.push_back(to_string(s));
  return v;
}

void ClassicalPath::run_stage(int stage, const MoeWeightsView& w, const uint16_t* x, const RoutingView& routing,
                              uint16_t* y, cudaStream_t stream) {
  moe_->run_stage(kExpertStages[stage], mine(w), x, routing, MoeOutput{y, OutputType::kBF16, nullptr}, config_,
                  stream);
}

double ClassicalPath::stage_bytes(int stage, const MoeShape& s, WeightFormat, double distinct, int batch) const {
  return classical_stage_bytes(kExpertStages[stage], s, format_, config_, distinct, batch);
}

// ---- table rows ------------------------------------------------------------------------------
nlohmann::json classical_row(MoeBench& mb, const std::string& preset, WeightFormat f, int B, const Options& opt,
                             double warp_us, double read_tbps, double* us_out, std::optional<ClassicalConfig> config) {
  const MoeShape& shape = mb.shape();
  ClassicalPath path(mb, f, config);
  const Measurement m = mb.run(B, path, opt);
  const double ub = unique_bytes(shape, f, m.distinct_experts, B);
  const double tbps = ub / (m.experts.us_median * 1e-6) / 1e12;
  const double pct = 100.0 * tbps / read_tbps;
  const double ratio = warp_us > 0 ? m.experts.us_median / warp_us : 0.0;
  std::printf("%-22s %-6s %4d %-14s %9.1f %9.1f %9.1f %10.1f %8.1f %10.1f %7.3f %6.1f", preset.c_str(), to_string(f),
              B, path.config().c_str(), m.experts.us_median, m.experts.us_min, m.experts.us_max,
              opt.with_router ? m.with_router.us_median : 0.0, m.distinct_experts, ub / 1e6, tbps, pct);
  if (ratio > 0) std::printf("  warp %.2fx", ratio);
  std::printf("\n");
  nlohmann::json rec = {{"preset", preset},
                        {"format", to_string(f)},
                        {"batch", B},
                        {"path", path.name()},
                        {"config", path.config()},
                        {"default_config", !config || config->label() == ClassicalConfig::for_batch(shape, B, f).label()},
                        {"us_median", m.experts.us_median},
                        {"us_min", m.experts.us_min},
                        {"us_max", m.experts.us_max},
                        {"distinct_experts", m.distinct_experts},
                        {"unique_bytes", ub},
                        {"tbps", tbps},
                        {"pct_read_bw", pct}};
  if (opt.with_router) rec["us_with_router"] = m.with_router.us_median;
  add_clock_fields(rec, m.clock);
  if (ratio > 0) rec["warp_speedup"] = ratio;  // classical µs / warp decode µs
  for (const auto& st : m.stages) {
    // A stage with nothing to move (SiLU·up fused, rows gathered) reads 0.
    const double st_tbps = st.bytes > 0 ? st.bytes / (st.time.us_median * 1e-6) / 1e12 : 0.0;
    std::printf("%-22s %-6s %4d   stage %-18s %9.1f %9.1f %9.1f %10s %8s %10.1f %7.3f %6.1f\n", "", "", B,
                st.name.c_str(), st.time.us_median, st.time.us_min, st.time.us_max, "", "", st.bytes / 1e6, st_tbps,
                100.0 * st_tbps / read_tbps);
    rec["stages"].push_back({{"name", st.name}, {"us_median", st.time.us_median}, {"bytes", st.bytes}, {"tbps", st_tbps}});
  }
  std::fflush(stdout);
  if (us_out) *us_out = m.experts.us_median;
  return rec;
}

// ---- crossover tuning ------------------------------------------------------------------------
namespace {
// A measured ladder's entries (crossover_entries): printed, set in the table,
// and each crossover (and W8A16's start) written into the ladder's record.
void record_entries(const TuneLadder& l, nlohmann::json& lad, CrossoverTable& table) {
  for (const CrossoverEntry& e : crossover_entries(l)) {
    if (e.bf16_activations && !e.untiled && !lad.contains("w8a16_from")) {
      std::printf("# W8A16 faster than the default classical configuration %s %s: %s\n", l.preset.c_str(),
                  to_string(l.format),
                  e.w8a16_from == CrossoverEntry::kNever ? "never" : ("B >= " + std::to_string(e.w8a16_from)).c_str());
      lad["w8a16_from"] = e.w8a16_from;
    }
    std::printf("# crossover %s\n", crossover_line(e).c_str());
    lad[ladder_field(e)] = e.crossover;
    table.set(e);
  }
}

// A tune's table (CrossoverTable JSON) with its header and measured ladders.
void write_tune_json(const CrossoverTable& table, const nlohmann::json& header, const nlohmann::json& ladders,
                     const std::string& json_path) {
  nlohmann::json doc = nlohmann::json::parse(table.to_json());
  doc["header"] = header;
  doc["ladders"] = ladders;
  json_write::to_file(doc, json_path);
  std::printf("# wrote %s (load it with WD_MOE_CROSSOVER=%s, or copy its entries into the built-in table)\n",
              json_path.c_str(), json_path.c_str());
}
}  // namespace

void tune_untiled_crossover(const std::vector<std::string>& presets, const std::vector<WeightFormat>& formats,
                            const std::vector<int>& ladder, size_t l2_bytes, const Options& opt, cudaStream_t stream,
                            const nlohmann::json& header, const std::string& json_path, bool always_untile) {
  WD_CHECK(!ladder.empty(), "--tune-untiled needs at least one batch size");
  // The classical configurations are the ones the dispatch would give (its
  // table's w8a16_from decides W8A8 or W8A16 under kFastest).
  const CrossoverTable dispatch_table = MoeDispatch::device_table();
  const bool sm90a = ClassicalMoe::wgmma_available();
  const TableCard card = kernels::device_table_card();  // warp decode's measured defaults here
  CrossoverTable table;
  nlohmann::json ladders = nlohmann::json::array();
  std::printf("# tune-untiled: µs per MoE layer (router excluded) on tiled-only weights: warp decode against the "
              "classical path on them: reading the tiled copies where it can (BF16, and MXFP8 in W8A16, on sm_90a, \"cl/\"), else on the "
              "layer un-tiled first (\"cl/untile/\": its time includes the un-tiling)\n");
  std::printf("%-22s %-12s %5s %10s %10s %8s  %s\n", "preset", "format", "B", "warp_us", "cl_us", "cl/warp",
              "classical config");
  for (const auto& preset : presets)
    for (WeightFormat f : formats) {
      if (!warp_decode_streams(f)) continue;  // no tiled copies
      const MoeShape shape = preset_shape(preset);
      size_t free_b = 0, total_b = 0;
      WD_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      MoeBench mb(shape, f, l2_bytes, size_t(double(free_b) * 0.4), opt.seed, stream,
                  DeviceWeightsOptions::tiled_only());
      const bool w8a16 = w8a16_runs(shape, f, 1, sm90a);
      // Whether the classical path reads these weights as they are (no
      // un-tiling then: MoeDispatch does not).
      const bool direct = !always_untile && classical_reads_tiled_only(shape, f, sm90a);
      // The un-tiling alone, once a (preset, format): CUDA events around each
      // call, cycling the copies, median of 21 after 3 warm-up calls.
      double untile_us = 0;
      if (!direct) {
        const UntiledWeights scratch(shape, f);
        Events ev;
        std::vector<double> us;
        for (int i = -3; i < 21; ++i) {
          const double t = ev.time_us(stream, [&] { scratch.untile(mb.weights(i + 3).view(), stream); });
          if (i >= 0) us.push_back(t);
        }
        untile_us = summarize(us).us_median;
        std::printf("# untile %s %s: %.1f µs for %.1f MB read and written (%.2f TB/s each way)\n", preset.c_str(),
                    to_string(f), untile_us, scratch.bytes() / 1e6, scratch.bytes() / untile_us / 1e6);
      }
      std::vector<double> warp_times, fast_times, a16_times;
      nlohmann::json points = nlohmann::json::array();
      for (int B : ladder) {
        WarpPath wp(WarpDecodeConfig::for_batch(shape, B, f, KernelFamily::kAuto, true, card));
        const double warp_us = mb.run(B, wp, opt).experts.us_median;
        // Un-tiled: the configuration of the canonical tensors the scratch holds.
        const ClassicalConfig fast = dispatch_classical_config(dispatch_table, shape, f, B, DispatchPolicy::kFastest,
                                                               sm90a, direct ? WeightCopies::kTiledOnly
                                                                             : WeightCopies::kCanonical);
        ClassicalPath cp(mb, f, fast, !direct);
        const double fast_us = mb.run(B, cp, opt).experts.us_median;
        warp_times.push_back(warp_us);
        fast_times.push_back(fast_us);
        std::printf("%-22s %-12s %5d %10.1f %10.1f %8.2f  %s\n", preset.c_str(), to_string(f), B, warp_us, fast_us,
                    fast_us / warp_us, cp.config().c_str());
        nlohmann::json point = {{"batch", B}, {"warp_us", warp_us}, {"classical_us", fast_us}, {"config", cp.config()}};
        if (w8a16) {  // kBf16Activations' classical side: W8A16 (the same run where kFastest's is W8A16 already)
          double a_us = fast_us;
          if (!fast.bf16_activations) {
            ClassicalPath ap(mb, f, ClassicalConfig::for_batch(shape, B, f, sm90a, true), true);
            a_us = mb.run(B, ap, opt).experts.us_median;
            std::printf("%-22s %-12s %5d %10.1f %10.1f %8.2f  %s\n", preset.c_str(), to_string(f), B, warp_us, a_us,
                        a_us / warp_us, ap.config().c_str());
          }
          a16_times.push_back(a_us);
          point["w8a16_us"] = a_us;
        }
        std::fflush(stdout);
        points.push_back(point);
      }
      nlohmann::json lad = {{"preset", preset}, {"format", to_string(f)}, {"warp_weights", "tiled-only"},
                            {"classical_reads", direct ? "tiled copies" : "un-tiled scratch"},
                            {"untile_us", direct ? nlohmann::json() : nlohmann::json(untile_us)},
                            {"points", points}};
      TuneLadder l{preset, f, true, direct, ladder, warp_times, {}, fast_times, a16_times};
      record_entries(l, lad, table);
      ladders.push_back(lad);
    }
  write_tune_json(table, header, ladders, json_path);
}

// 65-80: warp decode's down kernel walked the tokens in groups of 64 until
// session 49 (128 since, where shared memory allows), so its time stepped up
// at 65, where on the tiled copies the crossover fell (session 46); the rungs
// stay to show the step on shapes that keep groups of 64.
std::vector<int> default_tune_ladder() {
  return {1, 2, 4, 8, 16, 32, 48, 64, 65, 72, 80, 96, 128, 192, 256, 384, 512, 768, 1024};
}

void tune_crossover(const std::vector<std::string>& presets, const std::vector<WeightFormat>& formats,
                    const std::vector<int>& ladder, size_t l2_bytes, const Options& opt, cudaStream_t stream,
                    const nlohmann::json& header, const std::string& json_path) {
  WD_CHECK(!ladder.empty(), "--tune needs at least one batch size");
  const TableCard card = kernels::device_table_card();  // warp decode's measured defaults here
  CrossoverTable table;
  nlohmann::json ladders = nlohmann::json::array();
  std::printf("# tune: µs per MoE layer (router excluded) of warp decode and the classical path; crossover = the "
              "smallest B from which the classical path stays faster by at least %.0f %%\n",
              100.0 * kCrossoverMargin);
  std::printf("%-22s %-12s %5s %10s %10s %8s %s\n", "preset", "format", "B", "warp_us", "classical_us", "cl/warp",
              opt.clock ? "  SM MHz warp / classical" : "");
  for (const auto& preset : presets)
    for (WeightFormat f : formats) {
      const MoeShape shape = preset_shape(preset);
      size_t free_b = 0, total_b = 0;
      WD_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      // The tiled copies beside the canonical tensors: warp decode is timed on
      // both uploads from the same weights (its default configuration on the
      // default upload reads what that upload holds; the tiled one streams
      // the copies), the classical path reads the canonical tensors either way.
      MoeBench mb(shape, held_format(f), l2_bytes, size_t(double(free_b) * 0.5), opt.seed, stream,
                  warp_decode_streams(f) ? DeviceWeightsOptions::tiled_beside_canonical() : DeviceWeightsOptions{}, f);
      const bool tiled = warp_decode_streams(f) && warp_streams_tiled(mb.weights(0).view());
      // MXFP8 on sm_90a: the classical path also in W8A16, against the same
      // warp-decode times (DispatchPolicy::kBf16Activations' crossover).
      const bool w8a16 = ClassicalConfig::for_batch(shape, 1, f, ClassicalMoe::wgmma_available(), true).bf16_activations;
      nlohmann::json points = nlohmann::json::array();
      std::vector<double> warp_times, tiled_times, classical_times, w8a16_times;
      for (int B : ladder) {
        Measurement wm, tm;
        if (warp_decode_streams(f)) {
          WarpPath wp(WarpDecodeConfig::for_batch(shape, B, f, KernelFamily::kAuto, false, card));
          wm = mb.run(B, wp, opt);
        }
        if (tiled) {
          WarpPath tp(WarpDecodeConfig::for_batch(shape, B, f, KernelFamily::kAuto, true, card));
          tm = mb.run(B, tp, opt);
          tiled_times.push_back(tm.experts.us_median);
        }
        const double warp_us = wm.experts.us_median;
        ClassicalPath cp(mb, f, std::nullopt);
        const Measurement cm = mb.run(B, cp, opt);
        const double cl_us = cm.experts.us_median;
        warp_times.push_back(warp_us);
        classical_times.push_back(cl_us);
        std::printf("%-22s %-12s %5d %10.1f %10.1f %8.2f", preset.c_str(), to_string(f), B, warp_us, cl_us,
                    warp_us > 0 ? cl_us / warp_us : 0.0);
        if (wm.clock.samples > 0 || cm.clock.samples > 0)
          std::printf("  %5.0f / %5.0f", wm.clock.sm_mhz_median, cm.clock.sm_mhz_median);
        std::printf("\n");
        if (tiled)
          std::printf("%-22s %-12s %5d %10.1f %10.1f %8.2f  (warp decode on the tiled copies)\n", preset.c_str(),
                      to_string(f), B, tm.experts.us_median, cl_us, cl_us / tm.experts.us_median);
        nlohmann::json point = {{"batch", B}, {"warp_us", warp_us}, {"classical_us", cl_us}, {"config", cp.config()}};
        if (tiled) point["warp_tiled_us"] = tm.experts.us_median;
        // The SM clock each path ran at (bench-moe with NVML): a point where
        // warp decode ran slower than the card's usual clock shows it.
        if (wm.clock.samples > 0) point["warp_sm_clock_mhz"] = wm.clock.sm_mhz_median;
        if (tm.clock.samples > 0) point["warp_tiled_sm_clock_mhz"] = tm.clock.sm_mhz_median;
        if (cm.clock.samples > 0) point["classical_sm_clock_mhz"] = cm.clock.sm_mhz_median;
        if (w8a16) {
          ClassicalPath ap(mb, f, ClassicalConfig::for_batch(shape, B, f, true, true));
          const Measurement am = mb.run(B, ap, opt);
          const double a_us = am.experts.us_median;
          if (am.clock.samples > 0) point["w8a16_sm_clock_mhz"] = am.clock.sm_mhz_median;
          w8a16_times.push_back(a_us);
          std::printf("%-22s %-12s %5d %10.1f %10.1f %8.2f  (W8A16 %s)\n", preset.c_str(), to_string(f), B, warp_us,
                      a_us, warp_us > 0 ? a_us / warp_us : 0.0, ap.config().c_str());
          point["w8a16_us"] = a_us;
          point["w8a16_config"] = ap.config();
        }
        std::fflush(stdout);
        points.push_back(point);
      }
      nlohmann::json lad = {{"preset", preset}, {"format", to_string(f)}, {"points", points}};
      TuneLadder l{preset, f, false, false, ladder, warp_decode_streams(f) ? warp_times : std::vector<double>{},
                   tiled_times, classical_times, w8a16_times};
      record_entries(l, lad, table);
      ladders.push_back(lad);
    }
  write_tune_json(table, header, ladders, json_path);
}

}  // namespace wd::bench
