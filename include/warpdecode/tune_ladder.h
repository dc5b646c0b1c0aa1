// A crossover tune's measurements and the table entries they give. `bench-moe
// --tune` and `--tune-untiled` time warp decode and the classical path at each
// batch of a ladder and write each (preset, format) as one "ladders" record
// beside the entries; `warpdecode crossover-merge` reads those records back,
// combines rounds of the same ladder point by point, and derives the entries
// again with the same rule. Host logic only (every build).
#pragma once

#include <string>
#include <vector>

#include "warpdecode/dispatch_rules.h"
#include "warpdecode/layout.h"

namespace wd {

// One (preset, format) ladder of a tune. Every time vector is empty or holds
// one median (µs per MoE layer, router excluded) per batch.
struct TuneLadder {
  std::string preset;  // a preset name (preset_shape gives the entries' dimensions)
  WeightFormat format = WeightFormat::kBF16;
  // --tune-untiled: tiled-only weights on both sides (JSON "warp_weights":
  // "tiled-only"); classical_reads_tiled: the classical side read them as
  // they are ("classical_reads": "tiled copies"), else un-tiled first
  // ("un-tiled scratch").
  bool tiled_only = false;
  bool classical_reads_tiled = false;
  std::vector<int> batches;             // ascending
  std::vector<double> warp_us;          // warp decode (--tune: on the default upload); empty: the format has none
  std::vector<double> warp_tiled_us;    // --tune: warp decode on the tiled copies; empty where the format has none
  std::vector<double> classical_us;     // the classical path's default configuration (--tune-untiled: kFastest's)
  std::vector<double> w8a16_us;         // the classical path in W8A16 (MXFP8 on sm_90a); empty where not run

  // "<preset> <format>" and, for tiled-only ladders, how the classical side
  // read them: the ladder's kind, which rounds of it share.
  std::string kind() const;
};

// The entries a ladder gives, each by crossover_from_ladder:
//   --tune        warp decode (default upload; and the tiled copies where
//                 measured) against the default classical configuration, and
//                 against W8A16 where measured ("activations": "bf16",
//                 w8a16_from = where W8A16 beats the default configuration).
//                 A format warp decode does not stream: crossover 1.
//   --tune-untiled  warp decode on the tiled-only weights against the
//                 classical path on them (and in W8A16 where measured).
// Throws wd::InvalidArgument when a time vector's length is not the ladder's,
// a time the ladder's entries need is missing, or the preset is not built in.
std::vector<CrossoverEntry> crossover_entries(const TuneLadder& ladder);

// The key of a ladder record that holds the entry's crossover: "crossover",
// "tiled_crossover", "w8a16_crossover" or "tiled_w8a16_crossover" (tiled-only
// ladders: "crossover" or "w8a16_crossover"; all their entries are tiled).
const char* ladder_field(const CrossoverEntry& e);
// "<preset> <format>[ W8A16][ (what warp decode or the classical side read)]:
// B >= <crossover>" or ": never (warp decode at every B measured)", the line
// a tune prints for the entry.
std::string crossover_line(const CrossoverEntry& e);

// Rounds of one ladder (same kind and batches) as one: at every batch each
// path's smallest median over the rounds (a round is slowed, never sped up,
// by clocks and neighbours on a shared card). Throws wd::InvalidArgument for
// no rounds, or rounds of different kinds, batches or measured paths.
TuneLadder best_of_rounds(const std::vector<TuneLadder>& rounds);

// The "ladders" records of a tune's JSON text, in file order. Throws
// wd::FormatError naming `source`, the ladder and the field when one is
// malformed (a missing time, a preset that is not built in, a ladder that
// does not ascend).
std::vector<TuneLadder> parse_tune_ladders(const std::string& json_text, const std::string& source);

}  // namespace wd
