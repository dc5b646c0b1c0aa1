// A tune's ladders (warpdecode/tune_ladder.h): the entries they give, rounds
// combined, the ladders read back from JSON; and `warpdecode crossover-merge`,
// which does all three on files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "test_support.h"
#include "warpdecode/error.h"
#include "warpdecode/tune_ladder.h"

namespace wd {
namespace {

using test::write_temp_file;

// An entry's every field, for comparing lists whatever their order.
using EntryKey = std::tuple<std::string, int, int, int, int, int, int, bool, int, bool, bool, bool>;
std::vector<EntryKey> keys(const std::vector<CrossoverEntry>& v) {
  std::vector<EntryKey> k;
  for (const auto& e : v)
    k.emplace_back(e.preset, e.hidden, e.intermediate, e.experts, e.top_k, int(e.format), e.crossover,
                   e.bf16_activations, e.w8a16_from, e.tiled_warp, e.untiled, e.classical_reads_tiled);
  std::sort(k.begin(), k.end());
  return k;
}

TuneLadder mxfp8_ladder(std::vector<double> warp, std::vector<double> classical, std::vector<double> w8a16 = {}) {
  TuneLadder l;
  l.preset = "qwen3-30b-a3b";
  l.format = WeightFormat::kMXFP8;
  l.batches = {32, 64, 128};
  l.warp_us = std::move(warp);
  l.classical_us = std::move(classical);
  l.w8a16_us = std::move(w8a16);
  return l;
}

// Every committed tune (both cards, the default upload's and the tiled-only
// one's): its entries are what crossover_entries gives for its ladders, every
// field, nothing more and nothing less.
TEST(TuneLadder, CommittedTunesGiveTheirEntries) {
  for (const std::string file :
       {"h200-crossover.json", "h100-crossover.json", "h200-crossover-untiled.json", "h100-crossover-untiled.json"}) {
    SCOPED_TRACE(file);
    const std::string path = std::string(WD_SOURCE_DIR) + "/bench/results/" + file;
    const std::vector<TuneLadder> ladders = parse_tune_ladders(read_file(path), path);
    ASSERT_FALSE(ladders.empty());
    std::vector<CrossoverEntry> derived;
    for (const auto& l : ladders)
      for (const auto& e : crossover_entries(l)) derived.push_back(e);
    EXPECT_EQ(keys(derived), keys(CrossoverTable::load(path).entries()));
  }
}

TEST(TuneLadder, EntriesOfEachPairing) {
  // Classical faster by >= 2 % from 64; W8A16 faster than W8A8 from 128 and
  // than warp decode from 128.
  TuneLadder l = mxfp8_ladder({100, 100, 100}, {110, 97, 90}, {120, 99, 80});
  l.warp_tiled_us = {90, 95, 95};  // the tiled copies: the classical path wins only at 128
  const std::vector<CrossoverEntry> e = crossover_entries(l);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(std::string(ladder_field(e[0])), "crossover");
  EXPECT_EQ(e[0].crossover, 64);
  EXPECT_EQ(std::string(ladder_field(e[1])), "tiled_crossover");
  EXPECT_EQ(e[1].crossover, 128);
  EXPECT_TRUE(e[1].tiled_warp);
  EXPECT_EQ(std::string(ladder_field(e[2])), "w8a16_crossover");
  EXPECT_EQ(e[2].crossover, 128);
  EXPECT_EQ(e[2].w8a16_from, 128);
  EXPECT_EQ(std::string(ladder_field(e[3])), "tiled_w8a16_crossover");
  EXPECT_EQ(e[3].crossover, 128);
  EXPECT_EQ(crossover_line(e[1]), "qwen3-30b-a3b mxfp8 (warp decode on the tiled copies): B >= 128");
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  EXPECT_EQ(e[0].hidden, s.hidden);
  EXPECT_EQ(e[0].experts, s.experts);

  // Tiled-only: every entry tiled and untiled, read as they are here.
  TuneLadder t = mxfp8_ladder({100, 100, 100}, {99, 99, 99});
  t.tiled_only = t.classical_reads_tiled = true;
  const std::vector<CrossoverEntry> u = crossover_entries(t);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(u[0].untiled && u[0].tiled_warp && u[0].classical_reads_tiled);
  EXPECT_EQ(u[0].crossover, CrossoverEntry::kNever);  // 1 % is inside the margin
  EXPECT_EQ(crossover_line(u[0]),
            "qwen3-30b-a3b mxfp8 (tiled-only weights, the classical path reading them): never (warp decode at every "
            "B measured)");

  // A format warp decode does not stream: the classical path from B = 1.
  TuneLadder fp8 = mxfp8_ladder({}, {1, 2, 3});
  fp8.format = WeightFormat::kFP8Block128;
  ASSERT_EQ(crossover_entries(fp8).size(), 1u);
  EXPECT_EQ(crossover_entries(fp8)[0].crossover, 1);

  EXPECT_THROW(crossover_entries(mxfp8_ladder({100, 100}, {1, 1, 1})), InvalidArgument);
  EXPECT_THROW(crossover_entries(mxfp8_ladder({}, {1, 1, 1})), InvalidArgument);  // MXFP8 needs warp times
}

TEST(TuneLadder, RoundsTakeEachPathsBestMedian) {
  // Round 1 has the classical path 2.2 % ahead at 64 (a slow warp-decode
  // round), round 2 level there: their best medians keep warp decode at 64.
  const TuneLadder r1 = mxfp8_ladder({102, 102.2, 120}, {101, 100, 90});
  const TuneLadder r2 = mxfp8_ladder({100, 101, 100}, {103, 101, 92});
  EXPECT_EQ(crossover_entries(r1)[0].crossover, 64);
  const TuneLadder best = best_of_rounds({r1, r2});
  EXPECT_EQ(best.warp_us, (std::vector<double>{100, 101, 100}));
  EXPECT_EQ(best.classical_us, (std::vector<double>{101, 100, 90}));
  EXPECT_EQ(crossover_entries(best)[0].crossover, 128);
  EXPECT_EQ(keys(crossover_entries(best_of_rounds({r1}))), keys(crossover_entries(r1)));

  EXPECT_THROW(best_of_rounds({}), InvalidArgument);
  TuneLadder other = r2;
  other.preset = "qwen3-235b-a22b";
  EXPECT_THROW(best_of_rounds({r1, other}), InvalidArgument);  // another kind
  other = r2;
  other.batches = {32, 64, 256};
  EXPECT_THROW(best_of_rounds({r1, other}), InvalidArgument);  // other batches
  other = r2;
  other.w8a16_us = {1, 1, 1};
  EXPECT_THROW(best_of_rounds({r1, other}), InvalidArgument);  // a path one round lacks
  other = r2;
  other.tiled_only = true;
  EXPECT_THROW(best_of_rounds({r1, other}), InvalidArgument);
}

TEST(TuneLadder, MalformedLaddersAreRefusedByName) {
  const std::string ok_point = R"({"batch": 8, "warp_us": 10, "classical_us": 12})";
  auto doc = [](const std::string& ladder) { return R"({"entries": [], "ladders": [)" + ladder + "]}"; };
  auto ladder = [](const std::string& fields, const std::string& points) {
    return R"({"preset": "qwen3-30b-a3b", "format": "mxfp8", )" + fields + R"("points": [)" + points + "]}";
  };
  EXPECT_EQ(parse_tune_ladders(doc(ladder("", ok_point)), "t.json").size(), 1u);
  struct Bad {
    std::string text, names;
  };
  const std::vector<Bad> bad = {
      {R"({"entries": []})", "\"ladders\" array"},
      {"[1, 2]", "\"ladders\" array"},
      {doc(R"({"preset": "qwen9", "format": "mxfp8", "points": [)" + ok_point + "]}"), "unknown preset 'qwen9'"},
      {doc(ladder(R"("warp_weights": "odd", )", ok_point)), "warp_weights 'odd'"},
      {doc(ladder(R"("warp_weights": "tiled-only", )", ok_point)), "'classical_reads' is missing"},
      {doc(ladder("", "")), "'points' must be a non-empty array"},
      {doc(ladder("", ok_point + ", " + ok_point)), "batch 8 after 8"},
      {doc(ladder("", ok_point + R"(, {"batch": 16, "classical_us": 12})")), "point 1: 'warp_us' is missing"},
      {doc(ladder("", R"({"batch": 8, "classical_us": 12})")), "no 'warp_us' times"},
      {doc(ladder("", R"({"batch": 8, "warp_us": 10})")), "no 'classical_us' times"},
      {doc(ladder("", R"({"batch": 8, "warp_us": 0, "classical_us": 12})")), "'warp_us' = 0 must be > 0"},
      {doc(ladder("", R"({"batch": 8, "warp_us": "ten", "classical_us": 12})")), "'warp_us' must be a number"},
      {doc(ladder("", R"({"batch": 0, "warp_us": 10, "classical_us": 12})")), "'batch' = 0 is out of range"},
  };
  for (const Bad& b : bad) {
    try {
      parse_tune_ladders(b.text, "t.json");
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(b.names), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("t.json", 0), 0u) << e.what();
    }
  }
  // FP8 block-128 ladders carry warp_us = 0 (warp decode does not run them): not read.
  const auto fp8 = parse_tune_ladders(
      doc(R"({"preset": "qwen3-30b-a3b", "format": "fp8-block128", "points": [{"batch": 8, "warp_us": 0, "classical_us": 12}]})"),
      "t.json");
  ASSERT_EQ(fp8.size(), 1u);
  EXPECT_TRUE(fp8[0].warp_us.empty());
}

// The CLI on two rounds of one tune: the table holds the best-of-rounds
// entries and the ladders say how many rounds they combine.
TEST(CrossoverMerge, CombinesRoundsAndRefusesMixedCards) {
  auto tune = [](const std::string& card, double warp64) {
    return R"({"header": {"card": ")" + card + R"(", "command": "bench-moe --tune", "commit": "abc"}, "entries": [],
      "ladders": [{"preset": "qwen3-30b-a3b", "format": "bf16", "crossover": 0, "points": [
        {"batch": 32, "warp_us": 100, "classical_us": 103, "warp_sm_clock_mhz": 1980},
        {"batch": 64, "warp_us": )" + std::to_string(warp64) + R"(, "classical_us": 100},
        {"batch": 128, "warp_us": 120, "classical_us": 90}]}]})";
  };
  const std::string slow = write_temp_file(tune("Card A", 102.5)), fast = write_temp_file(tune("Card A", 101.0)),
                    other = write_temp_file(tune("Card B", 101.0));
  const std::string out = slow + ".merged.json";
  const test::CliResult one = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + out + " " + slow);
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_NE(one.output.find("# crossover qwen3-30b-a3b bf16: B >= 64"), std::string::npos) << one.output;
  EXPECT_EQ(CrossoverTable::load(out).crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kBF16), 64);

  const test::CliResult two = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + out + " " + slow + " " + fast);
  EXPECT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("qwen3-30b-a3b bf16: 2 rounds"), std::string::npos) << two.output;
  EXPECT_EQ(CrossoverTable::load(out).crossover(preset_shape("qwen3-30b-a3b"), WeightFormat::kBF16), 128);
  const nlohmann::json merged = nlohmann::json::parse(read_file(out));
  const nlohmann::json& lad = merged.at("ladders").at(0);
  EXPECT_EQ(lad.at("rounds"), 2);
  EXPECT_EQ(lad.at("crossover"), 128);
  EXPECT_EQ(lad.at("points").at(1).at("warp_us"), 101.0);
  EXPECT_FALSE(lad.at("points").at(0).contains("warp_sm_clock_mhz"));  // one round's clock
  EXPECT_EQ(merged.at("header").at("card"), "Card A");
  EXPECT_EQ(merged.at("header").at("commands").size(), 2u);
  EXPECT_FALSE(merged.at("header").contains("command"));

  const test::CliResult mixed = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + out + " " + slow + " " + other);
  EXPECT_NE(mixed.status, 0);
  EXPECT_NE(mixed.output.find("on Card A"), std::string::npos) << mixed.output;
  EXPECT_NE(mixed.output.find("a table is one card's"), std::string::npos) << mixed.output;
  const std::string empty = write_temp_file(R"({"header": {"card": "Card A"}, "entries": [], "ladders": []})");
  const test::CliResult none = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + out + " " + empty);
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.output.find("holds no ladders"), std::string::npos) << none.output;
  for (const auto& p : {slow, fast, other, out, empty}) std::remove(p.c_str());
}

// A merged point's configuration labels are those of the round whose time
// it kept: rounds that timed another classical configuration at a batch (a
// build between them, say) must not leave one round's label on another's
// time.
TEST(CrossoverMerge, LabelsAPointWithTheConfigurationOfTheRoundItKept) {
  auto tune = [](double cl32, const std::string& cfg32, double w32, const std::string& wcfg32) {
    return R"({"header": {"card": "Card A", "command": "bench-moe --tune", "commit": "abc"}, "entries": [],
      "ladders": [{"preset": "qwen3-30b-a3b", "format": "mxfp8", "points": [
        {"batch": 32, "warp_us": 100, "classical_us": )" + std::to_string(cl32) + R"(, "config": ")" + cfg32 +
           R"(", "w8a16_us": )" + std::to_string(w32) + R"(, "w8a16_config": ")" + wcfg32 + R"("},
        {"batch": 64, "warp_us": 150, "classical_us": 140, "config": "cl/t16", "w8a16_us": 145, "w8a16_config": "w/t16"}]}]})";
  };
  // Round 1 faster on the classical path at 32, round 2 on W8A16 there.
  const std::string r1 = write_temp_file(tune(110, "cl/t8/one", 130, "w/t8/one"));
  const std::string r2 = write_temp_file(tune(120, "cl/t8/two", 125, "w/t8/two"));
  const std::string out = r1 + ".merged.json";
  const test::CliResult res = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + out + " " + r1 + " " + r2);
  ASSERT_EQ(res.status, 0) << res.output;
  const nlohmann::json pts = nlohmann::json::parse(read_file(out)).at("ladders").at(0).at("points");
  EXPECT_EQ(pts.at(0).at("classical_us"), 110.0);
  EXPECT_EQ(pts.at(0).at("config"), "cl/t8/one");
  EXPECT_EQ(pts.at(0).at("w8a16_us"), 125.0);
  EXPECT_EQ(pts.at(0).at("w8a16_config"), "w/t8/two");
  EXPECT_EQ(pts.at(1).at("config"), "cl/t16");  // a tie keeps the first round's
  EXPECT_EQ(pts.at(1).at("w8a16_config"), "w/t16");
  for (const auto& p : {r1, r2, out}) std::remove(p.c_str());
}

// A merged table is an input like any tune: its ladders count the rounds
// they combine, its header's commands and commits carry over. A file given
// twice, or a header field of the wrong type, is refused by name; a
// command line that is not UTF-8 (an output path in another encoding)
// does not stop the table from being written.
TEST(CrossoverMerge, TakesMergesAndRefusesRepeatsAndBadHeaders) {
  auto tune = [](double warp64, const std::string& commit) {
    return R"({"header": {"card": "Card A", "command": "bench-moe --tune", "commit": )" + commit +
           R"(}, "entries": [], "ladders": [{"preset": "qwen3-30b-a3b", "format": "bf16", "points": [
        {"batch": 32, "warp_us": 100, "classical_us": 103},
        {"batch": 64, "warp_us": )" + std::to_string(warp64) + R"(, "classical_us": 100}]}]})";
  };
  const std::string a = write_temp_file(tune(102.5, "\"c1\"")), b = write_temp_file(tune(101.0, "\"c2\"")),
                    c = write_temp_file(tune(100.5, "\"c3\"")), bad = write_temp_file(tune(100.5, "null"));
  const std::string ab = a + ".ab.json", abc = a + ".abc.json";
  const test::CliResult r1 = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + ab + " " + a + " " + b);
  ASSERT_EQ(r1.status, 0) << r1.output;
  const test::CliResult r2 = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + abc + " " + ab + " " + c);
  ASSERT_EQ(r2.status, 0) << r2.output;
  EXPECT_NE(r2.output.find("qwen3-30b-a3b bf16: 3 rounds"), std::string::npos) << r2.output;
  const nlohmann::json m = nlohmann::json::parse(read_file(abc));
  EXPECT_EQ(m.at("ladders").at(0).at("rounds"), 3);
  EXPECT_EQ(m.at("ladders").at(0).at("files"), nlohmann::json({a, b, c}));
  EXPECT_EQ(m.at("header").at("commits"), nlohmann::json({"c1", "c2", "c3"}));
  EXPECT_EQ(m.at("header").at("commands").size(), 3u);
  EXPECT_EQ(m.at("ladders").at(0).at("points").at(1).at("warp_us"), 100.5);

  const test::CliResult twice = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + abc + " " + a + " " + b + " " + a);
  EXPECT_NE(twice.status, 0);
  EXPECT_NE(twice.output.find(a + " is given twice"), std::string::npos) << twice.output;
  const test::CliResult null_commit = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + abc + " " + bad);
  EXPECT_EQ(null_commit.status, 1) << null_commit.output;
  EXPECT_NE(null_commit.output.find(bad + ": header 'commit' must be a string"), std::string::npos)
      << null_commit.output;

  const std::string latin1 = a + ".caf\xe9.json";  // "café" in Latin-1: not UTF-8
  const test::CliResult r3 = test::run_cli(WD_CLI_PATH, "crossover-merge -o " + latin1 + " " + a);
  EXPECT_EQ(r3.status, 0) << r3.output;
  const nlohmann::json l = nlohmann::json::parse(read_file(latin1));
  EXPECT_NE(l.at("header").at("merged_by").get<std::string>().find("caf\xEF\xBF\xBD.json"), std::string::npos);
  for (const auto& p : {a, b, c, bad, ab, abc, latin1}) std::remove(p.c_str());
}

}  // namespace
}  // namespace wd
