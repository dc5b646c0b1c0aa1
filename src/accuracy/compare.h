// `warpdecode compare`: versions of the code side by side, from the
// bench-moe JSON files of one device call (docs/PERF_LOG.md's A/B rows; the
// house rule: compare versions in one run, the machines are shared).
//
// Each input is a label and a document. A label given more than once is
// rounds of one binary, interleaved with the others' (old, new, old, new):
// each figure is the minimum over the label's rounds of the median, since a
// shared machine's noise only ever adds time. The first label is the
// baseline; every other label's figures carry their change against it.
// Records pair by (preset, format, batch, path, config); a figure a label
// lacks is "-".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace wd::report {

struct CompareInput {
  std::string label;
  nlohmann::json doc;  // a bench-moe --json document
};

struct CompareOptions {
  // Stages (bench-moe --stages names: gate_up_gemm, down_gemm, moe_gate_up,
  // ...) shown beside the layer, in this order.
  std::vector<std::string> stages;
};

// "LABEL=FILE" -> (label, file). Throws wd::InvalidArgument when either
// side is empty or there is no '='.
std::pair<std::string, std::string> parse_labelled_file(const std::string& arg);

// The Markdown: one line per label (commits, read ceilings and rounds seen),
// then the table. Throws wd::InvalidArgument without inputs or when no
// input has a record.
std::string compare_table(const std::vector<CompareInput>& inputs, const CompareOptions& opt);

}  // namespace wd::report
