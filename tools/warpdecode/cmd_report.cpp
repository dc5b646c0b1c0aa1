// warpdecode report: Markdown tables and PNG plots (gnuplot) from the JSON of
// `bench-moe --json` and `accuracy --json`. See src/accuracy/report.h.
#include <cstdio>
#include <string>
#include <vector>

#include "accuracy/report.h"
#include "tools/warpdecode/commands.h"

namespace wd::cli {

void add_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Render bench-moe and accuracy JSON as Markdown tables and PNG plots");
  auto o = std::make_shared<report::Options>();
  cmd->add_option("--moe", o->moe_files, "JSON of `bench-moe --json` (repeatable)");
  cmd->add_option("--accuracy", o->accuracy_files, "JSON of `accuracy --json` (repeatable)");
  cmd->add_option("--out", o->out_dir, "Output directory (REPORT.md, PNG plots, gnuplot/)")->required();
  cmd->add_option("--gnuplot", o->gnuplot, "gnuplot program")->capture_default_str();
  cmd->callback([o] {
    const report::Result r = report::render(*o);
    std::printf("wrote %s\n", r.markdown.c_str());
    for (const auto& p : r.pngs) std::printf("wrote %s\n", p.c_str());
    if (!r.plots_note.empty()) std::printf("%s\n", r.plots_note.c_str());
  });
}

}  // namespace wd::cli
