// The crossover table behind MoeDispatch: JSON round trip, lookups, the
// tokens-per-expert scaling to unmeasured shapes, malformed files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "warpdecode/error.h"
#include "warpdecode/dispatch_rules.h"

namespace wd {
namespace {

using test::write_temp_file;

// A committed table of bench/results/ (e.g. "h200-crossover.json"): its
// JSON (with the ladders) and the table it loads as.
struct Committed {
  nlohmann::json doc;
  CrossoverTable table;
};
Committed committed(const std::string& file) {
  const std::string path = std::string(WD_SOURCE_DIR) + "/bench/results/" + file;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return {nlohmann::json::parse(in), CrossoverTable::load(path)};
}

// Every field of two entry lists equal, entry for entry.
void expect_same_entries(const std::vector<CrossoverEntry>& got, const std::vector<CrossoverEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& a = got[i];
    const auto& b = want[i];
    EXPECT_EQ(a.preset, b.preset);
    EXPECT_EQ(a.hidden, b.hidden) << a.preset;
    EXPECT_EQ(a.intermediate, b.intermediate) << a.preset;
    EXPECT_EQ(a.experts, b.experts) << a.preset;
    EXPECT_EQ(a.top_k, b.top_k) << a.preset;
    EXPECT_EQ(a.format, b.format) << a.preset;
    EXPECT_EQ(a.bf16_activations, b.bf16_activations) << a.preset;
    EXPECT_EQ(a.tiled_warp, b.tiled_warp) << a.preset;
    EXPECT_EQ(a.untiled, b.untiled) << a.preset;
    EXPECT_EQ(a.classical_reads_tiled, b.classical_reads_tiled) << a.preset;
    EXPECT_EQ(a.w8a16_from, b.w8a16_from) << a.preset;
    EXPECT_EQ(a.crossover, b.crossover) << a.preset << " " << to_string(a.format);
  }
}

TEST(CrossoverTable, LoadLookupAndScale) {
  const std::string path = write_temp_file(R"({"card": "test", "entries": [
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "bf16", "crossover": 64},
    {"preset": "x", "hidden": 4096, "intermediate": 1536, "experts": 128, "top_k": 8,
     "format": "bf16", "crossover": 128},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": -1}]})");
  const CrossoverTable t = CrossoverTable::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(t.entries().size(), 3u);
  EXPECT_EQ(t.crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kBF16), 64);
  EXPECT_EQ(t.crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kMXFP8), CrossoverEntry::kNever);
  // Unmeasured shape: median tokens per expert of the format's entries
  // (4 and 8 -> 8, the upper median) times E/K = 160/8.
  EXPECT_EQ(t.crossover(preset_shape("qwen3-coder-480b-a35b"), WeightFormat::kBF16), 160);
  EXPECT_EQ(t.crossover(preset_shape("qwen3-coder-480b-a35b"), WeightFormat::kMXFP8), CrossoverEntry::kNever);
  EXPECT_EQ(t.crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kFP8Block128), CrossoverEntry::kNever);
  // Round trip.
  const std::string again = write_temp_file(t.to_json());
  const CrossoverTable u = CrossoverTable::load(again);
  std::remove(again.c_str());
  EXPECT_EQ(u.crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kBF16), 64);
  EXPECT_EQ(u.entries().size(), 3u);
}

TEST(CrossoverTable, MalformedFilesAreFormatErrors) {
  EXPECT_THROW(CrossoverTable::load("/nonexistent/crossover.json"), FormatError);
  for (const char* text : {"{", R"({"entries": [{"hidden": 1}]})",
                           R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "fp4", "crossover": 3}]})",
                           R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 0}]})"}) {
    const std::string path = write_temp_file(text);
    EXPECT_THROW(CrossoverTable::load(path), FormatError) << text;
    std::remove(path.c_str());
  }
}

// Every field is checked for its type and range, and the error names the
// entry and the field: a shape of zero experts once reached the tokens-per-
// expert scaling as a division by zero, and a float or an out-of-range
// number was silently converted.
TEST(CrossoverTable, FieldsAreTypedAndBounded) {
  auto entry = [](const std::string& fields) {
    return R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 64},
      {)" + fields + "}]}";
  };
  const std::string shape = R"("hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", )";
  const struct {
    std::string text, names;
  } bad[] = {
      {"[]", "\"entries\" array"},
      {R"({"entries": {}})", "\"entries\" array"},
      {R"({"entries": [7]})", "entry 0: an entry must be a JSON object"},
      {entry(R"("hidden": 2048, "intermediate": 768, "experts": 0, "top_k": 8, "format": "bf16", "crossover": 64)"),
       "entry 1: 'experts' = 0 is out of range"},
      {entry(R"("hidden": 0, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 64)"),
       "'hidden' = 0"},
      {entry(R"("hidden": 2048, "intermediate": -768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 64)"),
       "'intermediate' = -768"},
      {entry(R"("hidden": 2048, "intermediate": 768, "experts": 8, "top_k": 9, "format": "bf16", "crossover": 64)"),
       "'top_k' = 9 is out of range [1, 8]"},
      {entry(shape + R"("crossover": 64.5)"), "'crossover' must be an integer, got 64.5"},
      {entry(shape + R"("crossover": 1e300)"), "'crossover' must be an integer"},
      {entry(shape + R"("crossover": 99999999999)"), "'crossover' = 99999999999 is out of range"},
      {entry(shape + R"("crossover": "64")"), "'crossover' must be an integer, got \"64\""},
      {entry(shape + R"("crossover": -2)"), "'crossover' = -2 is out of range"},
      {entry(R"("hidden": 2048.0, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 64)"),
       "'hidden' must be an integer"},
      {entry(R"("hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": 3, "crossover": 64)"),
       "'format' must be a string"},
      {entry(shape + R"("crossover": 64, "preset": 1)"), "'preset' must be a string"},
      {entry(shape + R"("crossover": 64, "activations": "bf16", "w8a16_from": 1.5)"), "'w8a16_from' must be an integer"},
      {entry(shape + R"("crossover": 64, "warp_weights": "tiled-only", "classical_reads": "as-is")"),
       "classical_reads 'as-is' (allowed: tiled, untiled)"},
      {entry(shape + R"("crossover": 64, "warp_weights": "tiled", "classical_reads": "tiled")"),
       "(allowed on \"warp_weights\": \"tiled-only\" entries)"},
      {entry(shape + R"("crossover": 64, "warp_weights": "tiled-only", "classical_reads": true)"),
       "'classical_reads' must be a string"},
      {entry(R"("hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "crossover": 64)"),
       "entry 1: required field 'format' is missing"},
      // null is missing (json_read::Object, as config.json's optional fields).
      {entry(shape + R"("crossover": null)"), "entry 1: required field 'crossover' is missing"},
      {entry(R"("hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "fp4", "crossover": 64)"),
       "entry 1: unknown weight format 'fp4'"},
  };
  for (const auto& b : bad) {
    try {
      CrossoverTable::parse(b.text, "t.json");
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(b.names), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("t.json", 0), 0u) << e.what();  // names the file first
    }
  }
  // The bounds themselves are accepted, and a huge shape's scaled crossover
  // is "never" rather than an overflowed int.
  const CrossoverTable t = CrossoverTable::parse(
      R"({"entries": [{"hidden": 1, "intermediate": 1048576, "experts": 1, "top_k": 1, "format": "bf16",
          "crossover": 16777216}]})", "t.json");
  ASSERT_EQ(t.entries().size(), 1u);
  EXPECT_EQ(t.source(), "t.json");
  MoeShape huge = preset_shape("qwen3-30b-a3b");
  huge.experts = 1 << 20;
  huge.top_k = 1;
  EXPECT_EQ(t.crossover(huge, WeightFormat::kBF16), CrossoverEntry::kNever);
  EXPECT_EQ(t.crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kBF16), (1 << 24) / 8 * 128);  // 2^24 tokens an expert × E / K
}

TEST(CrossoverTable, LadderRuleNeedsAMarginAtEveryLargerBatch) {
  const std::vector<int> b = {8, 16, 32, 64};
  // Classical faster by >= 2 % from 32 on.
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {120, 101, 97, 90}), 32);
  // A tie within the margin (0.5 % faster at 16) stays with warp decode.
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {97, 99.5, 97, 90}), 32);
  // Faster at 8, then not at 16: the crossover is above the last loss.
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {90, 100, 90, 90}), 32);
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {90, 90, 90, 90}), 8);
  // Not faster at the largest batch: never.
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {90, 90, 90, 99}), CrossoverEntry::kNever);
  // The margin is a parameter: without it the 0.5 % win counts.
  EXPECT_EQ(crossover_from_ladder(b, {100, 100, 100, 100}, {101, 99.5, 97, 90}, 0.0), 16);
  EXPECT_THROW(crossover_from_ladder({}, {}, {}), InvalidArgument);
  EXPECT_THROW(crossover_from_ladder(b, {1, 2, 3}, {1, 2, 3, 4}), InvalidArgument);
  EXPECT_THROW(crossover_from_ladder({8, 8}, {1, 1}, {1, 1}), InvalidArgument);
}

// Each card's committed tune: its entries are the rule applied to its measured ladders.
TEST(CrossoverTable, CommittedEntriesFollowTheirLadders) {
  for (const std::string card : {"h200", "h100"}) {
    SCOPED_TRACE(card);
    const Committed file = committed(card + "-crossover.json");
    const nlohmann::json& doc = file.doc;
    const CrossoverTable& measured = file.table;
    size_t entries = 0;
    for (const auto& l : doc.at("ladders")) {
      const MoeShape s = preset_shape(l.at("preset").get<std::string>());
      const WeightFormat f = parse_weight_format(l.at("format").get<std::string>());
      // The default classical configuration, and (MXFP8) W8A16 where measured;
      // each against warp decode on the default upload and, where measured, on
      // the tiled copies.
      for (bool tiled : {false, true})
      for (bool a16 : {false, true}) {
        const std::string key = std::string(tiled ? "tiled_" : "") + (a16 ? "w8a16_crossover" : "crossover");
        if (!l.contains(key)) {
          EXPECT_TRUE(a16 || tiled) << l.at("preset") << ": no " << key;
          continue;
        }
        std::vector<int> b;
        std::vector<double> w, c;
        for (const auto& pt : l.at("points")) {
          b.push_back(pt.at("batch").get<int>());
          w.push_back(pt.at(tiled ? "warp_tiled_us" : "warp_us").get<double>());
          c.push_back(pt.at(a16 ? "w8a16_us" : "classical_us").get<double>());
        }
        const int x = crossover_from_ladder(b, w, c);
        EXPECT_EQ(l.at(key).get<int>(), x) << l.at("preset") << " " << l.at("format") << " " << key;
        EXPECT_EQ(measured.crossover(s, f, a16, tiled), x) << l.at("preset") << " " << key;
        if (a16) {
          // W8A16 against the default classical configuration, same rule.
          std::vector<double> d;
          for (const auto& pt : l.at("points")) d.push_back(pt.at("classical_us").get<double>());
          const int from = crossover_from_ladder(b, d, c);
          EXPECT_EQ(l.at("w8a16_from").get<int>(), from) << l.at("preset");
          EXPECT_EQ(measured.w8a16_from(s, f), from) << l.at("preset");
        }
        ++entries;
      }
    }
    EXPECT_EQ(entries, measured.entries().size());
  }
}

// The same for the committed untiled tune (tiled-only weights: warp decode
// against the classical path reading them as they are, or un-tiling them
// first: each ladder's "classical_reads").
TEST(CrossoverTable, CommittedUntiledEntriesFollowTheirLadders) {
  for (const std::string card : {"h200", "h100"}) {
    SCOPED_TRACE(card);
    const Committed file = committed(card + "-crossover-untiled.json");
    const nlohmann::json& doc = file.doc;
    const CrossoverTable& measured = file.table;
    size_t entries = 0;
    for (const auto& l : doc.at("ladders")) {
      EXPECT_EQ(l.at("warp_weights"), "tiled-only");
      const std::string reads = l.at("classical_reads").get<std::string>();
      ASSERT_TRUE(reads == "tiled copies" || reads == "un-tiled scratch") << reads;
      const bool as_is = reads == "tiled copies";
      const MoeShape s = preset_shape(l.at("preset").get<std::string>());
      const WeightFormat f = parse_weight_format(l.at("format").get<std::string>());
      for (bool a16 : {false, true}) {
        const std::string key = a16 ? "w8a16_crossover" : "crossover";
        if (!l.contains(key)) {
          EXPECT_TRUE(a16) << l.at("preset") << ": no " << key;
          continue;
        }
        std::vector<int> b;
        std::vector<double> w, c;
        for (const auto& pt : l.at("points")) {
          b.push_back(pt.at("batch").get<int>());
          w.push_back(pt.at("warp_us").get<double>());
          c.push_back(pt.at(a16 ? "w8a16_us" : "classical_us").get<double>());
        }
        const int x = crossover_from_ladder(b, w, c);
        EXPECT_EQ(l.at(key).get<int>(), x) << l.at("preset") << " " << l.at("format") << " " << key;
        EXPECT_EQ(measured.crossover(s, f, a16, true, true, as_is), x) << l.at("preset") << " " << key << " " << reads;
        ++entries;
      }
    }
    EXPECT_EQ(entries, measured.entries().size());
    for (const auto& e : measured.entries()) EXPECT_TRUE(e.untiled && e.tiled_warp) << e.preset;
  }
}

// W8A16 entries ("activations": "bf16") sit beside the default ones of the
// same shape and format, and survive the round trip.
TEST(CrossoverTable, W8A16EntriesAreTheirOwn) {
  const std::string path = write_temp_file(R"({"entries": [
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": 24},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": 96, "activations": "bf16"}]})");
  const CrossoverTable t = CrossoverTable::load(path);
  std::remove(path.c_str());
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(t.entries().size(), 2u);
  EXPECT_EQ(t.crossover(s, WeightFormat::kMXFP8), 24);
  EXPECT_EQ(t.crossover(s, WeightFormat::kMXFP8, true), 96);
  EXPECT_EQ(t.crossover(s, WeightFormat::kBF16, true), CrossoverEntry::kNever);
  const std::string again = write_temp_file(t.to_json());
  const CrossoverTable u = CrossoverTable::load(again);
  std::remove(again.c_str());
  EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8), 24);
  EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8, true), 96);
  for (const char* text : {R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128,
    "top_k": 8, "format": "mxfp8", "crossover": 3, "activations": "fp8"}]})",
                           // w8a16_from: W8A16 entries only, >= 1 or -1.
                           R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128,
    "top_k": 8, "format": "mxfp8", "crossover": 3, "w8a16_from": 96}]})",
                           R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128,
    "top_k": 8, "format": "mxfp8", "crossover": 3, "activations": "bf16", "w8a16_from": 0}]})"}) {
    const std::string bad = write_temp_file(text);
    EXPECT_THROW(CrossoverTable::load(bad), FormatError) << text;
    std::remove(bad.c_str());
  }
}

// Entries measured with warp decode on the tiled copies ("warp_weights":
// "tiled") sit beside the default upload's: a tiled lookup takes the shape's
// own tiled entry, else the default lookup (exact or scaled); they survive
// the round trip; an unknown value is a FormatError.
TEST(CrossoverTable, TiledEntriesAreTheirOwnAndFallBackToTheDefault) {
  const std::string path = write_temp_file(R"({"entries": [
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": 48},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": 96, "warp_weights": "tiled"},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": 64, "activations": "bf16", "w8a16_from": 128},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "mxfp8", "crossover": -1, "activations": "bf16", "w8a16_from": 128, "warp_weights": "tiled"},
    {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
     "format": "bf16", "crossover": 64}]})");
  const CrossoverTable t = CrossoverTable::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(t.entries().size(), 5u);
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const MoeShape coder = preset_shape("qwen3-coder-480b-a35b");
  for (const CrossoverTable& u : {t, [&] {
         const std::string again = write_temp_file(t.to_json());
         CrossoverTable v = CrossoverTable::load(again);
         std::remove(again.c_str());
         return v;
       }()}) {
    EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8), 48);
    EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8, false, true), 96);
    EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8, true), 64);
    EXPECT_EQ(u.crossover(s, WeightFormat::kMXFP8, true, true), CrossoverEntry::kNever);
    EXPECT_EQ(u.w8a16_from(s, WeightFormat::kMXFP8), 128);
    // No tiled BF16 entry: the default one.
    EXPECT_EQ(u.crossover(s, WeightFormat::kBF16, false, true), 64);
    // Another shape: the default entries scaled (48 · 8/128 = 3 tokens per
    // expert -> 60 on E = 160), never the tiled ones (96 -> 120).
    EXPECT_EQ(u.crossover(coder, WeightFormat::kMXFP8, false, true), 60);
    EXPECT_EQ(u.crossover(coder, WeightFormat::kMXFP8), 60);
  }
  // choose_path: the tiled entry for tiled weights, under both policies.
  using P = DispatchPolicy;
  const WeightCopies tiled = WeightCopies::kCanonicalAndTiled, only = WeightCopies::kTiledOnly;
  const WeightFormat mx = WeightFormat::kMXFP8;
  EXPECT_EQ(choose_path(t, s, mx, 64, 4096, P::kFastest), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 64, 4096, P::kFastest, false, tiled), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, s, mx, 96, 4096, P::kFastest, false, tiled), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 64, 4096, P::kBf16Activations, true), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 1024, 4096, P::kBf16Activations, true, tiled), MoePath::kWarp);
  // Tiled-only weights: warp decode at every batch it takes, past every
  // crossover and under both policies (the classical path cannot read them),
  // and a refusal past its maximum that names the upload.
  for (P p : {P::kFastest, P::kBf16Activations})
    for (WeightFormat f : {WeightFormat::kBF16, mx})
      for (int B : {1, 64, 96, 1024, 4096}) {
        EXPECT_EQ(choose_path(t, s, f, B, 4096, p, true, only), MoePath::kWarp) << B;
        EXPECT_EQ(choose_path(t, s, f, B, 4096, p, false, only), MoePath::kWarp) << B;
      }
  try {
    choose_path(t, s, mx, 4097, 4096, P::kFastest, false, only);
    ADD_FAILURE() << "tiled-only weights past warp decode's maximum were not refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tiled-only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_path(t, s, WeightFormat::kBF16, 65, 64, P::kFastest, false, only), InvalidArgument);
  // FP8 block-128 has no tiled copies: always classical, whatever is passed.
  EXPECT_EQ(choose_path(t, s, WeightFormat::kFP8Block128, 1, 4096, P::kFastest, false, only), MoePath::kClassical);
  EXPECT_STREQ(to_string(WeightCopies::kCanonical), "default");
  EXPECT_STREQ(to_string(tiled), "tiled");
  EXPECT_STREQ(to_string(only), "tiled-only");
  // set() replaces the entry of the same key only.
  CrossoverTable w = t;
  w.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kMXFP8, 128,
                       false, CrossoverEntry::kNever, true});
  EXPECT_EQ(w.entries().size(), 5u);
  EXPECT_EQ(w.crossover(s, WeightFormat::kMXFP8, false, true), 128);
  EXPECT_EQ(w.crossover(s, WeightFormat::kMXFP8), 48);
  const std::string bad = write_temp_file(R"({"entries": [{"hidden": 2048, "intermediate": 768, "experts": 128,
    "top_k": 8, "format": "mxfp8", "crossover": 3, "warp_weights": "packed"}]})");
  EXPECT_THROW(CrossoverTable::load(bad), FormatError);
  std::remove(bad.c_str());
}

// Tiled-only weights that the dispatch un-tiles (untile = true): their own
// entries ("warp_weights": "tiled-only"), scaled to other shapes by tokens
// per expert, the classical path past warp decode's maximum, and no effect
// on the other uploads' lookups.
TEST(CrossoverTable, UntiledEntriesDecideForTiledOnlyWeights) {
  const std::string path = write_temp_file(R"({"entries": [
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 64},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 72,
     "warp_weights": "tiled"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 256,
     "warp_weights": "tiled-only"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 512,
     "warp_weights": "tiled-only"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 384,
     "activations": "bf16", "warp_weights": "tiled-only"}]})");
  const CrossoverTable loaded = CrossoverTable::load(path);
  std::remove(path.c_str());
  const std::string again = write_temp_file(loaded.to_json());
  const CrossoverTable t = CrossoverTable::load(again);
  std::remove(again.c_str());
  ASSERT_EQ(t.entries().size(), 5u);
  EXPECT_TRUE(t.entries()[2].untiled && t.entries()[2].tiled_warp);
  const MoeShape s = preset_shape("qwen3-30b-a3b"), coder = preset_shape("qwen3-coder-480b-a35b");
  const WeightFormat bf = WeightFormat::kBF16, mx = WeightFormat::kMXFP8;
  EXPECT_EQ(t.crossover(s, bf, false, true, true), 256);
  EXPECT_EQ(t.crossover(s, bf, false, true), 72);  // the tiled entry, not the untiled one
  EXPECT_EQ(t.crossover(s, bf), 64);
  EXPECT_EQ(t.crossover(s, mx, false, true, true), 512);
  EXPECT_EQ(t.crossover(s, mx, true, true, true), 384);
  EXPECT_EQ(t.crossover(s, mx), CrossoverEntry::kNever);  // no default MXFP8 entry: untiled ones do not stand in
  // Another shape: 256 · 8/128 = 16 tokens per expert -> 320 on E = 160.
  EXPECT_EQ(t.crossover(coder, bf, false, true, true), 320);
  using P = DispatchPolicy;
  const WeightCopies only = WeightCopies::kTiledOnly;
  constexpr auto kUntiles = TiledOnlyClassical::kUntiles, kNot = TiledOnlyClassical::kNot;
  EXPECT_EQ(choose_path(t, s, bf, 255, 4096, P::kFastest, false, only, kUntiles), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, s, bf, 256, 4096, P::kFastest, false, only, kUntiles), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, bf, 4097, 4096, P::kFastest, false, only, kUntiles), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, bf, 1024, 4096, P::kFastest, false, only, kNot), MoePath::kWarp);  // no scratch
  EXPECT_EQ(choose_path(t, s, mx, 511, 4096, P::kFastest, false, only, kUntiles), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, s, mx, 512, 4096, P::kFastest, false, only, kUntiles), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 384, 4096, P::kBf16Activations, true, only, kUntiles), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 383, 4096, P::kBf16Activations, true, only, kUntiles), MoePath::kWarp);
  // kBf16Activations where W8A16 does not run: warp decode, refused past its maximum.
  EXPECT_EQ(choose_path(t, s, mx, 1024, 4096, P::kBf16Activations, false, only, kUntiles), MoePath::kWarp);
  EXPECT_THROW(choose_path(t, s, mx, 4097, 4096, P::kBf16Activations, false, only, kUntiles), InvalidArgument);
  // The un-tiling applies to tiled-only weights only.
  EXPECT_EQ(choose_path(t, s, bf, 64, 4096, P::kFastest, false, WeightCopies::kCanonical, kUntiles), MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, bf, 64, 4096, P::kFastest, false, WeightCopies::kCanonicalAndTiled, kUntiles),
            MoePath::kWarp);
  // A table without untiled entries: warp decode up to its maximum, the
  // classical path (un-tiling) past it instead of a refusal.
  CrossoverTable none;
  EXPECT_EQ(choose_path(none, s, bf, 4096, 4096, P::kFastest, false, only, kUntiles), MoePath::kWarp);
  EXPECT_EQ(choose_path(none, s, bf, 4097, 4096, P::kFastest, false, only, kUntiles), MoePath::kClassical);
  // set() keeps the untiled entry apart from the tiled one of the same shape.
  CrossoverTable w = t;
  CrossoverEntry e{"", s.hidden, s.intermediate, s.experts, s.top_k, bf, 128, false, CrossoverEntry::kNever, true};
  w.set(e);
  EXPECT_EQ(w.entries().size(), 5u);
  EXPECT_EQ(w.crossover(s, bf, false, true), 128);
  EXPECT_EQ(w.crossover(s, bf, false, true, true), 256);
}

// Tiled-only entries of the two classical reads ("classical_reads": "tiled",
// read as they are; "untiled", the default, un-tiled first) are their own
// kinds: each call takes the crossover of its own read, both survive the
// round trip and set(), and a table with no entry read as they are gives the
// un-tiled ones for them (a bound from above).
TEST(CrossoverTable, TiledOnlyEntriesOfEachClassicalReadAreTheirOwn) {
  const CrossoverTable loaded = CrossoverTable::parse(R"({"entries": [
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 384,
     "warp_weights": "tiled-only"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 80,
     "warp_weights": "tiled-only", "classical_reads": "tiled"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 72,
     "activations": "bf16", "warp_weights": "tiled-only", "classical_reads": "tiled"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "bf16", "crossover": 416,
     "warp_weights": "tiled-only", "classical_reads": "untiled"}]})",
                                                      "t.json");
  const CrossoverTable t = CrossoverTable::parse(loaded.to_json(), "round trip");
  ASSERT_EQ(t.entries().size(), 4u);
  EXPECT_FALSE(t.entries()[0].classical_reads_tiled);
  EXPECT_TRUE(t.entries()[1].classical_reads_tiled);
  EXPECT_FALSE(t.entries()[3].classical_reads_tiled);
  const MoeShape s = preset_shape("qwen3-30b-a3b"), coder = preset_shape("qwen3-coder-480b-a35b");
  const WeightFormat bf = WeightFormat::kBF16, mx = WeightFormat::kMXFP8;
  EXPECT_EQ(t.crossover(s, mx, false, true, true, true), 80);
  EXPECT_EQ(t.crossover(s, mx, false, true, true, false), 384);
  EXPECT_EQ(t.crossover(s, mx, true, true, true, true), 72);
  EXPECT_EQ(t.crossover(s, mx, true, true, true, false), CrossoverEntry::kNever);  // no un-tiled W8A16 entry
  // Scaled by tokens per expert within the kind: 80 · 8/128 = 5 -> 100 on E = 160.
  EXPECT_EQ(t.crossover(coder, mx, false, true, true, true), 100);
  // No BF16 entry read as it is: the un-tiled one.
  EXPECT_EQ(t.crossover(s, bf, false, true, true, true), 416);
  using P = DispatchPolicy;
  const WeightCopies only = WeightCopies::kTiledOnly;
  EXPECT_EQ(choose_path(t, s, mx, 79, 4096, P::kFastest, false, only, TiledOnlyClassical::kReadsTiled), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, s, mx, 80, 4096, P::kFastest, false, only, TiledOnlyClassical::kReadsTiled),
            MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 80, 4096, P::kFastest, false, only, TiledOnlyClassical::kUntiles), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, s, mx, 384, 4096, P::kFastest, false, only, TiledOnlyClassical::kUntiles),
            MoePath::kClassical);
  EXPECT_EQ(choose_path(t, s, mx, 72, 4096, P::kBf16Activations, true, only, TiledOnlyClassical::kReadsTiled),
            MoePath::kClassical);
  // set() replaces within a kind and keeps the kinds apart.
  CrossoverTable w = t;
  CrossoverEntry e{"", s.hidden, s.intermediate, s.experts, s.top_k, mx, 96, false, CrossoverEntry::kNever, true, true};
  e.classical_reads_tiled = true;
  w.set(e);
  ASSERT_EQ(w.entries().size(), 4u);
  EXPECT_EQ(w.crossover(s, mx, false, true, true, true), 96);
  EXPECT_EQ(w.crossover(s, mx, false, true, true, false), 384);
}

// kFastest's classical configuration for MXFP8: W8A8 below the W8A16 entry's
// w8a16_from, W8A16 from it (where the device runs it); kBf16Activations
// W8A16 at every batch; other formats and tables without the field: the
// default. Unmeasured shapes scale it by tokens per expert.
// What a view holds decides the copies the dispatch sees: the canonical
// tensors alone, the tiled gate_up beside them, or the tiled copies alone.
TEST(CrossoverTable, WeightCopiesOfAView) {
  const uint8_t byte = 0;
  MoeWeightsView v;
  v.gate_up = &byte;
  v.down = &byte;
  EXPECT_EQ(weight_copies(v), WeightCopies::kCanonical);
  v.gate_up_tiled = &byte;
  v.down_tiled = &byte;
  EXPECT_EQ(weight_copies(v), WeightCopies::kCanonicalAndTiled);
  v.down = nullptr;
  EXPECT_EQ(weight_copies(v), WeightCopies::kTiledOnly);
  v.gate_up = nullptr;
  EXPECT_EQ(weight_copies(v), WeightCopies::kTiledOnly);
}

TEST(CrossoverTable, DispatchClassicalConfigFollowsW8A16From) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  CrossoverTable t;
  t.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kMXFP8, 24});
  using P = DispatchPolicy;
  auto cfg = [&](WeightFormat f, int B, P p, bool sm90a = true) { return dispatch_classical_config(t, s, f, B, p, sm90a); };
  EXPECT_FALSE(cfg(WeightFormat::kMXFP8, 4096, P::kFastest).bf16_activations);  // no w8a16_from: never
  t.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kMXFP8, 48, true,
                       96});
  EXPECT_EQ(t.w8a16_from(s, WeightFormat::kMXFP8), 96);
  EXPECT_FALSE(cfg(WeightFormat::kMXFP8, 95, P::kFastest).bf16_activations);
  EXPECT_EQ(cfg(WeightFormat::kMXFP8, 95, P::kFastest).label(), ClassicalConfig::for_batch(s, 95, WeightFormat::kMXFP8, true).label());
  EXPECT_TRUE(cfg(WeightFormat::kMXFP8, 96, P::kFastest).bf16_activations);
  EXPECT_TRUE(cfg(WeightFormat::kMXFP8, 4096, P::kFastest).bf16_activations);
  EXPECT_FALSE(cfg(WeightFormat::kMXFP8, 4096, P::kFastest, false).bf16_activations);  // no sm_90a: W8A8
  EXPECT_TRUE(cfg(WeightFormat::kMXFP8, 1, P::kBf16Activations).bf16_activations);
  EXPECT_FALSE(cfg(WeightFormat::kBF16, 4096, P::kFastest).bf16_activations);
  EXPECT_FALSE(cfg(WeightFormat::kFP8Block128, 4096, P::kFastest).bf16_activations);
  // qwen3-coder-480b-a35b (E = 160): 96 · 8/128 = 6 tokens per expert -> B = 120.
  EXPECT_EQ(t.w8a16_from(preset_shape("qwen3-coder-480b-a35b"), WeightFormat::kMXFP8), 120);
  // Round trip keeps the field.
  const std::string path = write_temp_file(t.to_json());
  const CrossoverTable u = CrossoverTable::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(u.w8a16_from(s, WeightFormat::kMXFP8), 96);
}

TEST(CrossoverTable, BuiltInIsMeasured) {
  const CrossoverTable t = CrossoverTable::built_in();
  for (const auto& e : t.entries()) {
    EXPECT_TRUE(e.crossover == CrossoverEntry::kNever || e.crossover >= 1) << e.preset;
    EXPECT_GT(e.hidden, 0);
  }
  // The built-in entries are the committed H200 measurements, entry for
  // entry: the tune's, then the untiled tune's.
  std::vector<CrossoverEntry> all = committed("h200-crossover.json").table.entries();
  const std::vector<CrossoverEntry> untiled = committed("h200-crossover-untiled.json").table.entries();
  all.insert(all.end(), untiled.begin(), untiled.end());
  expect_same_entries(t.entries(), all);
}

// The H100's built-in table: the H200's with each entry measured on the
// H100 (bench/results/h100-crossover.json, h100-crossover-untiled.json) in
// place of the H200 entry of its kind, entry for entry; picked by a device
// name with "H100" in it.
TEST(CrossoverTable, BuiltInH100IsItsMeasurementOverTheH200s) {
  CrossoverTable expected = committed("h200-crossover.json").table;
  const std::vector<CrossoverEntry> h200_untiled = committed("h200-crossover-untiled.json").table.entries();
  for (const auto& e : h200_untiled) expected.set(e);
  const std::vector<CrossoverEntry> h100 = committed("h100-crossover.json").table.entries();
  const std::vector<CrossoverEntry> h100_untiled = committed("h100-crossover-untiled.json").table.entries();
  ASSERT_EQ(h100.size(), 18u);
  ASSERT_EQ(h100_untiled.size(), 9u);  // read as they are: the kind sm_90a uses
  for (const auto& e : h100) expected.set(e);
  for (const auto& e : h100_untiled) expected.set(e);
  const CrossoverTable t = CrossoverTable::built_in(TableCard::kH100);
  EXPECT_EQ(t.source(), "built-in (H100)");
  expect_same_entries(t.entries(), expected.entries());
  // Not the H200's: the H100 entries changed some crossovers.
  const CrossoverTable h200 = CrossoverTable::built_in(TableCard::kH200);
  ASSERT_EQ(h200.entries().size(), t.entries().size());
  int from_h100 = 0;
  for (size_t i = 0; i < t.entries().size(); ++i)
    from_h100 += t.entries()[i].crossover != h200.entries()[i].crossover ||
                 t.entries()[i].w8a16_from != h200.entries()[i].w8a16_from;
  EXPECT_GT(from_h100, 0) << "built_in(kH100) equals the H200 table";
  // A card by its name.
  EXPECT_EQ(table_card("NVIDIA H100 80GB HBM3"), TableCard::kH100);
  EXPECT_EQ(table_card("NVIDIA H100 PCIe"), TableCard::kH100);
  EXPECT_EQ(table_card("NVIDIA H200"), TableCard::kH200);
  EXPECT_EQ(table_card("NVIDIA B200"), TableCard::kH200);
  EXPECT_EQ(table_card(""), TableCard::kH200);
  EXPECT_EQ(CrossoverTable::built_in().source(), "built-in (H200)");
  // A crossover the two cards measured apart: qwen3-30b-a3b BF16 on the default upload.
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(h200.crossover(s, WeightFormat::kBF16), 64);
  EXPECT_EQ(t.crossover(s, WeightFormat::kBF16), 72);
}

// A card without measurements of its own is told so (info, bench-moe,
// dispatch print the note): which card's defaults it takes and how to
// measure its crossover. The two measured cards get no note.
TEST(CrossoverTable, UnmeasuredCardIsNamedWithTheCardItTakes) {
  for (const char* name : {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}) {
    EXPECT_TRUE(measured_card(name)) << name;
    EXPECT_EQ(unmeasured_card_note(name), "") << name;
  }
  // Other variants of a measured chip take its defaults, but are told so.
  const struct {
    const char* name;
    const char* takes;
  } unmeasured[] = {
      {"NVIDIA H100 PCIe", "H100's defaults (measured on an NVIDIA H100 80GB HBM3;"},
      {"NVIDIA H100 NVL", "H100's defaults (measured on an NVIDIA H100 80GB HBM3;"},
      {"NVIDIA H200 NVL", "H200's defaults (measured on an NVIDIA H200;"},
      {"NVIDIA GH200 480GB", "H200's defaults (measured on an NVIDIA H200;"},
      {"NVIDIA B200", "H200's defaults (measured on an NVIDIA H200;"},
      {"NVIDIA A100-SXM4-80GB", "H200's defaults (measured on an NVIDIA H200;"},
      {"NVIDIA L40S", "H200's defaults (measured on an NVIDIA H200;"},
  };
  for (const auto& u : unmeasured) {
    EXPECT_FALSE(measured_card(u.name)) << u.name;
    const std::string n = unmeasured_card_note(u.name);
    EXPECT_EQ(n.rfind(std::string(u.name) + " was not measured: it takes the " + u.takes, 0), 0u) << n;
    EXPECT_NE(n.find("bench-moe --tune --tune-json FILE"), std::string::npos) << n;
    EXPECT_NE(n.find("WD_MOE_CROSSOVER=FILE"), std::string::npos) << n;
  }
  EXPECT_FALSE(measured_card(""));
  EXPECT_EQ(unmeasured_card_note(""), "no CUDA device: the H200's defaults are shown");
}

// The dispatch rule (MoeDispatch::choose) without a GPU: the crossover for
// every format under kFastest; MXFP8 kept on warp decode, and a batch past
// warp decode's maximum refused, under kBf16Activations.
TEST(CrossoverTable, ChoosePathFollowsTheCrossoverAndThePolicy) {
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  CrossoverTable t;
  t.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kBF16, 64});
  t.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kMXFP8, 24});
  const int max = 256;
  using P = DispatchPolicy;
  auto path = [&](WeightFormat f, int B, P p) { return choose_path(t, s, f, B, max, p); };
  for (P p : {P::kFastest, P::kBf16Activations}) {
    // BF16: the crossover, then the classical path past warp decode's maximum.
    EXPECT_EQ(path(WeightFormat::kBF16, 63, p), MoePath::kWarp) << to_string(p);
    EXPECT_EQ(path(WeightFormat::kBF16, 64, p), MoePath::kClassical) << to_string(p);
    EXPECT_EQ(path(WeightFormat::kBF16, max + 1, p), MoePath::kClassical) << to_string(p);
    // FP8 block-128: warp decode does not stream it.
    EXPECT_EQ(path(WeightFormat::kFP8Block128, 1, p), MoePath::kClassical) << to_string(p);
    EXPECT_THROW(path(WeightFormat::kBF16, 0, p), InvalidArgument) << to_string(p);
  }
  EXPECT_EQ(path(WeightFormat::kMXFP8, 23, P::kFastest), MoePath::kWarp);
  EXPECT_EQ(path(WeightFormat::kMXFP8, 24, P::kFastest), MoePath::kClassical);
  EXPECT_EQ(path(WeightFormat::kMXFP8, max + 1, P::kFastest), MoePath::kClassical);
  for (int B : {1, 24, 200, max}) EXPECT_EQ(path(WeightFormat::kMXFP8, B, P::kBf16Activations), MoePath::kWarp) << B;
  EXPECT_THROW(path(WeightFormat::kMXFP8, max + 1, P::kBf16Activations), InvalidArgument);
  // With a W8A16 entry, where the device runs W8A16: its crossover, and the
  // classical path past warp decode's maximum; where it does not, as above.
  t.set(CrossoverEntry{"qwen3-30b-a3b", s.hidden, s.intermediate, s.experts, s.top_k, WeightFormat::kMXFP8, 96, true});
  auto a16 = [&](int B, bool runs) { return choose_path(t, s, WeightFormat::kMXFP8, B, max, P::kBf16Activations, runs); };
  EXPECT_EQ(a16(95, true), MoePath::kWarp);
  EXPECT_EQ(a16(96, true), MoePath::kClassical);
  EXPECT_EQ(a16(max + 1, true), MoePath::kClassical);
  EXPECT_EQ(a16(96, false), MoePath::kWarp);
  EXPECT_THROW(a16(max + 1, false), InvalidArgument);
  // kFastest keeps the default entry (24) whatever the W8A16 one says.
  EXPECT_EQ(choose_path(t, s, WeightFormat::kMXFP8, 24, max, P::kFastest, true), MoePath::kClassical);
  EXPECT_STREQ(to_string(P::kFastest), "fastest");
  EXPECT_STREQ(to_string(P::kBf16Activations), "bf16-activations");
}

// MXFP8 on H or I not a multiple of 128 (warp decode takes multiples of
// 32; the classical path's W8A8 and W8A16 tiles take 128): warp decode at
// every batch up to its maximum, past the scaled crossover too, and a
// refusal past it that names the shape, under both policies. BF16 on the
// same shape keeps its crossover.
TEST(CrossoverTable, ChoosePathKeepsMxfp8OnWarpDecodeWhereTheClassicalPathCannotRunTheShape) {
  const MoeShape q = preset_shape("qwen3-30b-a3b");
  CrossoverTable t;
  t.set(CrossoverEntry{"qwen3-30b-a3b", q.hidden, q.intermediate, q.experts, q.top_k, WeightFormat::kBF16, 64});
  t.set(CrossoverEntry{"qwen3-30b-a3b", q.hidden, q.intermediate, q.experts, q.top_k, WeightFormat::kMXFP8, 48});
  MoeShape odd = q;
  odd.hidden = 2880, odd.intermediate = 2880;  // multiples of 32 and 64, not 128
  odd.validate();
  EXPECT_FALSE(classical_takes_shape(odd, WeightFormat::kMXFP8));
  EXPECT_FALSE(classical_takes_shape(odd, WeightFormat::kFP8Block128));
  EXPECT_TRUE(classical_takes_shape(odd, WeightFormat::kBF16));
  EXPECT_TRUE(classical_takes_shape(q, WeightFormat::kMXFP8));
  const int max = 256;
  using P = DispatchPolicy;
  for (P p : {P::kFastest, P::kBf16Activations})
    for (bool w8a16 : {false, true}) {
      for (int B : {1, 47, 48, 64, max})
        EXPECT_EQ(choose_path(t, odd, WeightFormat::kMXFP8, B, max, p, w8a16), MoePath::kWarp) << B;
      try {
        choose_path(t, odd, WeightFormat::kMXFP8, max + 1, max, p, w8a16);
        ADD_FAILURE() << "MXFP8 past warp decode's maximum on a shape the classical path cannot run was not refused";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("multiples of 128 (H = 2880, I = 2880)"), std::string::npos) << e.what();
      }
    }
  EXPECT_EQ(choose_path(t, odd, WeightFormat::kBF16, 63, max, P::kFastest), MoePath::kWarp);
  EXPECT_EQ(choose_path(t, odd, WeightFormat::kBF16, 64, max, P::kFastest), MoePath::kClassical);
}

// A crossover scaled to a shape of the same experts and top-k (another H or
// I) is the measured batch itself, wherever batch·K / E is not a binary
// fraction (31 · 4 / 60); and to other E, K the exact ceiling.
TEST(CrossoverTable, ScaledCrossoverIsExactInTokensPerExpert) {
  CrossoverTable t;
  t.set(CrossoverEntry{"x", 2048, 1408, 60, 4, WeightFormat::kBF16, 31});
  MoeShape same{4096, 1408, 60, 4};
  for (int c : {31, 62, 124, 125, 333, 1001}) {
    t.set(CrossoverEntry{"x", 2048, 1408, 60, 4, WeightFormat::kBF16, c});
    EXPECT_EQ(t.crossover(same, WeightFormat::kBF16), c) << c;
  }
  CrossoverTable u;
  u.set(CrossoverEntry{"y", 6144, 2560, 160, 8, WeightFormat::kBF16, 332});  // 16.6 tokens per expert
  EXPECT_EQ(u.crossover(MoeShape{2048, 768, 60, 4}, WeightFormat::kBF16), 249);   // 16.6 · 60 / 4 = 249
  EXPECT_EQ(u.crossover(MoeShape{2048, 768, 128, 8}, WeightFormat::kBF16), 266);  // 265.6, up
}

}  // namespace
}  // namespace wd
