// `warpdecode compare`: rounds of one label reduce to their minimum, every
// other label's figures carry their change against the first, figures a
// label lacks are "-", and bad arguments are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "accuracy/compare.h"
#include "test_support.h"
#include "warpdecode/error.h"

namespace wd::report {
namespace {

using nlohmann::json;

json doc(const std::string& commit, double read, double layer, double gate_up, double extra_batch = 0) {
  json d = {{"header", {{"commit", commit}, {"read_tbps", read}}},
            {"records",
             {{{"preset", "qwen3-30b-a3b"},
               {"format", "fp8-block128"},
               {"batch", 4096},
               {"path", "classical"},
               {"config", "cl/t64/tma/silu/pdl"},
               {"us_median", layer},
               {"stages", {{{"name", "gate_up_gemm"}, {"us_median", gate_up}}, {{"name", "down_gemm"}, {"us_median", 1.0}}}}}}}};
  if (extra_batch > 0)
    d["records"].push_back({{"preset", "qwen3-30b-a3b"}, {"format", "fp8-block128"}, {"batch", 8}, {"path", "classical"},
                            {"config", "cl/t8/tma/pdl"}, {"us_median", extra_batch}});
  return d;
}

// The table's row for batch b (the line that starts with its key cells).
std::string row(const std::string& md, long b) {
  const std::string start = "| qwen3-30b-a3b | fp8-block128 | " + std::to_string(b) + " |";
  const size_t at = md.find(start);
  if (at == std::string::npos) return "";
  return md.substr(at, md.find('\n', at) - at);
}

TEST(Compare, RoundsTakeTheirMinimumAndLabelsTheirChange) {
  const std::string md = compare_table({{"old", doc("aaa", 4.50, 613.2, 337.3)},
                                        {"new", doc("bbb", 4.49, 600.0, 320.0)},
                                        {"old", doc("aaa", 4.52, 620.0, 330.0)},
                                        {"new", doc("bbb", 4.48, 594.0, 321.0)}},
                                       {{"gate_up_gemm"}});
  // layer: old min(613.2, 620.0), new min(600.0, 594.0) = -3.1 %; gate_up: 330.0 -> 320.0 = -3.0 %.
  EXPECT_EQ(row(md, 4096), "| qwen3-30b-a3b | fp8-block128 | 4096 | classical | cl/t64/tma/silu/pdl | 613.2 | 594.0 | "
                           "-3.1 % | 330.0 | 320.0 | -3.0 % |")
      << md;
  EXPECT_NE(md.find("- old (baseline): 2 rounds, commit aaa, read 4.500-4.520 TB/s"), std::string::npos) << md;
  EXPECT_NE(md.find("- new: 2 rounds, commit bbb, read 4.480-4.490 TB/s"), std::string::npos) << md;
  EXPECT_NE(md.find("| layer old | layer new | Δ | gate_up_gemm old | gate_up_gemm new | Δ |"), std::string::npos) << md;
  EXPECT_EQ(md.find("down_gemm"), std::string::npos) << "only the stages asked for";
}

TEST(Compare, WhatALabelLacksIsADash) {
  json b = doc("bbb", 4.5, 110.0, 55.0, 75.1);
  b["records"][0]["stages"].erase(1);  // no down_gemm
  const std::string md = compare_table({{"old", doc("aaa", 4.5, 100.0, 50.0)}, {"new", b}}, {{"down_gemm"}});
  EXPECT_EQ(row(md, 4096), "| qwen3-30b-a3b | fp8-block128 | 4096 | classical | cl/t64/tma/silu/pdl | 100.0 | 110.0 | "
                           "+10.0 % | 1.0 | - | - |")
      << md;
  // Only in the second label: no baseline, so no change either.
  EXPECT_EQ(row(md, 8), "| qwen3-30b-a3b | fp8-block128 | 8 | classical | cl/t8/tma/pdl | - | 75.1 | - | - | - | - |") << md;
}

// bench-moe with NVML records each layer's SM clock: a label's line gives
// their range over its rounds; a label without clocks says nothing of them.
TEST(Compare, LabelsCarryTheRangeOfTheirRecordsSmClock) {
  json a1 = doc("aaa", 4.5, 100.0, 50.0, 70.0), a2 = doc("aaa", 4.5, 101.0, 50.0);
  a1["records"][0]["sm_clock_mhz"] = 1755.0;
  a1["records"][1]["sm_clock_mhz"] = 1890.0;
  a2["records"][0]["sm_clock_mhz"] = 1725.0;
  json b = doc("bbb", 4.5, 99.0, 49.0);
  b["records"][0]["sm_clock_mhz"] = 1980.0;
  const std::string md = compare_table({{"old", a1}, {"new", b}, {"old", a2}, {"none", doc("ccc", 4.5, 98.0, 48.0)}}, {});
  EXPECT_NE(md.find("- old (baseline): 2 rounds, commit aaa, read 4.500 TB/s, SM clock 1725-1890 MHz\n"), std::string::npos)
      << md;
  // Each other label says how many of the baseline's rows it pairs (the
  // baseline's batch 8 has no partner).
  EXPECT_NE(md.find("- new: 1 round, commit bbb, read 4.500 TB/s, SM clock 1980 MHz, 1 of the baseline's 2 rows "
                    "paired\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- none: 1 round, commit ccc, read 4.500 TB/s, 1 of the baseline's 2 rows paired\n"),
            std::string::npos)
      << md;
}

// A key whose first record has no figure is still one row.
TEST(Compare, OneRowAKey) {
  json a = doc("aaa", 4.5, 100.0, 50.0);
  a["records"][0].erase("us_median");  // its stages alone were timed
  const std::string md = compare_table({{"old", a}, {"old", doc("aaa", 4.5, 100.0, 50.0)}}, {});
  EXPECT_EQ(row(md, 4096), "| qwen3-30b-a3b | fp8-block128 | 4096 | classical | cl/t64/tma/silu/pdl | 100.0 |") << md;
  EXPECT_EQ(md.find(row(md, 4096)), md.rfind(row(md, 4096))) << md;
}

TEST(Compare, RefusesWhatItCannotRead) {
  EXPECT_THROW(parse_labelled_file("old.json"), InvalidArgument);
  EXPECT_THROW(parse_labelled_file("=old.json"), InvalidArgument);
  EXPECT_THROW(parse_labelled_file("old="), InvalidArgument);
  EXPECT_EQ(parse_labelled_file("old=r1/a=b.json"), std::make_pair(std::string("old"), std::string("r1/a=b.json")));
  EXPECT_THROW(compare_table({}, {}), InvalidArgument);
  EXPECT_THROW(compare_table({{"old", json{{"header", json::object()}, {"records", json::array()}}}}, {}),
               InvalidArgument);
  // A stage no record has (a misspelling) is refused with the ones there are.
  try {
    compare_table({{"old", doc("aaa", 4.5, 100.0, 50.0)}}, {{"gate_upgemm"}});
    ADD_FAILURE() << "a stage no record has was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no record has the stage 'gate_upgemm' (stages in the inputs: down_gemm, "
                                         "gate_up_gemm)"),
              std::string::npos)
        << e.what();
  }
  // An accuracy file: records without timings.
  const json acc = {{"header", {{"tool", "warpdecode accuracy"}}},
                    {"records", {{{"preset", "qwen3-30b-a3b"}, {"format", "mxfp8"}, {"batch", 8}, {"err_warp", 1e-3}}}}};
  try {
    compare_table({{"old", doc("aaa", 4.5, 100.0, 50.0)}, {"acc", acc}}, {});
    ADD_FAILURE() << "an accuracy file was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("acc's file holds no bench-moe records"), std::string::npos) << e.what();
  }
}

TEST(Compare, FromTheCommandLine) {
  char tmpl[] = "/tmp/wd-compare-XXXXXX";
  const std::filesystem::path dir = mkdtemp(tmpl);
  std::ofstream(dir / "a.json") << doc("aaa", 4.5, 200.0, 100.0).dump();
  std::ofstream(dir / "b.json") << doc("bbb", 4.5, 190.0, 90.0).dump();
  // --stages first: the inputs after it stay inputs.
  const auto ok = test::run_cli(WD_CLI_PATH, "compare --stages gate_up_gemm,down_gemm old=" + (dir / "a.json").string() +
                                                 " new=" + (dir / "b.json").string());
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("| 200.0 | 190.0 | -5.0 % | 100.0 | 90.0 | -10.0 % | 1.0 | 1.0 | +0.0 % |"), std::string::npos)
      << ok.output;
  const auto bad = test::run_cli(WD_CLI_PATH, "compare old=" + (dir / "missing.json").string());
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("cannot read"), std::string::npos) << bad.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wd::report
