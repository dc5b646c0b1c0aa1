// The warpdecode binary as a user runs it: exit status and the one-line error.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "test_support.h"

namespace {

using Result = wd::test::CliResult;

Result run(const std::string& args) { return wd::test::run_cli(WD_CLI_PATH, args); }

void expect_error(const std::string& args, const std::string& message) {
  const Result r = run(args);
  EXPECT_NE(r.status, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
}

TEST(Cli, HelpListsOnlyWorkingSubcommands) {
  const Result r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("info"), std::string::npos);
  EXPECT_NE(r.output.find("check"), std::string::npos);
#ifndef WD_HAVE_CUDA
  EXPECT_EQ(r.output.find("bench-moe"), std::string::npos);
#endif
}

TEST(Cli, InfoRuns) {
  const Result r = run("info");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("build   warpdecode"), std::string::npos) << r.output;
}

TEST(Cli, CheckPassesOnTinyPreset) {
  const Result r = run("check --preset tiny --batch 3");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("checks passed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu fp32"), std::string::npos) << r.output;
}

TEST(Cli, CheckTakesACustomShape) {
  const Result r = run("check --preset tiny --hidden 96 --intermediate 64 --experts 5 --top-k 2 --batch 2");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("H=96 I=64 E=5 K=2"), std::string::npos) << r.output;
}

TEST(Cli, BadInputGetsOneClearError) {
  expect_error("check --preset qwen9", "unknown preset 'qwen9'");
  expect_error("check --preset tiny --batch 0", "batch = 0");
  expect_error("check --preset tiny --top-k 0", "top-k K = 0");
  expect_error("check --preset tiny --top-k 17", "top-k K = 17");
  expect_error("check --preset tiny --hidden 100", "multiple of 32");
  expect_error("check --preset tiny --format fp4", "unknown format 'fp4'");
  expect_error("frobnicate", "subcommand");
  // Batch lists are parsed before anything needs a GPU.
  expect_error("accuracy --preset tiny --batch 8-4", "batch '8-4'");
  expect_error("accuracy --preset tiny --drift-batch 0", "batch '0'");
#ifdef WD_HAVE_CUDA
  expect_error("bench-moe --batch 1-64:0", "batch '1-64:0'");
  expect_error("bench-moe --tune --tune-batch 4097", "batch '4097'");
  expect_error("bench-moe --routing zipf", "zipf not in {uniform,balanced}");
#endif
}

}  // namespace
