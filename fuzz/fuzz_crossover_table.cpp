// libFuzzer target: the crossover table (CrossoverTable::parse, what
// `WD_MOE_CROSSOVER=file` and `warpdecode dispatch --table` read) on
// arbitrary bytes. Any input must end in a table or wd::FormatError; an
// accepted table must answer every lookup with -1 (never) or a batch >= 1,
// give every dispatch decision without an exception other than the
// documented refusals, and survive its own JSON round trip unchanged. A
// crash, a sanitizer report (a division by zero, an int overflow), another
// exception type or a failed check (abort) is a finding.
//
// Build and smoke run: tests/model/CMakeLists.txt (ctest -R fuzz).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "warpdecode/dispatch_rules.h"
#include "warpdecode/error.h"
#include "warpdecode/layout.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const wd::CrossoverEntry& a, const wd::CrossoverEntry& b) {
  return a.preset == b.preset && a.hidden == b.hidden && a.intermediate == b.intermediate &&
         a.experts == b.experts && a.top_k == b.top_k && a.format == b.format && a.crossover == b.crossover &&
         a.bf16_activations == b.bf16_activations && a.w8a16_from == b.w8a16_from && a.tiled_warp == b.tiled_warp &&
         a.untiled == b.untiled && a.classical_reads_tiled == b.classical_reads_tiled;
}

bool batch_or_never(int b) { return b == wd::CrossoverEntry::kNever || b >= 1; }

// Shapes the lookups run on: the presets (measured or scaled) and two
// extremes of tokens per expert.
wd::MoeShape odd_shape(int experts, int top_k) {
  wd::MoeShape s = wd::preset_shape("tiny");
  s.experts = experts;
  s.top_k = top_k;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wd::CrossoverTable t;
  try {
    t = wd::CrossoverTable::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const wd::FormatError&) {
    return 0;  // the expected outcome for malformed input
  }
  const wd::MoeShape shapes[] = {wd::preset_shape("qwen3-30b-a3b"), wd::preset_shape("qwen3-235b-a22b"),
                                 wd::preset_shape("qwen3-coder-480b-a35b"), odd_shape(1 << 16, 1),
                                 odd_shape(16, 16)};
  for (const wd::MoeShape& s : shapes)
    for (wd::WeightFormat f : wd::kWeightFormats) {
      for (bool a16 : {false, true})
        for (bool tiled : {false, true})
          for (bool untiled : {false, true})
            for (bool reads_tiled : {false, true})
              check(batch_or_never(t.crossover(s, f, a16, tiled, untiled, reads_tiled)));
      check(batch_or_never(t.w8a16_from(s, f)));
      for (int batch : {1, 64, 4096})
        for (auto policy : {wd::DispatchPolicy::kFastest, wd::DispatchPolicy::kBf16Activations})
          for (auto copies : {wd::WeightCopies::kCanonical, wd::WeightCopies::kCanonicalAndTiled,
                              wd::WeightCopies::kTiledOnly}) {
            for (auto takes : {wd::TiledOnlyClassical::kNot, wd::TiledOnlyClassical::kReadsTiled,
                               wd::TiledOnlyClassical::kUntiles})
              try {
                wd::choose_path(t, s, f, batch, 256, policy, true, copies, takes);
              } catch (const wd::InvalidArgument&) {
                // A documented refusal (a batch past warp decode's maximum).
              }
            (void)wd::dispatch_classical_config(t, s, f, batch, policy, true, copies);
          }
    }
  // The round trip: what to_json writes parses back to the same entries.
  const wd::CrossoverTable u = wd::CrossoverTable::parse(t.to_json(), "round trip");
  check(u.entries().size() == t.entries().size());
  for (size_t i = 0; i < t.entries().size(); ++i) check(same(t.entries()[i], u.entries()[i]));
  return 0;
}
