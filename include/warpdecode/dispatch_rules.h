// The dispatch's rules, host logic only (no CUDA: in every build, so that
// `warpdecode dispatch` and the table's tests need no CUDA toolkit): the
// crossover table measured by `bench-moe --tune`, the path a call takes and
// the classical configuration it runs. MoeDispatch (warpdecode/
// moe_dispatch.h, which describes the dispatch) applies them on the device.
#pragma once

#include <string>
#include <vector>

#include "warpdecode/card.h"
#include "warpdecode/classical_config.h"
#include "warpdecode/layout.h"

namespace wd {

enum class MoePath { kWarp, kClassical };
const char* to_string(MoePath p);  // "warp", "classical"

// What the dispatch may trade for speed.
//   kFastest          the crossover decides for every format (issue 4's
//                     dispatch; the default); on the classical side MXFP8
//                     runs W8A16 from the table's w8a16_from on (measured
//                     faster than W8A8 there, and BF16 activations), W8A8
//                     below it.
//   kBf16Activations  never quantize activations where warp decode can run
//                     the format: MXFP8 runs warp decode, or the classical
//                     path in W8A16 from that pairing's crossover where the
//                     device runs it (sm_90a); otherwise a batch past warp
//                     decode's maximum is refused, not quantized.
//                     BF16 is unaffected (both paths keep BF16 activations);
//                     FP8 block-128 has only the W8A8 path.
enum class DispatchPolicy { kFastest, kBf16Activations };
const char* to_string(DispatchPolicy p);  // "fastest", "bf16-activations"

struct CrossoverEntry {
  std::string preset;  // informative; lookups use the dimensions
  int hidden = 0, intermediate = 0, experts = 0, top_k = 0;
  WeightFormat format = WeightFormat::kBF16;
  int crossover = 0;   // classical from this batch on; kNever: warp decode at every measured batch
  // The classical side ran W8A16 (MXFP8, ClassicalConfig::bf16_activations):
  // the crossover DispatchPolicy::kBf16Activations uses. JSON "activations":
  // "bf16" (absent: the default classical configuration).
  bool bf16_activations = false;
  static constexpr int kNever = -1;
  // W8A16 entries: the batch from which W8A16 beats the default (W8A8)
  // classical configuration by the same rule (crossover_from_ladder);
  // kFastest runs W8A16 there (JSON "w8a16_from", absent: never).
  int w8a16_from = kNever;
  // The warp-decode side streamed the tiled copies of both GEMMs' weights
  // (weights that hold gate_up_tiled: DeviceWeightsOptions::tiled_beside_canonical(),
  // tiled_only()): on qwen3-30b-a3b 5-21 % (MXFP8) and 7-10 % (BF16)
  // faster than on the default upload (PERF_LOG session 45), so its
  // crossover is its own. JSON "warp_weights":
  // "tiled" (absent: "default").
  bool tiled_warp = false;
  // Tiled-only weights (tiled_warp too): warp decode on the tiled copies
  // against the classical path on the same weights. JSON "warp_weights":
  // "tiled-only".
  bool untiled = false;
  // Tiled-only entries: how the classical side took the weights. true: it
  // read them as they are (classical_reads_tiled_only: BF16, and MXFP8 in
  // W8A16, on sm_90a; JSON "classical_reads": "tiled"); false: from the
  // canonical tensors un-tiled first (UntiledWeights,
  // MoeDispatch::untile_tiled_only), its time including the un-tiling
  // ("untiled", the default). The two are their own kinds: the un-tiling
  // costs a read and a write of the layer (2.2x the classical path's time
  // on qwen3-30b-a3b BF16 at 2048 tokens), so their crossovers differ
  // (H200: MXFP8 80 against 384 on qwen3-30b-a3b).
  bool classical_reads_tiled = false;
};

// How the classical path takes tiled-only weights (WeightCopies::kTiledOnly)
// in a call, which picks the table's tiled-only entries of that kind:
//   kNot          it does not (no un-tiling scratch and not read as they
//                 are): warp decode alone, refused past its maximum
//   kReadsTiled   read as they are (classical_reads_tiled_only)
//   kUntiles      from the dispatch's un-tiling scratch
//                 (MoeDispatch::untile_tiled_only)
enum class TiledOnlyClassical { kNot, kReadsTiled, kUntiles };
// The kind a call takes: read as they are where the classical path does
// (classical_reads_tiled_only; a held scratch then goes unused), else from
// an un-tiling scratch of the format where one is held, else kNot.
inline TiledOnlyClassical tiled_only_classical(bool reads_tiled, bool has_scratch) {
  return reads_tiled ? TiledOnlyClassical::kReadsTiled
         : has_scratch ? TiledOnlyClassical::kUntiles
                       : TiledOnlyClassical::kNot;
}

// The crossover a measured ladder gives: the smallest batch from which the
// classical path is faster at every larger batch measured, by at least
// kCrossoverMargin (classical_us < (1 − margin) · warp_us). A tie within the
// margin stays with warp decode, which is batch-invariant and keeps FP32
// intermediates: measurement noise must not move the switch (session 12's
// tune had qwen3-30b-a3b BF16 within ±0.4 % from B = 24 to 48). ladder
// ascending; warp_us[i], classical_us[i] measured at ladder[i]. Returns
// CrossoverEntry::kNever when the classical path does not win at the largest
// batch. Throws wd::InvalidArgument for an empty ladder or mismatched sizes.
constexpr double kCrossoverMargin = 0.02;
int crossover_from_ladder(const std::vector<int>& ladder, const std::vector<double>& warp_us,
                          const std::vector<double>& classical_us, double margin = kCrossoverMargin);

class CrossoverTable {
 public:
  // The measurement compiled in for a card. kH200: the H200's. kH100: the
  // H100's entries over the H200's, each replacing the H200 entry of its
  // kind (set()); kinds measured on the H200 alone (the tiled-only entries
  // un-tiled first, which sm_90a does not use) stay the H200's.
  static CrossoverTable built_in(TableCard card = TableCard::kH200);
  // A file written by `bench-moe --tune`. Throws wd::FormatError when
  // malformed: not JSON, no "entries" array, a field missing, of the wrong
  // type (a float where an integer belongs) or out of range (a shape
  // dimension < 1 or past 2^20, top_k past experts, a batch other than -1 or
  // 1 .. 2^24), naming the entry and the field.
  static CrossoverTable load(const std::string& path);
  // The same from the file's text; `source` names it in errors and source().
  static CrossoverTable parse(const std::string& json_text, const std::string& source);
  // $WD_MOE_CROSSOVER when set (a file as above), else built_in(card).
  static CrossoverTable from_environment(TableCard card = TableCard::kH200);

  // Replaces the entry of the same shape, format, activations, warp weights
  // and (tiled-only entries) classical read.
  void set(const CrossoverEntry& e);
  const std::vector<CrossoverEntry>& entries() const { return entries_; }
  const std::string& source() const { return source_; }

  // The batch from which the classical path runs: the entry of this shape and
  // format if there is one; otherwise the table's measured crossovers for this
  // format scaled to the shape by tokens per expert (B·K/E), the quantity
  // that decides which path wins.
  // bf16_activations: the W8A16 entries (CrossoverEntry::bf16_activations).
  // tiled_warp: warp decode streams tiled copies (CrossoverEntry::tiled_warp):
  // the tiled entry of this very shape; without one, the default upload's
  // lookup above. Tiled entries are not scaled to other shapes: the default
  // entry measured on a shape beats a guess from other shapes, and it errs
  // towards the classical path (on the default upload warp decode is slower),
  // which costs speed, never accuracy or correctness.
  // untiled: tiled-only weights that the classical path takes
  // (CrossoverEntry::untiled), reading them as they are
  // (classical_reads_tiled) or un-tiled first: the shape's own entry of
  // that kind, else the entries of that kind scaled by tokens per expert as
  // above (the un-tiling and both paths scale with the layer's bytes), else
  // kNever. A table with no entry read as they are (tuned before the
  // classical path read them) gives the un-tiled ones for them: a bound from
  // above, as the un-tiling only adds to the classical side.
  int crossover(const MoeShape& s, WeightFormat f, bool bf16_activations = false, bool tiled_warp = false,
                bool untiled = false, bool classical_reads_tiled = false) const;
  // The W8A16 entry's w8a16_from for this shape and format, scaled the same
  // way for unmeasured shapes; kNever without one. (W8A16 against W8A8: both
  // classical, whatever warp decode streams; the default-upload entry's.)
  int w8a16_from(const MoeShape& s, WeightFormat f) const;

  // JSON text of the table (what load() reads; bench-moe --tune adds its
  // measurements beside the entries).
  std::string to_json() const;

 private:
  std::vector<CrossoverEntry> entries_;
  std::string source_ = "empty";
};

// The copies of the expert weights a call's weights hold: which of the
// table's entries apply and which paths can read them.
//   kCanonical          the default upload (DeviceWeightsOptions{}): both
//                       paths read the canonical tensors.
//   kCanonicalAndTiled  tiled copies beside the canonical tensors
//                       (tiled_beside_canonical(), or MXFP8's tiled gate_up
//                       alone): warp decode streams the tiled copies (the
//                       table's tiled entries), the classical path the
//                       canonical tensors.
//   kTiledOnly          tiled_only(): warp decode reads them, and the
//                       classical path where it reads them as they are
//                       (BF16, and MXFP8 in W8A16, on sm_90a) or the
//                       dispatch un-tiles them
//                       (MoeDispatch::untile_tiled_only).
enum class WeightCopies { kCanonical, kCanonicalAndTiled, kTiledOnly };
const char* to_string(WeightCopies c);  // "default", "tiled", "tiled-only" (warpdecode dispatch's --upload)
WeightCopies weight_copies(const MoeWeightsView& w);

// The path of a call: pure host logic, the rule MoeDispatch::choose applies
// (warp_max_batch: the largest batch its warp-decode layer takes; w8a16:
// whether the classical path runs W8A16 for this shape and device; copies:
// what the weights hold, which picks the table's tiled entries for tiled
// copies, and warp decode at every batch up to warp_max_batch for tiled-only
// weights; tiled_only: how the classical path takes tiled-only weights of
// this format, from the table's tiled-only crossover of that kind on, and
// past warp_max_batch; ignored for the other copies). Throws
// wd::InvalidArgument for a batch < 1, for an MXFP8 batch past
// warp_max_batch under kBf16Activations that W8A16 does not take or on a
// shape the classical path does not take (H or I not a multiple of 128:
// warp decode at every batch up to warp_max_batch), and for tiled-only
// weights past warp_max_batch that the classical path does not take (kNot).
MoePath choose_path(const CrossoverTable& table, const MoeShape& shape, WeightFormat f, int batch,
                    int warp_max_batch, DispatchPolicy policy, bool w8a16 = false,
                    WeightCopies copies = WeightCopies::kCanonical,
                    TiledOnlyClassical tiled_only = TiledOnlyClassical::kNot);

// Whether warp decode streams weights of this format (BF16, MXFP8); the
// others (FP8 block-128) always run the classical path.
inline bool warp_decode_streams(WeightFormat f) { return f == WeightFormat::kBF16 || f == WeightFormat::kMXFP8; }

// Whether the classical path takes weights of this format on this shape:
// BF16 on any; FP8 block-128 and MXFP8 (W8A8 and W8A16 alike) where H and I
// are multiples of 128 (W8A8's activation groups, block-128's scale blocks).
bool classical_takes_shape(const MoeShape& shape, WeightFormat f);

// Whether the classical path runs W8A16 (MXFP8 weights decoded to BF16,
// BF16 activations) for this shape and batch on a device with the sm_90a
// kernels (sm90a) or without: choose_path's w8a16, as MoeDispatch passes it.
bool w8a16_runs(const MoeShape& shape, WeightFormat f, int batch, bool sm90a);

// Whether warp decode streams the tiled copies of these weights (its default
// configuration does wherever the tiled gate_up is present: both copies are
// uploaded together), i.e. whether MoeDispatch uses the table's tiled entries
// for them (weight_copies is not kCanonical).
inline bool warp_streams_tiled(const MoeWeightsView& w) { return w.gate_up_tiled != nullptr; }

// The classical configuration of a call the dispatch sends to the classical
// path (pure host logic; sm90a: the device runs the sm_90a kernels): W8A16
// for MXFP8 under kBf16Activations, and under kFastest from the table's
// w8a16_from on (W8A16 faster than W8A8 there); otherwise
// ClassicalConfig::for_batch's default.
// Tiled-only weights (copies kTiledOnly) that the classical path reads
// as they are: ClassicalConfig::for_tiled_copies (MXFP8: W8A16 under either policy).
ClassicalConfig dispatch_classical_config(const CrossoverTable& table, const MoeShape& shape, WeightFormat f,
                                          int batch, DispatchPolicy policy, bool sm90a,
                                          WeightCopies copies = WeightCopies::kCanonical);

// Whether the classical path reads tiled-only weights of this format and
// shape as they are, on a device with (sm90a) or without the sm_90a kernels:
// BF16, and MXFP8 in W8A16, on the TMA GEMM (ClassicalConfig::reads_tiled).
// MoeDispatch then sends them to it from the table's tiled-only crossover
// on, with no un-tiling; other tiled-only weights need
// MoeDispatch::untile_tiled_only for the classical path.
bool classical_reads_tiled_only(const MoeShape& shape, WeightFormat f, bool sm90a);

}  // namespace wd
