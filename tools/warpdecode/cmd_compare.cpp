// warpdecode compare: bench-moe JSON files of several binaries, from one
// device call, side by side (src/accuracy/compare.h).
#include <algorithm>
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
  // One comma-separated string, split here: a vector option would take the
  // inputs that follow it as more stage names.
  auto stages = std::make_shared<std::string>();
  cmd->add_option("--stages", *stages, "Stages beside the layer (e.g. gate_up_gemm,down_gemm or moe_gate_up,moe_down)");
  cmd->callback([files, opt, stages] {
    for (size_t at = 0; at < stages->size();) {
      const size_t end = std::min(stages->find(',', at), stages->size());
      if (end > at) opt->stages.push_back(stages->substr(at, end - at));
      at = end + 1;
    }
    std::vector<report::CompareInput> inputs;
    for (const std::string& a : *files) {
      const auto [label, path] = report::parse_labelled_file(a);
      inputs.push_back({label, report::read_json(path)});
    }
    std::fputs(report::compare_table(inputs, *opt).c_str(), stdout);
  });
}

}  // namespace wd::cli
