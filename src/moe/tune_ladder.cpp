// A tune's ladders and the entries they give (warpdecode/tune_ladder.h).
#include "warpdecode/tune_ladder.h"

#include <algorithm>

#include "core/json_read.h"
#include "moe/tune_ladder_json.h"
#include "warpdecode/error.h"

namespace wd {

std::string TuneLadder::kind() const {
  std::string k = preset + " " + to_string(format);
  if (tiled_only) k += classical_reads_tiled ? " (tiled-only, read as they are)" : " (tiled-only, un-tiled first)";
  return k;
}

namespace {

void check_length(const TuneLadder& l, const std::vector<double>& v, const char* what) {
  WD_CHECK(v.empty() || v.size() == l.batches.size(), "tune ladder ", l.kind(), ": ", v.size(), " ", what,
           " times for ", l.batches.size(), " batches");
}

}  // namespace

std::vector<CrossoverEntry> crossover_entries(const TuneLadder& l) {
  check_length(l, l.warp_us, "warp");
  check_length(l, l.warp_tiled_us, "warp (tiled copies)");
  check_length(l, l.classical_us, "classical");
  check_length(l, l.w8a16_us, "W8A16");
  WD_CHECK(l.classical_us.size() == l.batches.size(), "tune ladder ", l.kind(), ": no classical times");
  const MoeShape s = preset_shape(l.preset);
  const bool streams = warp_decode_streams(l.format);
  WD_CHECK(!streams || l.warp_us.size() == l.batches.size(), "tune ladder ", l.kind(), ": no warp decode times");
  std::vector<CrossoverEntry> out;
  auto add = [&](const std::vector<double>& warp, const std::vector<double>& classical, bool a16, int w8a16_from,
                 bool tiled_warp) {
    CrossoverEntry e{l.preset, s.hidden, s.intermediate, s.experts, s.top_k, l.format,
                     streams ? crossover_from_ladder(l.batches, warp, classical) : 1, a16, w8a16_from, tiled_warp};
    e.untiled = l.tiled_only;
    e.classical_reads_tiled = l.tiled_only && l.classical_reads_tiled;
    out.push_back(e);
  };
  if (l.tiled_only) {
    add(l.warp_us, l.classical_us, false, CrossoverEntry::kNever, true);
    if (!l.w8a16_us.empty()) add(l.warp_us, l.w8a16_us, true, CrossoverEntry::kNever, true);
    return out;
  }
  const bool tiled = !l.warp_tiled_us.empty();
  add(l.warp_us, l.classical_us, false, CrossoverEntry::kNever, false);
  if (tiled) add(l.warp_tiled_us, l.classical_us, false, CrossoverEntry::kNever, true);
  if (!l.w8a16_us.empty()) {
    // Where W8A16 beats the default classical configuration, by the same rule.
    const int from = crossover_from_ladder(l.batches, l.classical_us, l.w8a16_us);
    add(l.warp_us, l.w8a16_us, true, from, false);
    if (tiled) add(l.warp_tiled_us, l.w8a16_us, true, from, true);
  }
  return out;
}

const char* ladder_field(const CrossoverEntry& e) {
  const bool tiled = e.tiled_warp && !e.untiled;
  if (e.bf16_activations) return tiled ? "tiled_w8a16_crossover" : "w8a16_crossover";
  return tiled ? "tiled_crossover" : "crossover";
}

std::string crossover_line(const CrossoverEntry& e) {
  std::string s = e.preset + " " + to_string(e.format) + (e.bf16_activations ? " W8A16" : "");
  if (e.untiled)
    s += std::string(" (tiled-only weights, the classical path ") +
         (e.classical_reads_tiled ? "reading them)" : "un-tiling them)");
  else if (e.tiled_warp)
    s += " (warp decode on the tiled copies)";
  return s + ": " +
         (e.crossover == CrossoverEntry::kNever ? "never (warp decode at every B measured)"
                                                : "B >= " + std::to_string(e.crossover));
}

TuneLadder best_of_rounds(const std::vector<TuneLadder>& rounds) {
  WD_CHECK(!rounds.empty(), "best_of_rounds: no rounds");
  TuneLadder best = rounds.front();
  for (size_t r = 1; r < rounds.size(); ++r) {
    const TuneLadder& x = rounds[r];
    WD_CHECK(x.kind() == best.kind(), "best_of_rounds: rounds of ", best.kind(), " and ", x.kind());
    WD_CHECK(x.batches == best.batches, "best_of_rounds: ", best.kind(), ": round ", r + 1,
             " measured other batches than round 1");
    auto fold = [&](std::vector<double>& into, const std::vector<double>& from, const char* what) {
      WD_CHECK(into.size() == from.size(), "best_of_rounds: ", best.kind(), ": round ", r + 1, " has ", from.size(),
               " ", what, " times, round 1 ", into.size());
      for (size_t i = 0; i < into.size(); ++i) into[i] = std::min(into[i], from[i]);
    };
    fold(best.warp_us, x.warp_us, "warp");
    fold(best.warp_tiled_us, x.warp_tiled_us, "warp (tiled copies)");
    fold(best.classical_us, x.classical_us, "classical");
    fold(best.w8a16_us, x.w8a16_us, "W8A16");
  }
  return best;
}

std::vector<TuneLadder> parse_tune_ladders(const std::string& json_text, const std::string& source) {
  return parse_tune_ladders(json_read::parse(json_text, source), source);
}

std::vector<TuneLadder> parse_tune_ladders(const json_read::Json& doc, const std::string& source) {
  if (!doc.is_object() || !doc.contains("ladders") || !doc.at("ladders").is_array())
    throw FormatError(source + ": a tune's JSON (bench-moe --tune or --tune-untiled) has a \"ladders\" array");
  std::vector<TuneLadder> out;
  const json_read::Json& ladders = doc.at("ladders");
  for (size_t i = 0; i < ladders.size(); ++i) {
    const std::string where = source + ", ladder " + std::to_string(i);
    if (!ladders[i].is_object()) throw FormatError(where + ": must be a JSON object");
    const json_read::Object r(ladders[i], where);
    TuneLadder l;
    l.preset = r.string("preset");
    try {
      preset_shape(l.preset);
      l.format = parse_weight_format(r.string("format"));
    } catch (const InvalidArgument& e) {
      r.refuse(e.what());
    }
    const std::string ww = r.string_or("warp_weights", "default");
    if (ww != "default" && ww != "tiled-only")
      throw FormatError(where + ": warp_weights '" + ww + "' (allowed: default, tiled-only)");
    l.tiled_only = ww == "tiled-only";
    if (l.tiled_only) {
      const std::string reads = r.string("classical_reads");
      if (reads != "tiled copies" && reads != "un-tiled scratch")
        throw FormatError(where + ": classical_reads '" + reads + "' (allowed: tiled copies, un-tiled scratch)");
      l.classical_reads_tiled = reads == "tiled copies";
    }
    const json_read::Json& points = r.required("points");
    if (!points.is_array() || points.empty()) throw FormatError(where + ": 'points' must be a non-empty array");
    for (size_t p = 0; p < points.size(); ++p) {
      if (!points[p].is_object()) throw FormatError(where + ", point " + std::to_string(p) + ": must be a JSON object");
      const json_read::Object pt(points[p], where + ", point " + std::to_string(p));
      l.batches.push_back(int(pt.integer("batch", 1, 1 << 24)));
      if (p > 0 && l.batches[p] <= l.batches[p - 1])
        pt.refuse("batch " + std::to_string(l.batches[p]) + " after " + std::to_string(l.batches[p - 1]) +
                  " (a ladder ascends)");
    }
    // A time is in every point of the ladder or in none.
    auto times = [&](const char* key, std::vector<double>& into) {
      const bool first = json_read::Object(points[0], where).has(key);
      for (size_t p = 0; p < points.size(); ++p) {
        const json_read::Object pt(points[p], where + ", point " + std::to_string(p));
        if (pt.has(key) != first)
          pt.refuse(std::string("'") + key + "' is " + (first ? "missing" : "present") + " (point 0: " +
                    (first ? "present" : "missing") + ")");
        if (first) into.push_back(pt.positive_number(pt.at(key), key));
      }
    };
    if (warp_decode_streams(l.format)) times("warp_us", l.warp_us);
    times("warp_tiled_us", l.warp_tiled_us);
    times("classical_us", l.classical_us);
    times("w8a16_us", l.w8a16_us);
    if (l.classical_us.empty()) throw FormatError(where + ": no 'classical_us' times");
    if (warp_decode_streams(l.format) && l.warp_us.empty()) throw FormatError(where + ": no 'warp_us' times");
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace wd
