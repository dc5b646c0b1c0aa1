// The dispatch's rules (warpdecode/dispatch_rules.h): the crossover table,
// the path of a call, its classical configuration.
#include "warpdecode/dispatch_rules.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>

#include "core/json_read.h"
#include "core/read_file.h"
#include "moe/classical_rules.h"
#include "warpdecode/error.h"

namespace wd {

const char* to_string(MoePath p) { return p == MoePath::kWarp ? "warp" : "classical"; }
const char* to_string(DispatchPolicy p) {
  return p == DispatchPolicy::kFastest ? "fastest" : "bf16-activations";
}

namespace {

bool same_shape(const CrossoverEntry& e, const MoeShape& s) {
  return e.hidden == s.hidden && e.intermediate == s.intermediate && e.experts == s.experts && e.top_k == s.top_k;
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
// batch; kNever without any. Tokens per expert are kept as the exact ratio
// field·K / E and the batch rounded up in integers (128-bit: field < 2^25,
// K and E <= 2^20), so that a shape with another H or I but the same E and
// K gets the measured batch itself, not one more where field·K / E is not a
// binary fraction.
int own_or_scaled(const std::vector<CrossoverEntry>& entries, const MoeShape& s, int CrossoverEntry::*field,
                  const std::function<bool(const CrossoverEntry&)>& kind) {
  for (const auto& e : entries)
    if (kind(e) && same_shape(e, s)) return e.*field;
  using Wide = __int128;
  struct Ratio {
    Wide num, den;  // tokens per expert = num / den, both > 0
  };
  std::vector<Ratio> m;
  for (const auto& e : entries)
    if (kind(e) && e.*field != CrossoverEntry::kNever) m.push_back({Wide(e.*field) * e.top_k, Wide(e.experts)});
  if (m.empty()) return CrossoverEntry::kNever;
  std::sort(m.begin(), m.end(), [](const Ratio& a, const Ratio& b) { return a.num * b.den < b.num * a.den; });
  const Ratio tpe = m[m.size() / 2];
  const Wide num = tpe.num * s.experts, den = tpe.den * s.top_k;
  const Wide batch = (num + den - 1) / den;
  // Past any batch an int holds (a shape of very many experts per routed
  // slot): never.
  if (batch >= Wide(std::numeric_limits<int>::max())) return CrossoverEntry::kNever;
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
  if (!classical_takes_shape(shape, f)) {
    // MXFP8 on H or I not a multiple of 128: warp decode alone (it takes
    // multiples of 32).
    WD_CHECK(batch <= warp_max_batch, "MoE dispatch: batch = ", batch, " is past warp decode's maximum ",
             warp_max_batch, ", and the classical path takes ", to_string(f), " weights only where H and I are ",
             "multiples of 128 (H = ", shape.hidden, ", I = ", shape.intermediate, ")");
    return MoePath::kWarp;
  }
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

bool classical_takes_shape(const MoeShape& shape, WeightFormat f) {
  return f == WeightFormat::kBF16 || classical_rules::w8a8_shape_ok(shape);
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
