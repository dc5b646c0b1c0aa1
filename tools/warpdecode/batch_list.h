// Batch-size lists on the command line: comma-separated terms, each a size
// (8), a range (1-64) or a range with a step (16-256:16), in the order given.
// `--batch 1-64` times every B up to 64: the ladder 1, 2, 4, … 64 can step
// over a slow batch (PERF_LOG session 27: an 8-way bank conflict at B = 24
// and 56 only).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "warpdecode/error.h"

namespace wd::cli {

constexpr int kMaxCliBatch = 4096;

// A non-negative decimal integer, the whole of s; -1 if s is not one.
inline int parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = 10 * v + (c - '0');
  }
  return v;
}

// The batches the terms name, each in [1, max_size]; throws
// wd::InvalidArgument naming the bad term.
inline std::vector<int> expand_batch_list(const std::vector<std::string>& terms, int max_size = kMaxCliBatch) {
  std::vector<int> out;
  for (const std::string& t : terms) {
    const size_t dash = t.find('-'), colon = t.find(':');
    const std::string lo_s = t.substr(0, dash), hi_s = dash == std::string::npos ? lo_s : t.substr(dash + 1, colon - dash - 1);
    const std::string step_s = colon == std::string::npos ? "1" : t.substr(colon + 1);
    const int lo = parse_count(lo_s), hi = parse_count(hi_s), step = parse_count(step_s);
    WD_CHECK(lo >= 0 && hi >= 0 && step >= 0 && (colon == std::string::npos || dash != std::string::npos),
             "batch '", t, "': expected a size (8), a range (1-64) or a range with a step (16-256:16)");
    WD_CHECK(lo >= 1 && hi <= max_size, "batch '", t, "': sizes must be in [1, ", max_size, "]");
    WD_CHECK(lo <= hi && step >= 1, "batch '", t, "': a range runs upwards with a step of at least 1");
    for (int b = lo; b <= hi; b += step) out.push_back(b);
  }
  WD_CHECK(!out.empty(), "a batch list needs at least one size");
  return out;
}

// `name` as a batch-list option writing `batches` (whose value is the default).
inline CLI::Option* add_batch_list(CLI::App* cmd, const std::string& name, std::vector<int>& batches,
                                   const std::string& what, int max_size = kMaxCliBatch) {
  std::string def;
  for (int b : batches) def += (def.empty() ? "" : ",") + std::to_string(b);
  return cmd
      ->add_option_function<std::vector<std::string>>(
          name, [&batches, max_size](const std::vector<std::string>& terms) {
            batches = expand_batch_list(terms, max_size);
          },
          what + ": sizes, ranges (1-64) and stepped ranges (16-256:16), comma-separated")
      ->delimiter(',')
      ->default_str(def);
}

}  // namespace wd::cli
