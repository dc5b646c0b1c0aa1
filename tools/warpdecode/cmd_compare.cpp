// warpdecode compare: bench-moe JSON files of several binaries, from one
// device call, side by side (src/accuracy/compare.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/compare.h"
#include "accuracy/report.h"
#include "tools/warpdecode/commands.h"

namespace wd::cli {

void add_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare", "Versions side by side from bench-moe JSON of one run: LABEL=FILE ..., a label repeated for rounds");
  auto files = std::make_shared<std::vector<std::string>>();
  auto opt = std::make_shared<report::CompareOptions>();
  cmd->add_option("inputs", *files, "LABEL=FILE (bench-moe --json); the first label is the baseline")->required();
  // One argument a flag (comma-separated): without allow_extra_args(false)
  // the inputs that follow would be taken as more stage names.
  cmd->add_option("--stages", opt->stages, "Stages beside the layer (e.g. gate_up_gemm,down_gemm or moe_gate_up,moe_down)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->callback([files, opt] {
    std::vector<report::CompareInput> inputs;
    for (const std::string& a : *files) {
      const auto [label, path] = report::parse_labelled_file(a);
      inputs.push_back({label, report::read_json(path)});
    }
    std::fputs(report::compare_table(inputs, *opt).c_str(), stdout);
  });
}

}  // namespace wd::cli
