// warpdecode dispatch: the path MoeDispatch takes for each batch (warp decode
// or the classical path, and the classical configuration), from the crossover
// table it would load, for a shape, weight formats, uploads and a policy.
// Pure host logic (choose_path, dispatch_classical_config, and in a CUDA
// build WarpDecodeMoe::largest_batch): no GPU needed.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels/classical_fits.h"
#include "tools/warpdecode/batch_list.h"
#include "tools/warpdecode/commands.h"
#include "tools/warpdecode/shape_options.h"
#include "warpdecode/error.h"
#include "warpdecode/dispatch_rules.h"
#if defined(WD_HAVE_CUDA)
#include "warpdecode/warp_decode.h"
#endif

namespace wd::cli {
namespace {

// The largest batch MoeDispatch's warp decode object takes on `shape`:
// MoeDispatch sizes it min(max_batch, WarpDecodeMoe::largest_batch(shape)),
// below kWarpDecodeMaxBatch where a gate_up block's B·K routing entries
// outgrow its shared memory (3200 at K = 16). Host-only, and the same for
// every card (the card moves only the tiled gate_up's two-tile start, which
// the check does not take). A build without CUDA has no kernels to ask: 4096.
int warp_decode_largest_batch(const MoeShape& shape) {
#if defined(WD_HAVE_CUDA)
  return WarpDecodeMoe::largest_batch(shape);
#else
  (void)shape;
  return kWarpDecodeMaxBatch;
#endif
}

struct DispatchOptions {
  ShapeOptions shape;
  std::vector<std::string> formats{"bf16", "mxfp8"};
  std::vector<int> batches{1, 8, 16, 32, 48, 64, 65, 72, 80, 96, 128, 256, 1024, 4096};
  std::vector<std::string> uploads{"default", "tiled", "tiled-only", "untiled"};
  std::string policy = "fastest";
  std::string table;  // empty: $WD_MOE_CROSSOVER, else the built-in table
  int max_batch = 4096;
  std::string sm90a = "auto";
  std::string card = "auto";  // whose built-in table, without --table or $WD_MOE_CROSSOVER
};

void run(const DispatchOptions& o) {
  const MoeShape shape = o.shape.resolve();
  std::vector<WeightFormat> formats;
  for (const auto& f : o.formats) formats.push_back(parse_weight_format(f));
  // "untiled": tiled-only weights that the dispatch un-tiles for the
  // classical path (MoeDispatch::untile_tiled_only).
  struct Upload {
    WeightCopies copies;
    bool untile;
    const char* name;
  };
  std::vector<Upload> uploads;
  for (const auto& u : o.uploads) {
    const auto known = {WeightCopies::kCanonical, WeightCopies::kCanonicalAndTiled, WeightCopies::kTiledOnly};
    const auto it = std::find_if(known.begin(), known.end(), [&](WeightCopies c) { return u == to_string(c); });
    WD_CHECK(it != known.end() || u == "untiled", "--upload '", u, "': expected default, tiled, tiled-only or untiled");
    uploads.push_back(it != known.end() ? Upload{*it, false, to_string(*it)}
                                        : Upload{WeightCopies::kTiledOnly, true, "untiled"});
  }
  WD_CHECK(o.policy == "fastest" || o.policy == "bf16-activations", "--policy '", o.policy,
           "': expected fastest or bf16-activations");
  const DispatchPolicy policy = o.policy == "fastest" ? DispatchPolicy::kFastest : DispatchPolicy::kBf16Activations;
  WD_CHECK(o.sm90a == "auto" || o.sm90a == "yes" || o.sm90a == "no", "--sm90a '", o.sm90a,
           "': expected auto, yes or no");
  WD_CHECK(o.max_batch >= 1, "--max-batch ", o.max_batch, " must be >= 1");
  const bool sm90a = o.sm90a == "auto" ? kernels::wgmma_available() : o.sm90a == "yes";
  WD_CHECK(o.card == "auto" || o.card == "h100" || o.card == "h200", "--card '", o.card,
           "': expected auto, h100 or h200");
  const TableCard card = o.card == "auto"   ? kernels::device_table_card()
                         : o.card == "h100" ? TableCard::kH100
                                            : TableCard::kH200;
  const CrossoverTable table = o.table.empty() ? CrossoverTable::from_environment(card) : CrossoverTable::load(o.table);
  if (o.card == "auto")
    if (const std::string n = unmeasured_card_note(kernels::device_name()); !n.empty()) std::printf("# note: %s\n", n.c_str());
  const int warp_max = std::min(o.max_batch, warp_decode_largest_batch(shape));

  std::printf("# crossover table: %s | sm_90a classical kernels: %s%s | policy %s | warp decode up to B = %d, "
              "the classical path up to B = %d (--max-batch)\n",
              table.source().c_str(), sm90a ? "yes" : "no", o.sm90a == "auto" ? " (this machine)" : " (--sm90a)",
              to_string(policy), warp_max, o.max_batch);
  std::printf("# upload: default = DeviceWeightsOptions{}; tiled = tiled_beside_canonical(), whose warp decode "
              "streams the tiled copies; tiled-only = tiled_only(): warp decode alone reads them; untiled = "
              "tiled_only() with MoeDispatch::untile_tiled_only(): the classical path on them un-tiled (on sm_90a the "
              "classical path reads tiled-only weights as they are: BF16, MXFP8 in W8A16)\n");
  std::printf("%-22s %-13s %-10s %9s %5s  %-10s %s\n", "shape", "format", "upload", "crossover", "B", "path",
              "classical configuration");
  for (WeightFormat f : formats)
    for (const Upload& up : uploads) {
      // Tiled-only weights: the classical path takes them where it reads them
      // as they are (BF16, MXFP8 in W8A16, on sm_90a; a held scratch is left
      // unused) or from the scratch ("untiled"), from the table's tiled-only
      // crossover on (MoeDispatch::choose).
      const bool direct = up.copies == WeightCopies::kTiledOnly && classical_reads_tiled_only(shape, f, sm90a);
      const bool untile = up.untile || direct;  // the classical path takes tiled-only weights
      const TiledOnlyClassical takes = tiled_only_classical(direct, up.untile);
      const WeightCopies u = up.copies;
      // FP8 block-128: warp decode does not stream it, so no crossover and no tiled copies.
      const bool warp_format = warp_decode_streams(f);
      if (u != WeightCopies::kCanonical && !warp_format) continue;
      const bool a16_entry = policy == DispatchPolicy::kBf16Activations && f == WeightFormat::kMXFP8;
      const int c = table.crossover(shape, f, a16_entry, u != WeightCopies::kCanonical, untile, direct);
      // "none": no batch of this row reaches the classical path through the
      // crossover (tiled-only weights nothing else reads, a shape the
      // classical path does not take, or W8A16 that the device does not run
      // under the bf16-activations policy).
      const bool a16_runs = std::any_of(o.batches.begin(), o.batches.end(),
                                        [&](int B) { return B >= 1 && w8a16_runs(shape, f, B, sm90a); });
      const bool switches = (u != WeightCopies::kTiledOnly || untile) && classical_takes_shape(shape, f) &&
                            (!a16_entry || a16_runs);
      const std::string cross = !warp_format                ? "-"
                                : !switches                  ? "none"
                                : c == CrossoverEntry::kNever ? "never"
                                                             : std::to_string(c);
      for (int B : o.batches) {
        std::string path, config = "-";
        try {
          // MoeDispatch sizes both paths for max_batch: a larger batch is
          // refused whichever path the rule picks.
          WD_CHECK(B <= o.max_batch, "batch = ", B, " is past --max-batch = ", o.max_batch,
                   " (MoeDispatch refuses it on either path)");
          const bool w8a16 = w8a16_runs(shape, f, B, sm90a);
          const MoePath p = choose_path(table, shape, f, B, warp_max, policy, w8a16, u, takes);
          path = to_string(p);
          if (p == MoePath::kClassical) {
            config = dispatch_classical_config(table, shape, f, B, policy, sm90a, up.copies).label();
            if (direct) config += " (reads the tiled copies)";
            else if (untile) config = "untile + " + config;
          } else if (u == WeightCopies::kTiledOnly && !untile &&
                     choose_path(table, shape, f, B, warp_max, policy, w8a16, WeightCopies::kCanonicalAndTiled) ==
                         MoePath::kClassical) {
            // Past the crossover of the same weights kept beside the canonical
            // tensors: warp decode only because nothing else reads them
            // (slower there: docs/CLASSICAL.md "Dispatch").
            config = "(the classical path cannot read tiled-only weights)";
          }
        } catch (const InvalidArgument& e) {
          path = "refused";
          config = e.what();
        }
        std::printf("%-22s %-13s %-10s %9s %5d  %-10s %s\n", o.shape.label().c_str(), to_string(f), up.name,
                    cross.c_str(), B, path.c_str(), config.c_str());
      }
    }
}

}  // namespace

void add_dispatch(CLI::App& app) {
  auto o = std::make_shared<DispatchOptions>();
  auto* cmd = app.add_subcommand(
      "dispatch", "Show the path MoeDispatch takes for each batch (warp decode or the classical path) from its crossover table");
  o->shape.add_to(cmd);
  cmd->add_option("--format", o->formats, "Weight formats: bf16, mxfp8, fp8-block128")->delimiter(',')->capture_default_str();
  // Past warp decode's maximum (4096) too: rows past it show the rule for a
  // larger --max-batch.
  add_batch_list(cmd, "--batch,-b", o->batches, "Batch sizes", 1 << 20);
  cmd->add_option("--upload", o->uploads,
                  "Uploads: default (DeviceWeightsOptions{}), tiled (tiled_beside_canonical(): warp decode on the tiled "
                  "copies), tiled-only (tiled_only(): warp decode alone), untiled (tiled_only() with "
                  "MoeDispatch::untile_tiled_only(): the classical path un-tiles them)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--policy", o->policy, "Dispatch policy: fastest or bf16-activations")->capture_default_str();
  cmd->add_option("--table", o->table,
                  "Crossover table file (bench-moe --tune); default: $WD_MOE_CROSSOVER, else the --card's built-in table");
  cmd->add_option("--card", o->card,
                  "Whose built-in table: auto (this machine's GPU: the H100's on an H100, else the H200's), h100, h200")
      ->capture_default_str();
  cmd->add_option("--max-batch", o->max_batch, "The MoeDispatch object's max_batch")->capture_default_str();
  cmd->add_option("--sm90a", o->sm90a,
                  "Whether the device runs the sm_90a classical kernels (W8A16, the TMA tiles): auto (this machine), yes, no")
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace wd::cli
