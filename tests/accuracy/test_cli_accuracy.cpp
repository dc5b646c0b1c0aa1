// `warpdecode accuracy` and `warpdecode report` as a user runs them, on the
// CPU models (--cpu: the same numbers whether or not the machine has a GPU).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace {

namespace fs = std::filesystem;

using Result = wd::test::CliResult;

Result run(const std::string& args) { return wd::test::run_cli(WD_CLI_PATH, args); }

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/wd-accuracy-cli-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(CliAccuracy, CpuModelsEndToEndThenReport) {
  TempDir t;
  const std::string json = (t.path / "acc.json").string();
  const Result r = run("accuracy --preset tiny --cpu --seeds 2 --batch 2,5 --format mxfp8,bf16 --drift-layers 3 "
                       "--drift-batch 3 --drift-seeds 1 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("CPU models of the paths"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# drift tiny mxfp8, B = 3"), std::string::npos) << r.output;
  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["header"]["source"], "cpu-model");
  EXPECT_FALSE(doc["header"].contains("card"));  // CPU models: no card figures in the header
  EXPECT_NE(doc["header"]["command"].get<std::string>().find("accuracy --preset tiny"), std::string::npos);
  ASSERT_EQ(doc["records"].size(), 2u * 2u * 2u);
  for (const auto& rec : doc["records"]) {
    EXPECT_EQ(rec["source"], "cpu-model");
    EXPECT_TRUE(rec["err_warp"].is_number());
  }
  ASSERT_EQ(doc["drift"].size(), 2u * 2u);  // (mxfp8, bf16) x (gaussian, outliers): --drift-inputs defaults to --inputs
  EXPECT_EQ(doc["drift"][0]["depth"].size(), 3u);

  const Result rep = run("report --accuracy " + json + " --out " + (t.path / "report").string());
  ASSERT_EQ(rep.status, 0) << rep.output;
  std::ifstream md(t.path / "report" / "REPORT.md");
  const std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("| tiny | mxfp8 | 2 | gaussian | cpu-model |"), std::string::npos) << text;
  EXPECT_NE(text.find("CPU models of the paths"), std::string::npos) << text;
}

// Warp decode does not stream FP8 block-128: its column on those rows is its
// error on MXFP8 weights, which the terminal table says (as the report
// does), and only for those rows.
TEST(CliAccuracy, TheTableSaysWhichWeightsWarpDecodeRan) {
  const Result fp8 = run("accuracy --preset tiny --cpu --seeds 1 --batch 2 --inputs gaussian --format fp8-block128");
  ASSERT_EQ(fp8.status, 0) << fp8.output;
  EXPECT_NE(fp8.output.find("# warp decode ran other weights in fp8-block128 rows: mxfp8\n"), std::string::npos)
      << fp8.output;
  const Result mx = run("accuracy --preset tiny --cpu --seeds 1 --batch 2 --inputs gaussian --format mxfp8,bf16");
  ASSERT_EQ(mx.status, 0) << mx.output;
  EXPECT_EQ(mx.output.find("warp decode ran other weights"), std::string::npos) << mx.output;
}

// The CPU models report a path only where the GPU runs it: W8A16 runs on the
// TMA tile, which H = 96, I = 64 does not fit (nor W8A8's groups of 128).
TEST(CliAccuracy, CpuModelsOfPathsTheGpuDoesNotRunAreNotReported) {
  const Result r = run("accuracy --preset tiny --hidden 96 --intermediate 64 --cpu --seeds 1 --batch 2 "
                       "--inputs gaussian --format mxfp8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("not run: W8A16 runs on the TMA tile"), std::string::npos) << r.output;
  const Result full = run("accuracy --preset tiny --cpu --seeds 1 --batch 2 --inputs gaussian --format mxfp8");
  ASSERT_EQ(full.status, 0) << full.output;
  EXPECT_NE(full.output.find("W8A16 (reference::classical_experts, BF16 activations)"), std::string::npos)
      << full.output;
}

TEST(CliAccuracy, ErrorsNameTheBadValue) {
  auto expect_error = [](const std::string& args, const std::string& msg) {
    const Result r = run(args);
    EXPECT_NE(r.status, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(msg), std::string::npos) << args << "\n" << r.output;
  };
  expect_error("accuracy --preset tiny --cpu --format fp4", "fp4");
  expect_error("accuracy --preset tiny --cpu --inputs uniform", "uniform");
  expect_error("accuracy --preset tiny --cpu --drift-layers many", "--drift-layers 'many'");
  expect_error("accuracy --preset tiny --cpu --seeds 0", "seeds = 0");
  expect_error("accuracy --preset tiny --cpu --drift-only", "--drift-only needs --drift-layers");
  // Options the run would not use are refused, not dropped.
  expect_error("accuracy --preset tiny --cpu --drift-only --drift-layers 2 --batch 4",
               "--batch does nothing with --drift-only");
  expect_error("accuracy --preset tiny --cpu --drift-only --drift-layers 2 --seeds 5",
               "--seeds does nothing with --drift-only");
  for (const char* opt : {"--drift-batch 2", "--drift-seeds 2", "--drift-inputs outliers", "--residual bf16"})
    expect_error(std::string("accuracy --preset tiny --cpu --batch 1 --seeds 1 ") + opt,
                 std::string(opt).substr(0, std::string(opt).find(' ')) + " does nothing without --drift-layers");
  expect_error("report --out /tmp/wd-nothing", "give --moe and/or --accuracy");
}

}  // namespace
