// The warpdecode binary as a user runs it: exit status and the one-line error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
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
  // No GPU subcommand line (other descriptions may name bench-moe's JSON);
  // the dispatch's rules are host logic, in every build.
  EXPECT_EQ(r.output.find("\n  bench-moe "), std::string::npos) << r.output;
#endif
  EXPECT_NE(r.output.find("\n  dispatch "), std::string::npos) << r.output;
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
  // Every weight format, FP8 block-128 included (the classical path's).
  for (std::string f : {"bf16", "mxfp8", "fp8-block128"}) {
    f.resize(12, ' ');  // the format column
    EXPECT_NE(r.output.find(f + " cpu fp32"), std::string::npos) << f << r.output;
  }
  const Result one = run("check --preset tiny --batch 3 --format fp8-block128");
  EXPECT_EQ(one.status, 0) << one.output;
  EXPECT_EQ(one.output.find("mxfp8"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("fp8-block128 cpu fp32"), std::string::npos) << one.output;
}

// Near-tied tokens are redrawn one at a time: a batch of 4096 draws (the
// whole batch redrawn until no token had a near-tie never ended at B = 1024
// on qwen3-30b-a3b).
TEST(Cli, CheckDrawsTheLargestBatch) {
  const Result r = run("check --preset tiny --batch 4096 --format bf16");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("B=4096"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("checks passed"), std::string::npos) << r.output;
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
  expect_error("dispatch --upload fancy", "--upload 'fancy'");
  expect_error("dispatch --policy slowest", "--policy 'slowest'");
  expect_error("dispatch --sm90a maybe", "--sm90a 'maybe'");
  expect_error("dispatch --table /nonexistent/crossover.json", "cannot read '/nonexistent/crossover.json'");
}

// The path column of `warpdecode dispatch`'s row for this format, upload and
// batch ("" when there is none).
std::string dispatch_path(const std::string& output, const std::string& format, const std::string& upload, int batch) {
  size_t start = 0;
  while (start < output.size()) {
    const size_t end = std::min(output.find('\n', start), output.size());
    std::istringstream line(output.substr(start, end - start));
    start = end + 1;
    std::string shape, f, u, crossover, path;
    int b = 0;
    if (line >> shape >> f >> u >> crossover >> b >> path && f == format && u == upload && b == batch) return path;
  }
  return "";
}

// `warpdecode dispatch` applies MoeDispatch's rule to the table it is given:
// the default upload's entry, the tiled one for tiled weights, warp decode
// for tiled-only weights up to its maximum, FP8 block-128 always classical,
// and under bf16-activations without the sm_90a kernels a batch past warp
// decode's maximum refused.
TEST(Cli, DispatchShowsEachBatchsPath) {
  char name[] = "/tmp/wd_cli_crossover_XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  const std::string table = R"({"entries": [
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 48},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 96,
     "warp_weights": "tiled"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 384,
     "warp_weights": "tiled-only"}]})";
  ASSERT_EQ(write(fd, table.data(), table.size()), ssize_t(table.size()));
  close(fd);
  const Result r = run(std::string("dispatch --preset qwen3-30b-a3b --format mxfp8,fp8-block128 --batch 1,47,48,95,96 "
                                   "--sm90a yes --table ") + name);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(dispatch_path(r.output, "mxfp8", "default", 47), "warp") << r.output;
  EXPECT_EQ(dispatch_path(r.output, "mxfp8", "default", 48), "classical") << r.output;
  EXPECT_EQ(dispatch_path(r.output, "mxfp8", "tiled", 95), "warp") << r.output;
  EXPECT_EQ(dispatch_path(r.output, "mxfp8", "tiled", 96), "classical") << r.output;
  EXPECT_EQ(dispatch_path(r.output, "fp8-block128", "default", 1), "classical") << r.output;
  EXPECT_EQ(dispatch_path(r.output, "fp8-block128", "tiled", 1), "") << r.output;  // no tiled copies of it
  // Tiled-only weights: warp decode past both crossovers, refused past its maximum.
  EXPECT_EQ(dispatch_path(r.output, "mxfp8", "tiled-only", 96), "warp") << r.output;
  EXPECT_NE(r.output.find("96  warp       (the classical path cannot read tiled-only weights)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("95  warp       (the classical path"), std::string::npos) << r.output;
  const Result only = run(std::string("dispatch --preset qwen3-30b-a3b --format bf16 --batch 64,65 --upload tiled-only "
                                      "--max-batch 64 --sm90a no --table ") + name);
  EXPECT_EQ(only.status, 0) << only.output;
  EXPECT_EQ(dispatch_path(only.output, "bf16", "tiled-only", 64), "warp") << only.output;
  EXPECT_EQ(dispatch_path(only.output, "bf16", "tiled-only", 65), "refused") << only.output;
  // Un-tiled for the classical path: from its own crossover on, and past warp decode's maximum.
  const Result untiled = run(std::string("dispatch --preset qwen3-30b-a3b --format mxfp8,bf16 --batch 383,384,4096 "
                                         "--upload untiled --sm90a yes --table ") + name);
  EXPECT_EQ(untiled.status, 0) << untiled.output;
  EXPECT_EQ(dispatch_path(untiled.output, "mxfp8", "untiled", 383), "warp") << untiled.output;
  EXPECT_EQ(dispatch_path(untiled.output, "mxfp8", "untiled", 384), "classical") << untiled.output;
  EXPECT_NE(untiled.output.find("384  classical  untile + "), std::string::npos) << untiled.output;
  EXPECT_EQ(dispatch_path(untiled.output, "bf16", "untiled", 384), "warp") << untiled.output;  // no BF16 entry
  EXPECT_EQ(dispatch_path(untiled.output, "bf16", "untiled", 4096), "warp") << untiled.output;
  const Result past = run(std::string("dispatch --preset qwen3-30b-a3b --format bf16 --batch 64,65 --upload untiled "
                                      "--max-batch 64 --table ") + name);
  EXPECT_EQ(past.status, 0) << past.output;
  EXPECT_EQ(dispatch_path(past.output, "bf16", "untiled", 64), "warp") << past.output;
  EXPECT_EQ(dispatch_path(past.output, "bf16", "untiled", 65), "classical") << past.output;
  // BF16 tiled-only weights on sm_90a: the classical path reads them as they
  // are, from the built-in tiled-only crossover (112) on, past warp decode's
  // maximum too; without the sm_90a kernels warp decode alone, refused past it.
  const Result direct = run("dispatch --preset qwen3-30b-a3b --format bf16 --batch 111,112 --upload tiled-only "
                            "--sm90a yes");
  EXPECT_EQ(direct.status, 0) << direct.output;
  EXPECT_EQ(dispatch_path(direct.output, "bf16", "tiled-only", 111), "warp") << direct.output;
  EXPECT_EQ(dispatch_path(direct.output, "bf16", "tiled-only", 112), "classical") << direct.output;
  EXPECT_NE(direct.output.find("(reads the tiled copies)"), std::string::npos) << direct.output;
  const Result capped = run("dispatch --preset qwen3-30b-a3b --format bf16 --batch 64,65 --upload tiled-only "
                            "--max-batch 64 --sm90a yes");
  EXPECT_EQ(capped.status, 0) << capped.output;
  EXPECT_EQ(dispatch_path(capped.output, "bf16", "tiled-only", 64), "warp") << capped.output;
  EXPECT_EQ(dispatch_path(capped.output, "bf16", "tiled-only", 65), "classical") << capped.output;
  const Result no90 = run("dispatch --preset qwen3-30b-a3b --format bf16 --batch 64,65 --upload tiled-only "
                          "--max-batch 64 --sm90a no");
  EXPECT_EQ(no90.status, 0) << no90.output;
  EXPECT_EQ(dispatch_path(no90.output, "bf16", "tiled-only", 64), "warp") << no90.output;
  EXPECT_EQ(dispatch_path(no90.output, "bf16", "tiled-only", 65), "refused") << no90.output;
  const Result a16 = run(std::string("dispatch --preset qwen3-30b-a3b --format mxfp8 --batch 64,65 --upload default "
                                     "--policy bf16-activations --sm90a no --max-batch 64 --table ") + name);
  EXPECT_EQ(a16.status, 0) << a16.output;
  EXPECT_EQ(dispatch_path(a16.output, "mxfp8", "default", 64), "warp") << a16.output;
  EXPECT_EQ(dispatch_path(a16.output, "mxfp8", "default", 65), "refused") << a16.output;
  std::remove(name);
}

}  // namespace
