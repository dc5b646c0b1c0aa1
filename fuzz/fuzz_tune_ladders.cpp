// libFuzzer target: a tune's ladders (parse_tune_ladders, what `warpdecode
// crossover-merge` reads) on arbitrary bytes, and the entries they give. Any
// input must end in ladders or wd::FormatError. Every parsed ladder must give
// its entries without an exception (the parser admits only ladders whose
// times the rule needs), each crossover and W8A16 start one of the ladder's
// batches, 1 (a format warp decode does not stream) or -1 (never); a ladder
// merged with itself (best_of_rounds) must be itself; and the entries must
// survive a crossover table's JSON round trip. A crash, a sanitizer report,
// another exception type or a failed check (abort) is a finding.
//
// Build and smoke run: tests/model/CMakeLists.txt (ctest -R fuzz).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "warpdecode/dispatch_rules.h"
#include "warpdecode/error.h"
#include "warpdecode/tune_ladder.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool on_ladder(const wd::TuneLadder& l, int b) {
  return b == wd::CrossoverEntry::kNever || b == 1 || std::find(l.batches.begin(), l.batches.end(), b) != l.batches.end();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<wd::TuneLadder> ladders;
  try {
    ladders = wd::parse_tune_ladders(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const wd::FormatError&) {
    return 0;  // the expected outcome for malformed input
  }
  wd::CrossoverTable table;
  for (const wd::TuneLadder& l : ladders) {
    const std::vector<wd::CrossoverEntry> entries = wd::crossover_entries(l);
    check(!entries.empty());
    for (const wd::CrossoverEntry& e : entries) {
      check(on_ladder(l, e.crossover) && on_ladder(l, e.w8a16_from));
      check(e.untiled == l.tiled_only && e.format == l.format);
      // The printed line ends in the entry's own crossover.
      const std::string line = wd::crossover_line(e);
      const std::string tail = e.crossover == wd::CrossoverEntry::kNever ? ": never (warp decode at every B measured)"
                                                                         : ": B >= " + std::to_string(e.crossover);
      check(line.size() > tail.size() && line.compare(line.size() - tail.size(), tail.size(), tail) == 0);
      table.set(e);
    }
    const wd::TuneLadder same = wd::best_of_rounds({l, l});
    check(same.warp_us == l.warp_us && same.warp_tiled_us == l.warp_tiled_us &&
          same.classical_us == l.classical_us && same.w8a16_us == l.w8a16_us);
  }
  const wd::CrossoverTable u = wd::CrossoverTable::parse(table.to_json(), "round trip");
  check(u.entries().size() == table.entries().size());
  return 0;
}
