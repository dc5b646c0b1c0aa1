// The dispatch's rules (warpdecode/dispatch_rules.h): the crossover table,
// the path of a call, its classical configuration.
#include "warpdecode/dispatch_rules.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

#include "core/json_read.h"
#include "core/read_file.h"
#include "warpdecode/error.h"

namespace wd {

const char* to_string(MoePath p) { return p == MoePath::kWarp ? "warp" : "classical"; }
const char* to_string(DispatchPolicy p) {
  return p == DispatchPolicy::kFastest ? "fastest" : "bf16-activations";
}
const char* to_string(TableCard c) { return c == TableCard::kH100 ? "H100" : "H200"; }

TableCard table_card(const std::string& device_name) {
  return device_name.find("H100") != std::string::npos ? TableCard::kH100 : TableCard::kH200;
}

namespace {

bool same_shape(const CrossoverEntry& e, const MoeShape& s) {
  return e.hidden == s.hidden && e.intermediate == s.intermediate && e.experts == s.experts && e.top_k == s.top_k;
}

// Measured by `warpdecode bench-moe --tune` on the H200 (bench/results/h200-crossover.json,
// `scripts/gpu_check.sh tune`, session 50 run 1), then `--tune-untiled`
// (bench/results/h200-crossover-untiled.json); regenerate with those commands and copy the entries here.
std::vector<CrossoverEntry> built_in_entries() {
  constexpr int kNever = CrossoverEntry::kNever;
  return {
      // preset, H, I, E, K, format, crossover (, W8A16 entry: the kBf16Activations
      // crossover, w8a16_from (, warp decode on the tiled copies))
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 64},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 96, false, kNever, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 80},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 128, false, kNever, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 48, true, 65},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 96, true, 65, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 8},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 96, false, kNever, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 128, false, kNever, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 80, true, 80},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 128, true, 80, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 8},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 96, false, kNever, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 48},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, false, kNever, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 96, true, 192},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, true, 192, true},
      // Tiled-only weights (bench/results/h200-crossover-untiled.json,
      // `scripts/gpu_check.sh untiled`), the classical side reading them as
      // they are: BF16 (session 51 run 4) and MXFP8 in W8A16 (session 54 run 2;
      // W8A8 has no tiled read, so both MXFP8 rows are W8A16's crossover):
      // (..., w8a16_from, tiled_warp, untiled, classical_reads_tiled).
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 112, false, kNever, true, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 80, false, kNever, true, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 80, true, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 128, false, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96, false, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96, true, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 128, false, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, false, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, true, kNever, true, true, true},
      // The same un-tiled first (MoeDispatch::untile_tiled_only: shapes and
      // devices whose classical path does not read them as they are; the
      // un-tiling's read and write of the layer are in the classical side's
      // time), session 50 run 5.
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 416, false, kNever, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 384, false, kNever, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 384, true, kNever, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 480, false, kNever, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 416, false, kNever, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 416, true, kNever, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 480, false, kNever, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 448, false, kNever, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 448, true, kNever, true, true},
  };
}

// Measured by the same commands on an H100 SXM (80GB HBM3, 3.16 TB/s read;
// bench/results/h100-crossover.json, `scripts/gpu_check.sh tune`, session 67
// on commit 8fca10d, whose kernels 3bbca4d keeps). built_in(kH100) sets
// these over the H200 entries.
// Warp decode holds on longer than on the H200 (e.g. qwen3-30b-a3b BF16 72
// against 64, MXFP8 on the tiled copies 192 against 128): the H200's table
// is session 50's kernels under its power cap, this one session 67's.
std::vector<CrossoverEntry> built_in_h100_entries() {
  constexpr int kNever = CrossoverEntry::kNever;
  return {
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 72},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 192, false, kNever, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 96},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 192, false, kNever, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 96, true, 96},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 128, true, 96, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 16},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 192, false, kNever, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 192, false, kNever, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96, true, 192},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 96, true, 192, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 8},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 96, false, kNever, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 96},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, false, kNever, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 96, true, 256},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 128, true, 256, true},
      // Tiled-only weights read as they are (bench/results/h100-crossover-untiled.json,
      // bench-moe --tune-untiled per preset and format, session 67 on 3bbca4d).
      // The un-tiled-first kind stays the H200's: sm_90a reads them as they are.
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kBF16, 160, false, kNever, true, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 128, false, kNever, true, true, true},
      {"qwen3-30b-a3b", 2048, 768, 128, 8, WeightFormat::kMXFP8, 128, true, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kBF16, 160, false, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 128, false, kNever, true, true, true},
      {"qwen3-235b-a22b", 4096, 1536, 128, 8, WeightFormat::kMXFP8, 128, true, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kBF16, 96, false, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 112, false, kNever, true, true, true},
      {"qwen3-coder-480b-a35b", 6144, 2560, 160, 8, WeightFormat::kMXFP8, 112, true, kNever, true, true, true},
  };
}

}  // namespace

int crossover_from_ladder(const std::vector<int>& ladder, const std::vector<double>& warp_us,
                          const std::vector<double>& classical_us, double margin) {
  WD_CHECK(!ladder.empty() && warp_us.size() == ladder.size() && classical_us.size() == ladder.size(),
           "crossover: a ladder of ", ladder.size(), " batches with ", warp_us.size(), " warp and ",
           classical_us.size(), " classical times");
  for (size_t i = 1; i < ladder.size(); ++i)
    WD_CHECK(ladder[i] > ladder[i - 1], "crossover: the ladder must ascend (", ladder[i - 1], ", ", ladder[i], ")");
  int crossover = CrossoverEntry::kNever;
  for (size_t i = ladder.size(); i-- > 0 && classical_us[i] < (1.0 - margin) * warp_us[i];) crossover = ladder[i];
  return crossover;
}

CrossoverTable CrossoverTable::built_in(TableCard card) {
  CrossoverTable t;
  for (const auto& e : built_in_entries()) t.entries_.push_back(e);
  if (card == TableCard::kH100)
    for (const auto& e : built_in_h100_entries()) t.set(e);
  t.source_ = std::string("built-in (") + to_string(card) + ")";
  return t;
}

CrossoverTable CrossoverTable::load(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const FormatError& e) {
    throw FormatError(std::string("crossover table: ") + e.what());
  }
  CrossoverTable t = parse(text, "crossover table '" + path + "'");
  t.source_ = path;
  return t;
}

namespace {
// Bounds of a table's fields: any real MoE shape and batch fits (what
// scaling a batch to an extreme shape gives is clamped: own_or_scaled).
constexpr int64_t kMaxTableDim = 1 << 20, kMaxTableExperts = 1 << 16, kMaxTableBatch = 1 << 24;

// A batch field: -1 (never) or 1 .. kMaxTableBatch.
int batch_field(const json_read::Json& v, const std::string& where, const std::string& key) {
  const int64_t x = json_read::integer(v, where, key, CrossoverEntry::kNever, kMaxTableBatch);
  if (x == 0) throw FormatError(where + ": '" + key + "' = 0 (allowed: >= 1, or -1 for never)");
  return int(x);
}

CrossoverEntry parse_entry(const json_read::Json& j, const std::string& where) {
  if (!j.is_object()) throw FormatError(where + ": an entry must be a JSON object, got " + json_read::shown(j));
  const json_read::Object r(j, where);
  CrossoverEntry e;
  e.preset = r.string_or("preset", "");
  e.hidden = int(r.integer("hidden", 1, kMaxTableDim));
  e.intermediate = int(r.integer("intermediate", 1, kMaxTableDim));
  e.experts = int(r.integer("experts", 1, kMaxTableExperts));
  e.top_k = int(r.integer("top_k", 1, e.experts));
  const std::string format = r.string("format");
  try {
    e.format = parse_weight_format(format);
  } catch (const InvalidArgument& ex) {
    r.refuse(ex.what());
  }
  e.crossover = batch_field(r.required("crossover"), where, "crossover");
  const std::string act = r.string_or("activations", "default");
  if (act != "default" && act != "bf16")
    throw FormatError(where + ": activations '" + act + "' (allowed: bf16, default)");
  e.bf16_activations = act == "bf16";
  const std::string ww = r.string_or("warp_weights", "default");
  if (ww != "default" && ww != "tiled" && ww != "tiled-only")
    throw FormatError(where + ": warp_weights '" + ww + "' (allowed: default, tiled, tiled-only)");
  e.tiled_warp = ww != "default";
  e.untiled = ww == "tiled-only";
  if (r.has("classical_reads")) {
    const std::string reads = r.string("classical_reads");
    if (reads != "tiled" && reads != "untiled")
      throw FormatError(where + ": classical_reads '" + reads + "' (allowed: tiled, untiled)");
    if (!e.untiled)
      throw FormatError(where + ": classical_reads '" + reads +
                        "' (allowed on \"warp_weights\": \"tiled-only\" entries)");
    e.classical_reads_tiled = reads == "tiled";
  }
  if (r.has("w8a16_from")) {
    e.w8a16_from = batch_field(r.at("w8a16_from"), where, "w8a16_from");
    if (e.w8a16_from != CrossoverEntry::kNever && !e.bf16_activations)
      throw FormatError(where + ": w8a16_from " + std::to_string(e.w8a16_from) +
                        " (allowed on \"activations\": \"bf16\" entries: >= 1, or -1 for never)");
  }
  return e;
}
}  // namespace

CrossoverTable CrossoverTable::parse(const std::string& json_text, const std::string& source) {
  const json_read::Json doc = json_read::parse(json_text, source);
  if (!doc.is_object() || !doc.contains("entries") || !doc.at("entries").is_array())
    throw FormatError(source + ": must be a JSON object with an \"entries\" array");
  CrossoverTable t;
  const json_read::Json& entries = doc.at("entries");
  for (size_t i = 0; i < entries.size(); ++i)
    t.set(parse_entry(entries[i], source + ", entry " + std::to_string(i)));
  t.source_ = source;
  return t;
}

CrossoverTable CrossoverTable::from_environment(TableCard card) {
  const char* path = std::getenv("WD_MOE_CROSSOVER");
  return path && *path ? load(path) : built_in(card);
}

void CrossoverTable::set(const CrossoverEntry& e) {
  for (auto& o : entries_)
    if (o.format == e.format && o.bf16_activations == e.bf16_activations && o.tiled_warp == e.tiled_warp &&
        o.untiled == e.untiled && o.classical_reads_tiled == e.classical_reads_tiled && o.hidden == e.hidden &&
        o.intermediate == e.intermediate && o.experts == e.experts && o.top_k == e.top_k) {
      o = e;
      return;
    }
  entries_.push_back(e);
}

namespace {
// A batch field of the entries of one kind (format, activations, warp
// weights, un-tiling): the shape's own, or, for other shapes, the field in
// tokens per expert (median over the kind's entries) converted back to a
// batch; kNever without any.
int own_or_scaled(const std::vector<CrossoverEntry>& entries, const MoeShape& s, int CrossoverEntry::*field,
                  const std::function<bool(const CrossoverEntry&)>& kind) {
  for (const auto& e : entries)
    if (kind(e) && same_shape(e, s)) return e.*field;
  std::vector<double> m;
  for (const auto& e : entries)
    if (kind(e) && e.*field != CrossoverEntry::kNever) m.push_back(double(e.*field) * e.top_k / e.experts);
  if (m.empty()) return CrossoverEntry::kNever;
  std::sort(m.begin(), m.end());
  const double tpe = m[m.size() / 2];
  // Past any batch an int holds (a shape of very many experts per routed
  // slot): never.
  const double batch = std::ceil(tpe * s.experts / s.top_k);
  if (!(batch < double(std::numeric_limits<int>::max()))) return CrossoverEntry::kNever;
  return std::max(1, int(batch));
}

// See CrossoverTable::crossover: untiled entries are their own kinds (read
// as they are, or un-tiled); tiled ones the shape's own only, then the
// default upload's.
int lookup(const std::vector<CrossoverEntry>& entries, const MoeShape& s, WeightFormat f, bool bf16_activations,
           bool tiled_warp, bool untiled, bool reads_tiled, int CrossoverEntry::*field) {
  auto of_kind = [&](bool tiled, bool untile, bool read_as_is = false) {
    return [=](const CrossoverEntry& e) {
      return e.tiled_warp == tiled && e.untiled == untile && e.format == f && e.bf16_activations == bf16_activations &&
             (!untile || e.classical_reads_tiled == read_as_is);
    };
  };
  if (untiled) {
    // A table without entries read as they are (one tuned before the
    // classical path read them): the un-tiled ones, a bound from above (the
    // un-tiling only adds to the classical side's time).
    const auto as_is = of_kind(true, true, true);
    const bool measured = std::any_of(entries.begin(), entries.end(), as_is);
    return own_or_scaled(entries, s, field, reads_tiled && measured ? as_is : of_kind(true, true, false));
  }
  if (tiled_warp)
    for (const auto& e : entries)
      if (of_kind(true, false)(e) && same_shape(e, s)) return e.*field;
  return own_or_scaled(entries, s, field, of_kind(false, false));
}
}  // namespace

int CrossoverTable::crossover(const MoeShape& s, WeightFormat f, bool bf16_activations, bool tiled_warp,
                              bool untiled, bool classical_reads_tiled) const {
  return lookup(entries_, s, f, bf16_activations, tiled_warp, untiled, classical_reads_tiled,
                &CrossoverEntry::crossover);
}

int CrossoverTable::w8a16_from(const MoeShape& s, WeightFormat f) const {
  return lookup(entries_, s, f, true, false, false, false, &CrossoverEntry::w8a16_from);
}

std::string CrossoverTable::to_json() const {
  nlohmann::json doc;
  doc["entries"] = nlohmann::json::array();
  for (const auto& e : entries_) {
    nlohmann::json j = {{"preset", e.preset},
                        {"hidden", e.hidden},
                        {"intermediate", e.intermediate},
                        {"experts", e.experts},
                        {"top_k", e.top_k},
                        {"format", to_string(e.format)},
                        {"crossover", e.crossover}};
    if (e.bf16_activations) j["activations"] = "bf16";
    if (e.tiled_warp) j["warp_weights"] = e.untiled ? "tiled-only" : "tiled";
    if (e.untiled) j["classical_reads"] = e.classical_reads_tiled ? "tiled" : "untiled";
    if (e.w8a16_from != CrossoverEntry::kNever) j["w8a16_from"] = e.w8a16_from;
    doc["entries"].push_back(j);
  }
  return doc.dump(2);
}

// ---- MoeDispatch ---------------------------------------------------------------------
const char* to_string(WeightCopies c) {
  switch (c) {
    case WeightCopies::kCanonical: return "default";
    case WeightCopies::kCanonicalAndTiled: return "tiled";
    case WeightCopies::kTiledOnly: return "tiled-only";
  }
  return "?";
}

WeightCopies weight_copies(const MoeWeightsView& w) {
  if (!w.has_canonical()) return WeightCopies::kTiledOnly;
  return warp_streams_tiled(w) ? WeightCopies::kCanonicalAndTiled : WeightCopies::kCanonical;
}

MoePath choose_path(const CrossoverTable& table, const MoeShape& shape, WeightFormat f, int batch,
                    int warp_max_batch, DispatchPolicy policy, bool w8a16, WeightCopies copies,
                    TiledOnlyClassical tiled_only) {
  WD_CHECK(batch >= 1, "MoE dispatch: batch = ", batch, " must be >= 1");
  if (!warp_decode_streams(f)) return MoePath::kClassical;
  if (copies == WeightCopies::kTiledOnly && tiled_only == TiledOnlyClassical::kNot) {
    // The classical path does not take them (not read as they are, no
    // un-tiling scratch); warp decode is correct at every batch it takes, so
    // no batch it takes is refused.
    WD_CHECK(batch <= warp_max_batch, "MoE dispatch: batch = ", batch, " is past warp decode's maximum ",
             warp_max_batch, ", and weights uploaded tiled-only (DeviceWeightsOptions::tiled_only()) have no "
             "canonical tensors for the classical path: upload them with tiled_beside_canonical() or the default "
             "options for larger batches, or let the dispatch un-tile them (MoeDispatch::untile_tiled_only)");
    return MoePath::kWarp;
  }
  const bool tiled_warp = copies != WeightCopies::kCanonical, untiled = copies == WeightCopies::kTiledOnly;
  const bool reads_tiled = untiled && tiled_only == TiledOnlyClassical::kReadsTiled;
  if (policy == DispatchPolicy::kBf16Activations && f == WeightFormat::kMXFP8) {
    if (w8a16) {
      const int c = table.crossover(shape, f, true, tiled_warp, untiled, reads_tiled);
      if (batch > warp_max_batch || (c != CrossoverEntry::kNever && batch >= c)) return MoePath::kClassical;
    }
    WD_CHECK(batch <= warp_max_batch, "MoE dispatch: batch = ", batch, " is past warp decode's maximum ",
             warp_max_batch, ", and the bf16-activations policy does not send MXFP8 weights to the W8A8 path");
    return MoePath::kWarp;
  }
  if (batch > warp_max_batch) return MoePath::kClassical;
  const int c = table.crossover(shape, f, false, tiled_warp, untiled, reads_tiled);
  return c != CrossoverEntry::kNever && batch >= c ? MoePath::kClassical : MoePath::kWarp;
}

bool classical_reads_tiled_only(const MoeShape& s, WeightFormat f, bool sm90a) {
  return sm90a && ClassicalConfig::for_tiled_copies(s, 1, sm90a, f).reads_tiled(s, f);
}

ClassicalConfig dispatch_classical_config(const CrossoverTable& table, const MoeShape& s, WeightFormat f, int batch,
                                          DispatchPolicy policy, bool sm90a, WeightCopies copies) {
  batch = std::max(1, batch);
  if (copies == WeightCopies::kTiledOnly && classical_reads_tiled_only(s, f, sm90a))
    return ClassicalConfig::for_tiled_copies(s, batch, sm90a, f);
  bool a16 = policy == DispatchPolicy::kBf16Activations;
  if (!a16 && f == WeightFormat::kMXFP8) {
    const int from = table.w8a16_from(s, f);
    a16 = from != CrossoverEntry::kNever && batch >= from;
  }
  return ClassicalConfig::for_batch(s, batch, f, sm90a, a16);
}

bool w8a16_runs(const MoeShape& shape, WeightFormat f, int batch, bool sm90a) {
  return batch >= 1 && ClassicalConfig::for_batch(shape, batch, f, sm90a, true).bf16_activations;
}

}  // namespace wd
