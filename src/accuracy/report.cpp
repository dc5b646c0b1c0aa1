// See accuracy/report.h.
#include "accuracy/report.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include "core/json_read.h"
#include "core/read_file.h"
#include "warpdecode/error.h"

extern char** environ;

namespace wd::report {
namespace {

using nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

bool is_num(const json& j, const char* key) { return j.is_object() && j.contains(key) && j[key].is_number(); }

std::string text(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// Seeds (at depth i of a drift record, or of a one-layer record with i
// npos) where path `id` wrote non-finite output: its statistic is null then.
size_t non_finite(const json& rec, const char* id, size_t i = std::string::npos) {
  if (!id || !rec.contains("non_finite") || !rec["non_finite"].is_object() || !rec["non_finite"].contains(id))
    return 0;
  auto count = [](const json& v) -> size_t {
    return v.is_number_integer() && v.get<int64_t>() > 0 ? size_t(v.get<int64_t>()) : 0;
  };
  const json& n = rec["non_finite"][id];
  if (i == std::string::npos) return count(n);
  return n.is_array() && i < n.size() ? count(n[i]) : 0;
}

// Whether any of the paths `ids` wrote non-finite output (at depth i, as
// non_finite).
using PathIds = std::initializer_list<const char*>;
bool any_non_finite(const json& rec, PathIds ids, size_t i = std::string::npos) {
  return std::any_of(ids.begin(), ids.end(), [&](const char* id) { return non_finite(rec, id, i) > 0; });
}

// "median (worst)" of an error field; "NaN" where the field is null because
// one of the paths `ids` it comes from wrote non-finite output (a path's
// error, or a ratio of two); "-" where it did not run.
std::string err_cell(const json& rec, const char* key, const char* f, PathIds ids = {}) {
  if (!is_num(rec, key)) return any_non_finite(rec, ids) ? "NaN" : "-";
  std::string c = fmt(f, rec[key].get<double>());
  if (rec.contains("worst") && is_num(rec["worst"], key)) c += " (" + fmt(f, rec["worst"][key].get<double>()) + ")";
  return c;
}

std::string depth_cell(const json& rec, const char* key, size_t i, const char* f, PathIds ids = {}) {
  if (!rec.contains(key) || !rec[key].is_array() || i >= rec[key].size() || !rec[key][i].is_number())
    return any_non_finite(rec, ids, i) ? "NaN" : "-";
  std::string c = fmt(f, rec[key][i].get<double>());
  if (rec.contains("worst") && rec["worst"].contains(key) && rec["worst"][key].is_array() &&
      i < rec["worst"][key].size() && rec["worst"][key][i].is_number())
    c += " (" + fmt(f, rec["worst"][key][i].get<double>()) + ")";
  return c;
}

const json& records(const json& doc, const char* key) {
  static const json empty = json::array();
  return doc.contains(key) && doc[key].is_array() ? doc[key] : empty;
}

// Gnuplot single-quoted string: '' stands for '.
std::string q(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '-';
  return o;
}

std::string gnuplot_num(const json& j) { return j.is_number() ? fmt("%.6g", j.get<double>()) : "NaN"; }

// The paths, in accuracy::Path order (files from before W8A16 lack its key:
// "-" in the tables, NaN in the plots).
const char* const kPathKeys[] = {"err_warp", "err_classical_bf16", "err_classical_fp8", "err_classical_w8a16"};
const char* const kPathNames[] = {"warp decode", "classical BF16", "classical FP8", "classical W8A16"};
const char* const kPathIds[] = {"warp", "classical_bf16", "classical_fp8", "classical_w8a16"};
constexpr int kReportPaths = 4;
// ratio_fp8_over_warp's two paths: null where either wrote non-finite output.
const PathIds kRatioPaths = {"warp", "classical_fp8"};

std::string path_label(const json& rec, int p) {
  std::string l = kPathNames[p];
  const std::string w = rec.contains("weights") ? text(rec["weights"], kPathIds[p]) : "";
  return w.empty() ? l : l + " (" + w + ")";
}

std::vector<size_t> shown_depths(size_t layers) {
  std::vector<size_t> d;
  if (layers <= 8) {
    for (size_t l = 1; l <= layers; ++l) d.push_back(l);
    return d;
  }
  for (size_t l = 1; l < layers; l *= 2) d.push_back(l);
  d.push_back(layers);
  return d;
}

}  // namespace

std::string header_lines(const json& h) {
  std::ostringstream o;
  const std::string card = text(h, "card");
  o << "- card: " << (card.empty() ? "none (CPU models only: no CUDA GPU, or --cpu)" : card);
  if (is_num(h, "sms")) o << " (" << h["sms"].get<int>() << " SMs)";
  // Before session 81 "driver" held the CUDA version the driver supports
  // (cudaDriverGetVersion); since, the driver's own version and cuda_driver.
  if (!text(h, "driver").empty())
    o << (h.contains("cuda_driver") ? " · driver " : " · driver's CUDA ") << text(h, "driver");
  if (!text(h, "cuda_runtime").empty()) o << " · CUDA " << text(h, "cuda_runtime");
  o << " · commit " << (text(h, "commit").empty() ? "unknown" : text(h, "commit")) << "\n";
  if (is_num(h, "sm_clock_mhz") || is_num(h, "mem_clock_mhz")) {
    auto mhz = [&](const char* k) {
      return is_num(h, k) && h[k].get<int>() >= 0 ? std::to_string(h[k].get<int>()) + " MHz" : std::string("unread");
    };
    o << "- clocks as read: SM " << mhz("sm_clock_mhz");
    if (is_num(h, "max_sm_clock_mhz")) o << " (max " << mhz("max_sm_clock_mhz") << ")";
    o << ", memory " << mhz("mem_clock_mhz") << "\n";
  }
  if (!text(h, "command").empty()) o << "- command: `" << text(h, "command") << "`\n";
  return o.str();
}

std::string moe_table(const json& doc) {
  std::ostringstream o;
  o << "| preset | format | B | path | config | µs | TB/s | % of read |\n";
  o << "|---|---|--:|---|---|--:|--:|--:|\n";
  for (const auto& r : records(doc, "records")) {
    if (r.contains("default_config") && r["default_config"].is_boolean() && !r["default_config"].get<bool>()) continue;
    const std::string path = text(r, "path").empty() ? "warp" : text(r, "path");
    o << "| " << text(r, "preset") << " | " << text(r, "format") << " | " << text(r, "batch") << " | " << path << " | "
      << text(r, "config") << " | " << (is_num(r, "us_median") ? fmt("%.1f", r["us_median"].get<double>()) : "-")
      << " | " << (is_num(r, "tbps") ? fmt("%.3f", r["tbps"].get<double>()) : "-") << " | "
      << (is_num(r, "pct_read_bw") ? fmt("%.1f", r["pct_read_bw"].get<double>()) : "-") << " |\n";
  }
  return o.str();
}

std::string accuracy_table(const json& doc) {
  std::ostringstream o;
  o << "| preset | format | B | inputs | source | warp decode | classical BF16 | classical FP8 | classical W8A16 | "
       "FP8 / warp | weight quant |\n";
  o << "|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|\n";
  std::set<std::string> other_weights;  // "format: the weights warp decode ran" where they differ
  for (const auto& r : records(doc, "records")) {
    o << "| " << text(r, "preset") << " | " << text(r, "format") << " | " << text(r, "batch") << " | "
      << text(r, "inputs") << " | " << text(r, "source");
    for (int p = 0; p < kReportPaths; ++p) o << " | " << err_cell(r, kPathKeys[p], "%.2e", {kPathIds[p]});
    o << " | " << err_cell(r, "ratio_fp8_over_warp", "%.2f", kRatioPaths) << " | "
      << err_cell(r, "err_weight_quant", "%.2e") << " |\n";
    const std::string warp = r.contains("weights") ? text(r["weights"], "warp") : "";
    if (!warp.empty() && warp != text(r, "format")) other_weights.insert(text(r, "format") + " rows: " + warp);
  }
  // Warp decode does not stream every format (FP8 block-128): its column is
  // then its error on the weights it ran, which the table says.
  for (const std::string& w : other_weights) o << "\nWarp decode ran other weights in " << w << ".\n";
  return o.str();
}

std::string drift_table(const json& d) {
  std::ostringstream o;
  o << "| depth | warp decode | classical BF16 | classical FP8 | classical W8A16 | FP8 / warp | weight quant | "
       "reroutes warp / BF16 / FP8 / W8A16 |\n";
  o << "|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  const size_t layers = d.contains("depth") && d["depth"].is_array() ? d["depth"].size() : 0;
  for (size_t depth : shown_depths(layers)) {
    const size_t i = depth - 1;
    o << "| " << depth;
    for (int p = 0; p < kReportPaths; ++p) o << " | " << depth_cell(d, kPathKeys[p], i, "%.2e", {kPathIds[p]});
    o << " | " << depth_cell(d, "ratio_fp8_over_warp", i, "%.2f", kRatioPaths) << " | "
      << depth_cell(d, "err_weight_quant", i, "%.2e") << " | ";
    for (int p = 0; p < kReportPaths; ++p) {
      const json* v = d.contains("reroutes") && d["reroutes"].contains(kPathIds[p]) ? &d["reroutes"][kPathIds[p]] : nullptr;
      o << (p ? " / " : "") << (v && v->is_array() && i < v->size() && (*v)[i].is_number() ? fmt("%.1f", (*v)[i].get<double>()) : "-");
    }
    o << " |\n";
  }
  return o.str();
}

std::vector<Plot> moe_plots(const json& doc, const std::string& stem) {
  // preset -> series "path format" -> (B, TB/s), in the order first seen.
  std::vector<std::string> presets;
  std::map<std::string, std::vector<std::pair<std::string, std::map<int, double>>>> series;
  for (const auto& r : records(doc, "records")) {
    if (r.contains("default_config") && r["default_config"].is_boolean() && !r["default_config"].get<bool>()) continue;
    if (!is_num(r, "tbps") || !is_num(r, "batch")) continue;
    const std::string preset = text(r, "preset");
    if (!series.count(preset)) presets.push_back(preset);
    auto& list = series[preset];
    const std::string name = (text(r, "path").empty() ? "warp" : text(r, "path")) + " " + text(r, "format");
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& s) { return s.first == name; });
    if (it == list.end()) it = list.insert(list.end(), {name, {}});
    it->second[r["batch"].get<int>()] = r["tbps"].get<double>();
  }
  const json header = doc.contains("header") ? doc["header"] : json::object();
  const bool ceiling = is_num(header, "read_tbps");
  const double read = ceiling ? header["read_tbps"].get<double>() : 0.0;
  std::vector<Plot> plots;
  for (const auto& preset : presets) {
    Plot p;
    p.name = sanitize(stem + "-" + preset);
    p.title = preset + ": achieved TB/s vs batch size";
    std::ostringstream data, plot;
    const auto& list = series[preset];
    for (size_t i = 0; i < list.size(); ++i) {
      data << "# " << list[i].first << "\n";
      for (const auto& [b, t] : list[i].second) data << b << " " << fmt("%.6g", t) << "\n";
      data << "\n\n";
      plot << (i ? ", \\\n     " : "plot ") << "'@DATA@' index " << i << " using 1:2 with linespoints linewidth 2 pointtype 7 title "
           << q(list[i].first);
    }
    if (ceiling)
      plot << ", \\\n     " << fmt("%.4f", read) << " with lines dashtype 2 linewidth 2 linecolor rgb 'black' title "
           << q("measured read ceiling " + fmt("%.2f", read) + " TB/s");
    const std::string card = text(header, "card");
    std::ostringstream s;
    s << "set terminal pngcairo size 960,600 font ',11' noenhanced\n"
      << "set output '@PNG@'\n"
      << "set title " << q(p.title + (card.empty() ? "" : " (" + card + ")")) << "\n"
      << "set xlabel 'batch size B (tokens)'\n"
      << "set ylabel 'TB/s (unique bytes read / time)'\n"
      << "set logscale x 2\nset grid\nset key left top\n"
      << "set yrange [0:" << (ceiling ? fmt("%.3f", read * 1.15) : std::string("*")) << "]\n"
      << plot.str() << "\n";
    p.data = data.str();
    p.script = s.str();
    plots.push_back(p);
  }
  return plots;
}

std::optional<Plot> drift_plot(const json& d, const std::string& stem) {
  if (!d.contains("depth") || !d["depth"].is_array()) return std::nullopt;
  Plot p;
  p.name = sanitize(stem + "-drift-" + text(d, "preset") + "-" + text(d, "format") + "-b" + text(d, "batch") + "-" +
                    text(d, "inputs"));
  p.title = text(d, "preset") + " " + text(d, "format") + ", B = " + text(d, "batch") + ", " + text(d, "inputs") +
            " inputs: error vs depth";
  std::ostringstream data;
  data << "# depth warp classical_bf16 classical_fp8 classical_w8a16 weight_quant\n";
  const char* const cols[kReportPaths + 1] = {kPathKeys[0], kPathKeys[1], kPathKeys[2], kPathKeys[3], "err_weight_quant"};
  for (size_t i = 0; i < d["depth"].size(); ++i) {
    data << d["depth"][i].dump();
    for (const char* c : cols)
      data << " " << (d.contains(c) && d[c].is_array() && i < d[c].size() ? gnuplot_num(d[c][i]) : std::string("NaN"));
    data << "\n";
  }
  std::ostringstream plot;
  int n = 0;
  for (int c = 0; c <= kReportPaths; ++c) {
    if (!d.contains(cols[c]) || !d[cols[c]].is_array()) continue;
    const bool path = c < kReportPaths;
    const std::string title = path ? path_label(d, c) : "weight quantization alone (FP64, " + text(d, "format") + " vs bf16)";
    plot << (n++ ? ", \\\n     " : "plot ") << "'@DATA@' using 1:" << c + 2
         << (path ? " with linespoints linewidth 2 pointtype 7" : " with lines dashtype 2 linewidth 2") << " title " << q(title);
  }
  if (!n) return std::nullopt;
  std::ostringstream s;
  s << "set terminal pngcairo size 960,600 font ',11' noenhanced\n"
    << "set output '@PNG@'\n"
    << "set title " << q(p.title + " (" + text(d, "source") + ")") << "\n"
    << "set xlabel 'depth (MoE layers with residual + RMSNorm)'\n"
    << "set ylabel 'relative L2 error of the residual stream vs FP64'\n"
    << "set logscale y\nset format y '%.0e'\nset grid\nset key left top\n"
    << (d["depth"].size() <= 16 ? "set xtics 1\n" : "") << plot.str() << "\n";
  p.data = data.str();
  p.script = s.str();
  return p;
}

std::vector<Plot> drift_plots(const json& doc, const std::string& stem) {
  std::vector<Plot> plots;
  for (const auto& d : records(doc, "drift"))
    if (auto p = drift_plot(d, stem)) plots.push_back(*p);
  return plots;
}

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string f = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

namespace {

// Runs exe with args, stdout and stderr appended to log; the exit status, or -1.
int run_program(const std::string& exe, const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<std::string> all{exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_file(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p);
  out << s;
  if (!out.good()) throw Error(detail::concat("report: cannot write '", p.string(), "'"));
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size())) s.replace(i, from.size(), to);
  return s;
}

}  // namespace

nlohmann::json read_json(const std::string& path) {
  return json_read::parse(read_file(path), "'" + path + "'");
}

Result render(const Options& opt) {
  namespace fs = std::filesystem;
  WD_CHECK(!opt.out_dir.empty(), "report: --out is required");
  WD_CHECK(!opt.moe_files.empty() || !opt.accuracy_files.empty(), "report: give --moe and/or --accuracy files");
  // Every input read before anything is written: a missing or malformed file
  // leaves no output directory behind.
  std::vector<json> moe_docs, accuracy_docs;
  // Each file must be the kind its option names: `accuracy --json` files
  // say so in header.tool; bench-moe's hold timed records.
  auto is_accuracy = [](const json& d) {
    return d.is_object() && d.contains("header") && text(d["header"], "tool") == "warpdecode accuracy";
  };
  for (const auto& f : opt.moe_files) {
    moe_docs.push_back(read_json(f));
    const json& d = moe_docs.back();
    WD_CHECK(!is_accuracy(d), "report: '", f, "' is an `accuracy --json` file: give it with --accuracy");
    bool timed = false;
    for (const auto& r : records(d, "records")) timed |= is_num(r, "us_median");
    WD_CHECK(timed, "report: '", f, "' holds no bench-moe records (us_median): not a `bench-moe --json` file");
  }
  for (const auto& f : opt.accuracy_files) {
    accuracy_docs.push_back(read_json(f));
    WD_CHECK(is_accuracy(accuracy_docs.back()), "report: '", f,
             "' is not an `accuracy --json` file (its header.tool is not \"warpdecode accuracy\")");
  }
  const fs::path out(opt.out_dir), gp_dir = out / "gnuplot";
  std::error_code ec;
  fs::create_directories(gp_dir, ec);
  if (ec) throw Error(detail::concat("report: cannot create '", gp_dir.string(), "': ", ec.message()));

  Result res;
  const std::string gnuplot = find_program(opt.gnuplot);
  if (gnuplot.empty()) res.plots_note = "gnuplot not found ('" + opt.gnuplot + "' in PATH): plots not rendered (install gnuplot-nox)";
  const fs::path log = gp_dir / "gnuplot.log";
  fs::remove(log, ec);
  // Plot names are made from each input's file stem, which two inputs may
  // share (h200/moe.json and h100/moe.json): a name taken already gets "-2",
  // "-3", ... so that no plot overwrites another.
  std::set<std::string> taken;
  // Renders a plot; returns the Markdown line for it.
  auto draw = [&](Plot p) -> std::string {
    const std::string base = p.name;
    for (int i = 2; !taken.insert(p.name).second; ++i) p.name = base + "-" + std::to_string(i);
    const fs::path dat = gp_dir / (p.name + ".dat"), gp = gp_dir / (p.name + ".gp"), png = out / (p.name + ".png");
    write_file(dat, p.data);
    write_file(gp, replace_all(replace_all(p.script, "@DATA@", replace_all(fs::absolute(dat).string(), "'", "''")),
                               "@PNG@", replace_all(fs::absolute(png).string(), "'", "''")));
    if (gnuplot.empty()) return "";
    fs::remove(png, ec);
    const int rc = run_program(gnuplot, {fs::absolute(gp).string()}, log.string());
    if (rc != 0 || !fs::exists(png) || fs::file_size(png) == 0) {
      res.plots_note = "gnuplot failed on " + gp.string() + " (see " + log.string() + ")";
      return "";
    }
    res.pngs.push_back(png.string());
    return "![" + p.title + "](" + p.name + ".png)\n\n";
  };

  std::ostringstream md;
  md << "# warpdecode measurements\n\nRendered by `warpdecode report` from:";
  for (const auto& f : opt.moe_files) md << " `" << fs::path(f).filename().string() << "`";
  for (const auto& f : opt.accuracy_files) md << " `" << fs::path(f).filename().string() << "`";
  md << ".\n\n";
  for (size_t fi = 0; fi < opt.moe_files.size(); ++fi) {
    const std::string& f = opt.moe_files[fi];
    const json& doc = moe_docs[fi];
    const json h = doc.contains("header") ? doc["header"] : json::object();
    md << "## MoE layer speed: `" << fs::path(f).filename().string() << "`\n\n" << header_lines(h);
    if (is_num(h, "read_tbps")) {
      md << "- measured read ceiling: " << fmt("%.3f", h["read_tbps"].get<double>()) << " TB/s (streaming read, same run";
      // Since session 43 the ceiling is the fastest of several read patterns;
      // files from before carry the grid-stride walk's rate alone.
      if (h.contains("read_patterns_tbps") && h["read_patterns_tbps"].is_object()) {
        md << "; the fastest of:";
        for (const auto& [name, tbps] : h["read_patterns_tbps"].items())
          if (tbps.is_number()) md << " " << name << " " << fmt("%.3f", tbps.get<double>());
      } else {
        md << "; the grid-stride walk alone";
      }
      md << ")\n";
    }
    // Records from before session 81's harness fix carry no weight_copies:
    // one copy of each layer, so a call could find part of its weights in L2.
    const auto recs = records(doc, "records");
    if (!recs.empty() && std::none_of(recs.begin(), recs.end(), [](const json& r) { return r.contains("weight_copies"); }))
      md << "- weight copies: measured before session 81's harness (one copy of each layer; a call could find part "
            "of its weights in L2 from the call before: on an H100 qwen3-30b-a3b MXFP8 read 2.5-3.7 % faster so, "
            "BF16 and the larger presets within 1 %; docs/DESIGN.md, \"How we measure\")\n";
    md << "\nµs per layer call, router excluded (median over graph replays); TB/s = unique bytes read / time; "
          "default kernel configuration only.\n\n"
       << moe_table(doc) << "\n";
    for (const auto& p : moe_plots(doc, fs::path(f).stem().string())) md << draw(p);
  }
  for (size_t fi = 0; fi < opt.accuracy_files.size(); ++fi) {
    const std::string& f = opt.accuracy_files[fi];
    const json& doc = accuracy_docs[fi];
    const json h = doc.contains("header") ? doc["header"] : json::object();
    md << "## Accuracy against FP64: `" << fs::path(f).filename().string() << "`\n\n" << header_lines(h);
    const std::string source = text(h, "source");
    md << "- numbers from: "
       << (source == "gpu"         ? "GPU kernels (WarpDecodeMoe, ClassicalMoe)"
           : source == "cpu-model" ? "CPU models of the paths (no GPU: FP32 reference for warp decode, CPU reference "
                                     "of the classical path), not GPU kernels"
                                   : "not stated in the file (header.source missing)")
       << "\n";
    if (!text(h, "output").empty()) md << "- path outputs: " << text(h, "output") << "\n";
    if (!records(doc, "records").empty())
      md << "\nRelative L2 error against the FP64 reference on the weights each path ran; median over seeds, worst "
            "seed in parentheses (for the ratio: the smallest). Weight quant: the FP64 layer on the FP8 weights "
            "against the FP64 layer on the BF16 weights they came from.\n\n"
         << accuracy_table(doc) << "\n";
    for (const auto& d : records(doc, "drift")) {
      md << "### Drift: " << text(d, "preset") << " " << text(d, "format") << ", B = " << text(d, "batch") << ", "
         << text(d, "inputs") << " inputs, " << text(d, "layers") << " layers (" << text(d, "source") << ", "
         << text(d, "seeds") << " seeds, residual " << text(d, "residual") << ")\n\n"
         << "Relative L2 error of the residual stream against the FP64 stack on the path's weights, median (worst) "
            "over seeds; reroutes: tokens per layer sent to a different expert set than the FP64 stack's.\n\n"
         << drift_table(d) << "\n";
      if (auto p = drift_plot(d, fs::path(f).stem().string())) md << draw(*p);
    }
  }
  if (!res.plots_note.empty()) md << "_Plots: " << res.plots_note << "._\n";
  res.markdown = (out / "REPORT.md").string();
  write_file(res.markdown, md.str());
  return res;
}

}  // namespace wd::report
