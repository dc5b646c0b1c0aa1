// See accuracy/compare.h.
#include "accuracy/compare.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "warpdecode/error.h"

namespace wd::report {
namespace {

using nlohmann::json;

using Key = std::tuple<std::string, std::string, long, std::string, std::string>;  // preset, format, B, path, config

std::string str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

Key key_of(const json& r) {
  return {str(r, "preset"), str(r, "format"), r.contains("batch") && r["batch"].is_number() ? r["batch"].get<long>() : 0,
          str(r, "path"), str(r, "config")};
}

// The record's figures: "" is the layer (us_median), a stage name its stage.
// The median µs of a record or of one of its stages, where it has one.
std::optional<double> us_median(const json& j) {
  if (j.contains("us_median") && j["us_median"].is_number()) return j["us_median"].get<double>();
  return std::nullopt;
}

std::optional<double> figure(const json& r, const std::string& stage) {
  if (stage.empty()) return us_median(r);
  if (!r.contains("stages") || !r["stages"].is_array()) return std::nullopt;
  for (const json& s : r["stages"])
    if (str(s, "name") == stage && us_median(s)) return us_median(s);
  return std::nullopt;
}

std::string num(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The span of a figure over a label's rounds or records: ", name a-b unit",
// or ", name a unit" when they agree, or nothing without a value.
struct Span {
  double lo = 0, hi = 0;
  bool any = false;
  void add(double v) {
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  }
  std::string str(const char* name, const char* f, const char* unit) const {
    if (!any) return "";
    return ", " + std::string(name) + " " + num(f, lo) + (lo == hi ? "" : "-" + num(f, hi)) + " " + unit;
  }
};

struct LabelInfo {
  int rounds = 0;
  std::vector<std::string> commits;
  Span read;   // header read_tbps
  Span clock;  // records' sm_clock_mhz (bench-moe with NVML)
};

}  // namespace

std::pair<std::string, std::string> parse_labelled_file(const std::string& arg) {
  const size_t eq = arg.find('=');
  WD_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < arg.size(), "compare: '", arg,
           "' is not LABEL=FILE (e.g. old=r1/old.json)");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

std::string compare_table(const std::vector<CompareInput>& inputs, const CompareOptions& opt) {
  WD_CHECK(!inputs.empty(), "compare: no inputs");
  std::vector<std::string> labels;  // in order of first appearance; labels[0] is the baseline
  std::map<std::string, LabelInfo> info;
  std::vector<Key> keys;            // in order of first appearance
  std::map<Key, std::map<std::string, std::map<std::string, double>>> best;  // key -> label -> figure -> min
  std::vector<std::string> figures{""};
  figures.insert(figures.end(), opt.stages.begin(), opt.stages.end());

  std::set<std::string> stage_names, timed_stages;  // every stage the inputs name, and those with a time
  for (const CompareInput& in : inputs) {
    // Timed records only: an accuracy file would pair nothing and print dashes.
    bool timed = false;
    if (in.doc.contains("records") && in.doc["records"].is_array())
      for (const json& r : in.doc["records"]) {
        timed |= us_median(r).has_value();
        if (r.contains("stages") && r["stages"].is_array())
          for (const json& s : r["stages"]) {
            stage_names.insert(str(s, "name"));
            if (!us_median(s)) continue;
            timed = true;
            timed_stages.insert(str(s, "name"));
          }
      }
    WD_CHECK(timed, "compare: ", in.label, "'s file holds no bench-moe records (us_median): not a `bench-moe --json` "
             "file");
    if (std::find(labels.begin(), labels.end(), in.label) == labels.end()) labels.push_back(in.label);
    LabelInfo& li = info[in.label];
    ++li.rounds;
    const json& h = in.doc.contains("header") ? in.doc["header"] : json::object();
    const std::string commit = str(h, "commit");
    if (!commit.empty() && std::find(li.commits.begin(), li.commits.end(), commit) == li.commits.end())
      li.commits.push_back(commit);
    if (h.contains("read_tbps") && h["read_tbps"].is_number()) li.read.add(h["read_tbps"].get<double>());
    if (!in.doc.contains("records") || !in.doc["records"].is_array()) continue;
    for (const json& r : in.doc["records"]) {
      if (r.contains("sm_clock_mhz") && r["sm_clock_mhz"].is_number()) li.clock.add(r["sm_clock_mhz"].get<double>());
      const Key k = key_of(r);
      const auto [at, fresh] = best.try_emplace(k);
      if (fresh) keys.push_back(k);
      auto& per_label = at->second;
      for (const std::string& f : figures) {
        const std::optional<double> v = figure(r, f);
        if (!v) continue;
        auto& slot = per_label[in.label];
        const auto it = slot.find(f);
        slot[f] = it == slot.end() ? *v : std::min(it->second, *v);
      }
    }
  }
  WD_CHECK(!keys.empty(), "compare: the inputs have no records");
  // A stage no record has is a misspelling (or a run without --stages), not
  // a column of dashes.
  for (const std::string& f : opt.stages) {
    if (timed_stages.count(f)) continue;
    std::string known;
    for (const std::string& n : stage_names) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(detail::concat("compare: no record has the stage '", f, "' (",
                                         known.empty()
                                             ? std::string("the inputs have no stages: bench-moe --stages writes them")
                                             : "stages in the inputs: " + known,
                                         ")"));
  }

  std::string md;
  for (const std::string& l : labels) {
    const LabelInfo& li = info[l];
    md += "- " + l + (l == labels[0] ? " (baseline)" : "") + ": " + std::to_string(li.rounds) +
          (li.rounds == 1 ? " round" : " rounds");
    if (!li.commits.empty()) {
      md += ", commit";
      for (const std::string& c : li.commits) md += " " + c;
    }
    md += li.read.str("read", "%.3f", "TB/s") + li.clock.str("SM clock", "%.0f", "MHz");
    if (l != labels[0]) {
      // Rows are paired by preset, format, B, path and configuration: say how
      // many of the baseline's found a partner (a different upload or
      // configuration pairs few).
      size_t base_rows = 0, paired = 0;
      for (const auto& kv : best) {
        const bool in_base = kv.second.count(labels[0]) > 0;
        base_rows += in_base;
        paired += in_base && kv.second.count(l) > 0;
      }
      md += ", " + std::to_string(paired) + " of the baseline's " + std::to_string(base_rows) + " rows paired";
    }
    md += "\n";
  }
  md += "\nµs, min over rounds of the median; change against " + labels[0] + ".\n\n";
  md += "| preset | format | B | path | config |";
  std::string rule = "|---|---|--:|---|---|";
  for (const std::string& f : figures) {
    const std::string name = f.empty() ? "layer" : f;
    for (size_t i = 0; i < labels.size(); ++i) {
      md += " " + name + " " + labels[i] + " |";
      rule += "--:|";
      if (i > 0) {
        md += " Δ |";
        rule += "--:|";
      }
    }
  }
  md += "\n" + rule + "\n";
  for (const Key& k : keys) {
    md += "| " + std::get<0>(k) + " | " + std::get<1>(k) + " | " + std::to_string(std::get<2>(k)) + " | " +
          std::get<3>(k) + " | " + std::get<4>(k) + " |";
    const auto& per_label = best[k];
    for (const std::string& f : figures) {
      std::optional<double> base;
      for (size_t i = 0; i < labels.size(); ++i) {
        std::optional<double> v;
        if (const auto it = per_label.find(labels[i]); it != per_label.end())
          if (const auto jt = it->second.find(f); jt != it->second.end()) v = jt->second;
        if (i == 0) base = v;
        md += " " + (v ? num("%.1f", *v) : std::string("-")) + " |";
        if (i > 0) md += " " + (v && base && *base > 0 ? num("%+.1f %%", 100.0 * (*v / *base - 1.0)) : std::string("-")) + " |";
      }
    }
    md += "\n";
  }
  return md;
}

}  // namespace wd::report
