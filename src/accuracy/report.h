// `warpdecode report`: Markdown tables and PNG plots from the JSON that
// `bench-moe --json` and `accuracy --json` write.
//
// Output directory:
//   REPORT.md                     every table, with each file's header (card,
//                                 driver, CUDA, commit, clocks, command) and
//                                 links to the plots
//   <stem>-<preset>.png           bench-moe: achieved TB/s vs batch, one line
//                                 per (path, format), the measured read
//                                 ceiling as a horizontal line
//   <stem>-drift-<...>.png        accuracy: error vs depth, one line per path
//   gnuplot/                      the generated scripts and data (re-render
//                                 with `gnuplot gnuplot/<name>.gp`) and log
// Plots are drawn by gnuplot (pngcairo), run as a subprocess; without it the
// Markdown is still written and says why there are no plots.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace wd::report {

// One line per header field we keep: card, driver, CUDA, commit, clocks, command.
std::string header_lines(const nlohmann::json& header);

// bench-moe records (default configurations only) as a Markdown table.
std::string moe_table(const nlohmann::json& doc);
// accuracy records (single layer) as a Markdown table.
std::string accuracy_table(const nlohmann::json& doc);
// One drift record as a Markdown table at depths 1, 2, 4, ... and the last.
std::string drift_table(const nlohmann::json& drift);

// A gnuplot script and its data, written by render().
struct Plot {
  std::string name;    // file name stem: <name>.png, gnuplot/<name>.gp, gnuplot/<name>.dat
  std::string title;   // alt text in the Markdown
  std::string data;    // gnuplot data blocks
  std::string script;  // with @DATA@ and @PNG@ standing for the paths
};
// TB/s vs batch per preset of a bench-moe document (stem: the file's stem).
std::vector<Plot> moe_plots(const nlohmann::json& doc, const std::string& stem);
// Error vs depth of one drift record (none without depths), and of every
// drift record of an accuracy document.
std::optional<Plot> drift_plot(const nlohmann::json& drift, const std::string& stem);
std::vector<Plot> drift_plots(const nlohmann::json& doc, const std::string& stem);

struct Options {
  std::vector<std::string> moe_files, accuracy_files;
  std::string out_dir;
  std::string gnuplot = "gnuplot";  // program name (searched in PATH) or path
};

struct Result {
  std::string markdown;             // path of REPORT.md
  std::vector<std::string> pngs;    // plots rendered
  std::string plots_note;           // empty, or why some or all plots are missing
};

// Reads the files, writes the report. Throws wd::FormatError on unreadable
// JSON and wd::Error if the directory cannot be written.
Result render(const Options& opt);

// A JSON file. Throws wd::FormatError when it cannot be read or parsed.
nlohmann::json read_json(const std::string& path);

// The executable gnuplot would run as (PATH search), or empty if none.
std::string find_program(const std::string& name);

}  // namespace wd::report
