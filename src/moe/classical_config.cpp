// The classical path's configuration choice (warpdecode/classical_config.h):
// host logic, in every build (without CUDA, no device runs the sm_90a
// kernels).
#include "warpdecode/classical_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "kernels/classical_fits.h"
#include "moe/classical_rules.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"

namespace wd {

using namespace classical_rules;

namespace {
// Weight-sharing clusters (ClassicalConfig::share_weights): the TMA tile,
// BF16 at T = 144 or FP8 block-128 W8A8 at T = 64 and 80 (the 256-row tiles).
bool share_fits(WeightFormat format, bool bf16_activations, int tile_tokens) {
  return !bf16_activations && ((format == WeightFormat::kBF16 && tile_tokens == 144) ||
                               (format == WeightFormat::kFP8Block128 && (tile_tokens == 64 || tile_tokens == 80)));
}
// The smallest token tile (8 to 128) of at least `want` rows.
int tile_at_least(double want) {
  int t = 8;
  while (t < 128 && t < want) t *= 2;
  return t;
}
// Expected rows an expert pads to with tiles of T rows, its token count c
// ~ Binomial(batch, K/E) taken as a normal (mean m, deviation sd): Σ_j j·T·
// P((j−1)T < c <= jT).
double expected_padded_rows(double m, double sd, int T) {
  auto cdf = [&](double x) {  // P(c <= x), with a continuity correction
    return sd > 0 ? 0.5 * std::erfc(-(x + 0.5 - m) / (sd * std::sqrt(2.0))) : (x >= m ? 1.0 : 0.0);
  };
  double rows = 0;
  for (int j = 1; (j - 1) * T <= m + 8 * sd + T; ++j)
    rows += double(j) * T * (cdf(double(j) * T) - cdf(double(j - 1) * T));
  return rows;
}
// Weight-sharing clusters pair an expert's token tiles (align pads it to a
// multiple of 2T): worth it where that pads at most 5 % more rows than
// tiles of T alone (about two tiles an expert, or an even number).
bool pairing_pads_little(double m, double sd, int T) {
  return expected_padded_rows(m, sd, 2 * T) <= 1.05 * expected_padded_rows(m, sd, T);
}
// The deviation of an expert's token count ~ Binomial(batch, K/E).
double tokens_sd(const MoeShape& s, int batch) {
  const double p = double(s.top_k) / s.experts;
  return std::sqrt(double(batch) * p * (1.0 - p));
}
// BF16 activations (BF16 weights, W8A16): T = 80 instead of T up to m = 64,
// where one 80-row tile holds an expert's m + 2σ tokens, if it pads them to
// fewer rows (1024 tokens on E = 128, K = 8: 82 rows against 128; session 21,
// qwen3-30b-a3b / qwen3-235b-a22b, µs: BF16 418.2 -> 352.2 / 1394.4 ->
// 1257.1, W8A16 365.3 -> 296.3 / 1259.6 -> 1036.3).
int bf16_tile_or_80(double m, double sd, int T) {
  return m <= 64.0 && expected_padded_rows(m, sd, 80) < expected_padded_rows(m, sd, T) ? 80 : T;
}
// BF16 activations at prefill: T = 144 instead of 128 where it pads an
// expert's tokens to fewer rows (2048 and 4096 tokens on E = 128, K = 8:
// one 144-row tile holds 128 ± 2σ tokens and two hold 256 ± 2σ, where
// 128-row tiles take two and three for half the experts: 190 and 318 rows
// an expert against 154 and 291).
int bf16_tile_or_144(double m, double sd, int T) {
  return T == 128 && expected_padded_rows(m, sd, 144) < expected_padded_rows(m, sd, 128) ? 144 : T;
}
}  // namespace

ClassicalConfig ClassicalConfig::for_batch(const MoeShape& s, int batch, WeightFormat format) {
  return for_batch(s, batch, format, kernels::wgmma_available());
}

ClassicalConfig ClassicalConfig::for_batch(const MoeShape& s, int batch, WeightFormat format, bool sm90a,
                                           bool bf16_activations) {
  if (!bf16_activations || format != WeightFormat::kMXFP8 || !sm90a || !tma_fits(s, format))
    return for_batch(s, batch, format, sm90a);
  // W8A16 (session 14 run 4, qwen3-30b-a3b and qwen3-235b-a22b MXFP8): the
  // smallest T >= 2m, as BF16 (B = 1-64: T = 8; 128: 16, 212.6 µs vs 285.0
  // at T = 8 on qwen3-30b-a3b; 1024-4096 tokens: 128, 390.9 vs 403.3 at 64
  // and 934.6 vs 1157.0), then T = 80 or 144 as BF16. T = 144 (session 24
  // run 2, against T = 128 in one binary, µs, qwen3-30b-a3b / qwen3-235b-a22b):
  // 2048 tokens 536.4 -> 474.8 / 1913.8 -> 1525.9, 4096 886.7 -> 799.8 /
  // 3169.4 -> 2792.0 (its two consumer warpgroups of two m64 blocks lose
  // nothing to 128's four of one; the padding they save is the gain).
  // T >= 16 from one token an expert on (m >= 1): with the integer decode
  // (session 25), T = 16 beat T = 8 at every batch measured from 16 to 64
  // (run 4, µs, qwen3-30b-a3b / qwen3-235b-a22b: B = 16 130.3 vs 143.7 /
  // 464.6 vs 495.3, B = 64 186.2 vs 206.8 / 698.3 vs 760.1).
  const double m = double(batch) * s.top_k / s.experts;
  const double sd = tokens_sd(s, batch);
  ClassicalConfig c;
  c.pdl = true;
  c.gemm = ClassicalGemm::kTma;
  const double want = m >= 1.0 ? std::max(2.0 * m, 16.0) : 2.0 * m;
  c.tile_tokens = bf16_tile_or_144(m, sd, bf16_tile_or_80(m, sd, tile_at_least(want)));
  c.bf16_activations = true;
  c.fuse_silu = silu_fuses(s, format, true, c.tile_tokens);
  return c;
}

namespace {
// for_batch (tma_only: for_tiled_copies, never the stream GEMM).
ClassicalConfig choose_config(const MoeShape& s, int batch, WeightFormat format, bool sm90a, bool tma_only) {
  using Self = ClassicalConfig;
  // m = expected tokens per expert under uniform routing.
  const double m = double(batch) * s.top_k / s.experts;
  const bool bf16 = format == WeightFormat::kBF16;
  ClassicalConfig c;
  c.pdl = true;
  if (sm90a && Self::tma_fits(s, format)) {
    // The TMA tile at every batch (session 11 runs 1-2, docs/CLASSICAL.md),
    // with T the smallest power of two >= 2m (most experts one block, the
    // padding at most half the rows), at most 64 for W8A8 (below). Against the
    // stream tile it wins at every B for W8A8 (FP8 block-128 B = 1 25.4 vs
    // 29.3 µs, B = 128 181.1 vs 264.5) and for BF16 on qwen3-235b-a22b (B = 8
    // 480.1 vs 498.6); BF16 experts of up to 2^21 weights a projection
    // (qwen3-30b-a3b) keep the stream tile for 1/8 < m <= 2 (B = 8 133.8 vs
    // 139.9 µs, B = 32 271.0 vs 271.3): there their few, short 256-row
    // tiles (6 + 8 a 2048 × 768 expert) fill 1.4-2 waves of the persistent
    // blocks and the last wave's tail costs more than the deeper loads gain;
    // at B = 1-2 (m <= 1/8) one wave holds them all and the TMA tile wins
    // (runs 2, 5, 7: 34.2-34.5 vs 34.6-35.0 µs at B = 1, 52.3-52.5 vs
    // 53.4-54.0 at B = 2).
    if (bf16 && m > 0.125 && m <= 2.0 && double(s.hidden) * s.intermediate <= double(1 << 21) &&
        Self::stream_fits(s, format) && !tma_only) {
      c.tile_tokens = 8;
      c.gemm = ClassicalGemm::kStream;
      return c;
    }
    // W8A8 stays at T = 64 from m = 32 on: its T = 64 tiles are 256 weight
    // rows (classical_tma_gemm.cu), which beat T = 128 (128 rows) at 1024
    // tokens (session 11: qwen3-30b-a3b FP8 block-128 298.7 µs vs 316.5,
    // MXFP8 540.7 vs 600.1) and at 2048-4096 tokens (session 13 run 3: FP8
    // block-128 4096 696.9 vs 745.4 µs, 2048 408.9 vs 461.0; qwen3-235b-a22b
    // 2226.3 vs 2411.9; MXFP8 −8 % at 2048, −1 to −2 % at 4096). BF16 keeps
    // T = 128 there (1024 tokens: 458.2 µs at 128 vs 481.7 at 64).
    c.tile_tokens = bf16 ? tile_at_least(2.0 * m) : std::min(64, tile_at_least(2.0 * m));
    const double sd = tokens_sd(s, batch);
    // T = 80 (session 21 runs 1-2, µs, qwen3-30b-a3b / qwen3-235b-a22b):
    // * W8A8, where it pads at most 2 % more rows than T = 64 and so takes
    //   fewer tiles: 1024 tokens on E = 128, K = 8 (64 ± 8 tokens an expert:
    //   82 rows in one tile for 98 % of the experts, against 94 rows in 1.5
    //   tiles at T = 64; FP8 block-128 252.3 -> 214.0 / 848.3 -> 695.7, MXFP8
    //   452.1 -> 372.2 / 1598.0 -> 1276.7) and 2048 (160.6 rows in 2.0
    //   tiles against 160.0 in 2.5; 354.4 -> 337.6 / 1234.8 -> 1121.2, MXFP8
    //   746.3 -> 700.4 / 2640.9 -> 2484.7); not 4096 (307 rows against 287:
    //   +1.7 / +0.7 %). Up to m = 128, where it was measured: far above (m
    //   >> 80) both pad about half a tile an expert and the rule alone would
    //   take T = 80 again.
    // * BF16: bf16_tile_or_80.
    if (bf16)
      c.tile_tokens = bf16_tile_or_80(m, sd, c.tile_tokens);
    else if (c.tile_tokens == 64 && m <= 128.0 &&
             expected_padded_rows(m, sd, 80) <= 1.02 * expected_padded_rows(m, sd, 64))
      c.tile_tokens = 80;
    // FP8 block-128 W8A8 at T = 80: weight-sharing clusters where pairing the
    // token tiles pads at most 5 % more rows (2048 tokens on E = 128, K = 8:
    // 128 ± 11 tokens an expert, two 80-row tiles either way). Session 22
    // run 1, µs, against T = 80 alone in one binary: qwen3-30b-a3b 336.7 ->
    // 329.7, qwen3-235b-a22b 1121.0 -> 1060.8. At T = 64 the clusters lost
    // as many rows as pairing padded (4096 tokens, 11 % more rows: 563.6 ->
    // 606.0 and 1865.0 -> 1957.7): not taken there.
    if (format == WeightFormat::kFP8Block128 && c.tile_tokens == 80) c.share_weights = pairing_pads_little(m, sd, 80);
    // FP8 block-128 from m = 128 (2048 tokens on E = 128, K = 8): the
    // token-split T = 128 tile (two consumer warpgroups of 64 tokens against
    // 256 weight rows: −40 % L2 bytes a MAC). Session 36 run 3, against the
    // defaults in one binary, µs, qwen3-30b-a3b / qwen3-235b-a22b: 2048
    // tokens (T = 80 with weight-sharing clusters) 323.5 -> 293.7 / 1044.3
    // -> 979.4, 4096 (T = 64 swapped) 472.1 -> 465.3 / 1650.3 -> 1594.1
    // (gate_up −7.5 / −9.7 %, down +2.6 / level); 1024 (T = 80) +1.6 / +2.2 %:
    // not there.
    if (format == WeightFormat::kFP8Block128 && m >= 128.0) {
      c.tile_tokens = 128;
      c.share_weights = false;
    }
    // BF16 prefill: T = 144 where it pads an expert's tokens to fewer rows
    // than T = 128 (2048 and 4096 tokens on E = 128, K = 8: two 144-row
    // tiles hold 256 ± 2σ tokens, where 128-row ones take three for half
    // the experts: 20 % padding rows against 12 %).
    if (bf16 && c.tile_tokens == 128) {
      c.tile_tokens = bf16_tile_or_144(m, sd, c.tile_tokens);
      // Weight-sharing clusters (an expert's two token tiles against one
      // weight tile) where pairing the tiles pads at most 5 % more rows:
      // about two tiles an expert (4096 tokens on E = 128, K = 8). Session 20
      // runs 1-2: qwen3-30b-a3b 722.0 -> 691.3 µs at 4096 tokens,
      // qwen3-235b-a22b 2487.7 -> 2328.6; at 2048 tokens (one tile an
      // expert, which pairing doubles) 475.3 -> 737.1.
      c.share_weights = c.tile_tokens == 144 && pairing_pads_little(m, sd, 144);
    }
    c.gemm = ClassicalGemm::kTma;
    // BF16: SiLU·up in the gate_up GEMM's epilogue where I % 128 == 0
    // (session 13 run 4, against the separate stage in the same binary:
    // qwen3-30b-a3b 879.6 -> 833.9 µs at 4096 tokens, 597.4 -> 564.0 at
    // 2048, 445.4 -> 441.9 at 1024, 32.2 -> 31.9 at B = 1, 50.8 -> 48.9 at
    // B = 2; qwen3-235b-a22b 3007.7 -> 2865.8 at 4096, 88.4 -> 86.6 at B = 1).
    // W8A8 at T = 64, with h's quantization (session 18 run 2: FP8 block-128
    // qwen3-30b-a3b 294.8 -> 268.8 µs at 1024 tokens, 684.3 -> 629.2 at 4096;
    // qwen3-235b-a22b 957.9 -> 892.7 and 2230.8 -> 2118.3; MXFP8 −2 to −6 %).
    c.fuse_silu = silu_fuses(s, format, false, c.tile_tokens);
    return c;
  }
  // Without the TMA tile (H200 measurements before it, docs/CLASSICAL.md):
  // the stream GEMM at T = 8 beats every shared-memory tile up to m = 8
  // (B = 128 on qwen3-30b-a3b: BF16 369 µs vs 439 for the wgmma T = 64
  // tile; qwen3-235b-a22b FP8 block-128 ties there) and, for MXFP8, up to
  // m = 12 (B = 192: 415 vs 451 µs); above, the wgmma T = 64 tile, then
  // T = 128 from m = 96 (run 2: 617 µs vs 655 at B = 1024). A shape the
  // stream GEMM cannot take runs T = 8 on mma.sync up to m = 4.5 (run 2: 362
  // µs vs 376 at T = 16, B = 64). PDL saves 4-6 µs a layer. BF16 from m = 6
  // to 12: the T = 16 stream tile (run 3 c9: qwen3-30b-a3b B = 128 356.0 µs
  // vs 371.1 at T = 8 and 439.6 on wgmma); for W8A8 its decode costs more
  // than the re-read it saves (B = 128 FP8 block-128 278.6 vs 261.9 at T = 8).
  const double stream_up_to = format == WeightFormat::kMXFP8 ? 12.0 : bf16 ? 6.0 : 8.0;
  if (m <= stream_up_to && Self::stream_fits(s, format)) {
    c.tile_tokens = 8;
    c.gemm = ClassicalGemm::kStream;
  } else if (bf16 && m <= 12.0 && Self::stream_fits(s, format)) {
    c.tile_tokens = 16;
    c.gemm = ClassicalGemm::kStream;
  } else if (m <= 4.5) {
    c.tile_tokens = 8;
  } else if (sm90a) {
    c.tile_tokens = m <= 96 ? 64 : 128;
    c.gemm = ClassicalGemm::kWgmma;
  } else {
    // Elsewhere: T covers an expert's tokens with high probability (mean m,
    // spread ~ sqrt(m)), so that most experts are one block.
    c.tile_tokens = tile_at_least(m + 3.0 * std::sqrt(m) + 1.0);
  }
  return c;
}
}  // namespace

ClassicalConfig ClassicalConfig::for_batch(const MoeShape& s, int batch, WeightFormat format, bool sm90a) {
  return choose_config(s, batch, format, sm90a, false);
}

ClassicalConfig ClassicalConfig::for_tiled_copies(const MoeShape& s, int batch, bool sm90a, WeightFormat format) {
  if (format == WeightFormat::kMXFP8) return for_batch(s, batch, format, sm90a, true);
  return choose_config(s, batch, format, sm90a, true);
}

bool ClassicalConfig::reads_tiled(const MoeShape& s, WeightFormat format) const {
  // The device aside (supports() and run_stage check it): a pure shape rule.
  const bool bf16 = format == WeightFormat::kBF16 && !bf16_activations,
             w8a16 = format == WeightFormat::kMXFP8 && bf16_activations;
  return gemm == ClassicalGemm::kTma && (bf16 || w8a16) && fuse_silu && tile_allowed(tile_tokens) &&
         tma_fits(s, format) && silu_fuses(s, format, bf16_activations, tile_tokens) && down_tiling_fits(s) &&
         gate_up_tiling_fits(s) &&
         kernels::tma_gemm_reads_tiled(format, 2 * s.intermediate, s.hidden, true, bf16_activations) &&
         kernels::tma_gemm_reads_tiled(format, s.hidden, s.intermediate, false, bf16_activations);
}

bool ClassicalConfig::tma_fits(const MoeShape& s, WeightFormat format) {
  return kernels::tma_gemm_fits(format, 2 * s.intermediate, s.hidden) &&
         kernels::tma_gemm_fits(format, s.hidden, s.intermediate);
}

bool ClassicalConfig::stream_fits(const MoeShape& s, WeightFormat format) {
  return kernels::stream_gemm_fits(format, 2 * s.intermediate, s.hidden) &&
         kernels::stream_gemm_fits(format, s.hidden, s.intermediate);
}

bool ClassicalConfig::supports(const MoeShape& s, WeightFormat format) const {
  return supports(s, format, kernels::wgmma_available());
}

bool ClassicalConfig::supports(const MoeShape& s, WeightFormat format, bool sm90a) const {
  if (!tile_allowed(tile_tokens) || (format != WeightFormat::kBF16 && !w8a8_shape_ok(s))) return false;
  if (!w8a16_ok(*this, format)) return false;
  if (fuse_silu && (gemm != ClassicalGemm::kTma || !silu_fuses(s, format, bf16_activations, tile_tokens))) return false;
  if (share_weights && (gemm != ClassicalGemm::kTma || !share_fits(format, bf16_activations, tile_tokens))) return false;
  // T = 80: the TMA tile only.
  if (tile_tokens == 80 && gemm != ClassicalGemm::kTma) return false;
  switch (gemm) {
    case ClassicalGemm::kMmaSync: return tile_tokens <= 128;
    case ClassicalGemm::kWgmma: return (tile_tokens == 64 || tile_tokens == 128) && sm90a;
    case ClassicalGemm::kStream: return (tile_tokens == 8 || tile_tokens == 16) && stream_fits(s, format);
    case ClassicalGemm::kStreamWgmma:
      return tile_tokens == 8 && sm90a &&
             kernels::stream_wgmma_gemm_fits(format, 2 * s.intermediate, s.hidden) &&
             kernels::stream_wgmma_gemm_fits(format, s.hidden, s.intermediate);
    case ClassicalGemm::kTma:
      return sm90a && tma_fits(s, format) &&
             (tile_tokens != 144 || format == WeightFormat::kBF16 || bf16_activations);
  }
  return false;
}

// The BF16 TMA tile gathers its token rows from x up to T = 128 (session 17
// run 1, against the permute stage in the same call, µs: qwen3-30b-a3b B = 1
// 31.0 -> 30.3, 1024 tokens 438.8 -> 423.3; qwen3-235b-a22b B = 1 85.2 ->
// 84.2, 1024 tokens 1425.5 -> 1377.3; level at B = 8-64). Not at T = 144
// (4096 tokens 737 -> 779 and 2486 -> 2702: the gathered tile loses the
// clusters' shared token tile, and L2 bounds those GEMMs) nor W8A16 (12-14 %
// slower at T = 128, run 1), nor W8A8 (session 18 run 4: x quantized once
// per token and gathered at T <= 64, 2-9 % slower at decode batches, 16-20 %
// at 4096 tokens, where the gate_up GEMM lost more than the permute stage
// saved).
bool ClassicalConfig::gathers_rows(WeightFormat format) const {
  return gemm == ClassicalGemm::kTma && format == WeightFormat::kBF16 && !bf16_activations && tile_tokens <= 128;
}

std::vector<ClassicalConfig> ClassicalConfig::candidates() {
  std::vector<ClassicalConfig> v;
  for (bool pdl : {false, true}) {
    for (int t : {8, 16, 32, 64, 128}) v.push_back(ClassicalConfig{t, ClassicalGemm::kMmaSync, pdl});
    for (int t : {64, 128}) v.push_back(ClassicalConfig{t, ClassicalGemm::kWgmma, pdl});
    for (int t : {8, 16}) v.push_back(ClassicalConfig{t, ClassicalGemm::kStream, pdl});
    v.push_back(ClassicalConfig{8, ClassicalGemm::kStreamWgmma, pdl});
    for (int t : kTiles) v.push_back(ClassicalConfig{t, ClassicalGemm::kTma, pdl});
    for (int t : kTiles) v.push_back(ClassicalConfig{t, ClassicalGemm::kTma, pdl, true});
    for (bool fuse : {false, true})
      for (int t : kTiles) v.push_back(ClassicalConfig{t, ClassicalGemm::kTma, pdl, fuse, true});
    for (int t : {64, 80, 144})
      for (bool fuse : {false, true}) v.push_back(ClassicalConfig{t, ClassicalGemm::kTma, pdl, fuse, false, true});
  }
  return v;
}

std::string ClassicalConfig::label() const {
  return "t" + std::to_string(tile_tokens) + (gemm == ClassicalGemm::kMmaSync ? "" : std::string("/") + to_string(gemm)) +
         (bf16_activations ? "/a16" : "") + (fuse_silu ? "/silu" : "") + (share_weights ? "/wmc" : "") +
         (pdl ? "/pdl" : "");
}

const char* to_string(ClassicalGemm g) {
  switch (g) {
    case ClassicalGemm::kMmaSync: return "mma";
    case ClassicalGemm::kWgmma: return "wgmma";
    case ClassicalGemm::kStream: return "stream";
    case ClassicalGemm::kStreamWgmma: return "stream-wgmma";
    case ClassicalGemm::kTma: return "tma";
  }
  return "?";
}


}  // namespace wd
