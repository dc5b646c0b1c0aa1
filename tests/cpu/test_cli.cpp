// The warpdecode binary as a user runs it: exit status and the one-line error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
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
    // An implementation of its own beside the reference: what fails on a
    // logic bug the reference shares with "cpu fp32".
    EXPECT_NE(r.output.find(f + " cpu classical emulation, BF16 roundings"), std::string::npos) << f << r.output;
  }
  // The router's routing against top-K of its softmax, once (one router).
  const size_t router = r.output.find("cpu router (top-k of the softmax)");
  EXPECT_NE(router, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("cpu router", router + 1), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all 7 checks passed"), std::string::npos) << r.output;
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
  // Integers are decimal: CLI11 alone would read 010 as 8 and wrap -1.
  expect_error("check --preset tiny --batch 010", "--batch: '010' is not a decimal integer");
  expect_error("check --preset tiny --hidden 0x40", "--hidden: '0x40' is not a decimal integer");
  expect_error("check --preset tiny --seed -1", "--seed: '-1' is negative");
  expect_error("check --preset tiny --seed +1", "--seed: '+1' is not a decimal integer");
  expect_error("accuracy --preset tiny --seeds 01", "--seeds: '01' is not a decimal integer");
  expect_error("dispatch --max-batch 1e3", "--max-batch: '1e3' is not a decimal integer");
  EXPECT_EQ(run("check --preset tiny --batch 10 --seed 0 --format bf16").status, 0);
  // Batch lists are parsed before anything needs a GPU.
  expect_error("accuracy --preset tiny --batch 8-4", "batch '8-4'");
  expect_error("accuracy --preset tiny --drift-batch 0", "batch '0'");
  // Checked before the one-layer study runs (its first line names the
  // seeds), not after it; the option named is the one given.
  for (const auto& [args, message] : std::initializer_list<std::pair<const char*, const char*>>{
           {"--drift-layers 2 --drift-inputs foo", "unknown input kind 'foo'"},
           {"--drift-inputs foo", "unknown input kind 'foo'"},
           {"--json /nonexistent-dir/a.json", "cannot write '/nonexistent-dir/a.json': no directory"}}) {
    const std::string a = std::string("accuracy --preset tiny --batch 1 --seeds 1 ") + args;
    expect_error(a, message);
    EXPECT_EQ(run(a).output.find("seeds from"), std::string::npos) << a;
  }
  expect_error("accuracy --model /nonexistent --drift-only", "(drop --drift-only)");
  expect_error("accuracy --model /nonexistent --drift-layers 2", "(drop --drift-layers)");
#ifdef WD_HAVE_CUDA
  expect_error("bench-moe --batch 1-64:0", "batch '1-64:0'");
  expect_error("bench-moe --tune --tune-batch 4097", "batch '4097'");
  expect_error("bench-moe --routing zipf", "zipf not in {uniform,balanced}");
  expect_error("bench-moe --untile", "--untile requires --tune-untiled");
  expect_error("bench-moe --hidden 3072 --tune", "--hidden excludes --tune");
  expect_error("bench-moe --tune-untiled --top-k 4", "--top-k excludes --tune-untiled");
  expect_error("bench-moe --preset qwen9", "unknown preset 'qwen9'");
  // Options the run would only trip on after measuring, or misread, are
  // refused before anything needs a GPU.
  expect_error("bench-moe --bw-gib -1", "--bw-gib = -1 must be in (0, 1024]");
  expect_error("bench-moe --calls 0", "--calls >= 1");
  expect_error("bench-moe --classical-config t64/tma/pdl,t9/fancy", "--classical-config 't9/fancy'");
  expect_error("bench-moe --tune --tune-untiled", "--tune excludes --tune-untiled");
  expect_error("bench-moe --json /nonexistent-dir/b.json", "cannot write '/nonexistent-dir/b.json'");
  expect_error("bench-moe --tune --tune-json /nonexistent-dir/t.json", "cannot write '/nonexistent-dir/t.json'");
#endif
  expect_error("dispatch --upload fancy", "--upload 'fancy'");
  expect_error("dispatch --policy slowest", "--policy 'slowest'");
  expect_error("dispatch --sm90a maybe", "--sm90a 'maybe'");
  expect_error("dispatch --table /nonexistent/crossover.json", "cannot read '/nonexistent/crossover.json'");
}

// The crossover and path columns of `warpdecode dispatch`'s row for this
// format, upload and batch ("" when there is none).
std::pair<std::string, std::string> dispatch_row(const std::string& output, const std::string& format,
                                                 const std::string& upload, int batch) {
  size_t start = 0;
  while (start < output.size()) {
    const size_t end = std::min(output.find('\n', start), output.size());
    std::istringstream line(output.substr(start, end - start));
    start = end + 1;
    std::string shape, f, u, crossover, path;
    int b = 0;
    if (line >> shape >> f >> u >> crossover >> b >> path && f == format && u == upload && b == batch)
      return {crossover, path};
  }
  return {};
}
std::string dispatch_path(const std::string& output, const std::string& format, const std::string& upload, int batch) {
  return dispatch_row(output, format, upload, batch).second;
}

// One row `warpdecode dispatch` must print: this format, upload and batch
// take this path ("" where it prints no such row).
struct PathRow {
  const char* format;
  const char* upload;
  int batch;
  const char* path;
};

// Runs `warpdecode ARGS`, which must succeed and print every row; returns its
// result for further checks.
Result expect_paths(const std::string& args, std::initializer_list<PathRow> rows) {
  const Result r = run(args);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.output;
  for (const PathRow& row : rows)
    EXPECT_EQ(dispatch_path(r.output, row.format, row.upload, row.batch), row.path)
        << row.format << " " << row.upload << " B=" << row.batch << "\n" << r.output;
  return r;
}

// `warpdecode dispatch` applies MoeDispatch's rule to the table it is given:
// the default upload's entry, the tiled one for tiled weights, warp decode
// for tiled-only weights up to its maximum, FP8 block-128 always classical,
// and under bf16-activations without the sm_90a kernels a batch past warp
// decode's maximum refused.
TEST(Cli, DispatchShowsEachBatchsPath) {
  const std::string name = wd::test::write_temp_file(R"({"entries": [
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 48},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 96,
     "warp_weights": "tiled"},
    {"hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8, "format": "mxfp8", "crossover": 384,
     "warp_weights": "tiled-only"}]})");
  ASSERT_FALSE(name.empty());
  // (--sm90a no: on sm_90a the classical path reads tiled-only MXFP8 too.)
  const std::string with_table = std::string(" --table ") + name;
  const std::string q30 = "dispatch --preset qwen3-30b-a3b ";
  const Result r = expect_paths(q30 + "--format mxfp8,fp8-block128 --batch 1,47,48,95,96 --sm90a no" + with_table,
                                {{"mxfp8", "default", 47, "warp"},
                                 {"mxfp8", "default", 48, "classical"},
                                 {"mxfp8", "tiled", 95, "warp"},
                                 {"mxfp8", "tiled", 96, "classical"},
                                 {"fp8-block128", "default", 1, "classical"},
                                 {"fp8-block128", "tiled", 1, ""},  // no tiled copies of it
                                 // Tiled-only weights: warp decode past both crossovers.
                                 {"mxfp8", "tiled-only", 96, "warp"}});
  EXPECT_NE(r.output.find("96  warp       (the classical path cannot read tiled-only weights)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("95  warp       (the classical path"), std::string::npos) << r.output;
  // ... and refused past its maximum.
  expect_paths(q30 + "--format bf16 --batch 4096,4097 --upload tiled-only --max-batch 8192 --sm90a no" + with_table,
               {{"bf16", "tiled-only", 4096, "warp"}, {"bf16", "tiled-only", 4097, "refused"}});
  // Un-tiled for the classical path: from its own crossover on, and past warp decode's maximum.
  const Result untiled =
      expect_paths(q30 + "--format mxfp8,bf16 --batch 383,384,4096 --upload untiled --sm90a no" + with_table,
                   {{"mxfp8", "untiled", 383, "warp"},
                    {"mxfp8", "untiled", 384, "classical"},
                    {"bf16", "untiled", 384, "warp"},  // no BF16 entry
                    {"bf16", "untiled", 4096, "warp"}});
  EXPECT_NE(untiled.output.find("384  classical  untile + "), std::string::npos) << untiled.output;
  expect_paths(q30 + "--format bf16 --batch 4096,4097 --upload untiled --max-batch 8192" + with_table,
               {{"bf16", "untiled", 4096, "warp"}, {"bf16", "untiled", 4097, "classical"}});
  // BF16 tiled-only weights on sm_90a: the classical path reads them as they
  // are, from the built-in tiled-only crossover (112) on, past warp decode's
  // maximum too; without the sm_90a kernels warp decode alone, refused past it.
  // (--card h200: the built-in H200 table whatever card this machine has.)
  const Result direct = expect_paths(q30 + "--format bf16 --batch 111,112 --upload tiled-only --sm90a yes --card h200",
                                     {{"bf16", "tiled-only", 111, "warp"}, {"bf16", "tiled-only", 112, "classical"}});
  EXPECT_NE(direct.output.find("(reads the tiled copies)"), std::string::npos) << direct.output;
  // MXFP8 too, in W8A16, from its tiled-only crossover read as it is (80
  // built in), where un-tiling it first starts at 384.
  const Result mx = expect_paths(q30 + "--format mxfp8 --batch 79,80,383,384 --upload tiled-only,untiled --sm90a yes --card h200",
                                 {{"mxfp8", "tiled-only", 79, "warp"},
                                  {"mxfp8", "tiled-only", 80, "classical"},
                                  {"mxfp8", "untiled", 80, "classical"},  // on sm_90a the scratch goes unused
                                  {"mxfp8", "untiled", 79, "warp"}});
  EXPECT_NE(mx.output.find("/a16/silu/pdl (reads the tiled copies)"), std::string::npos) << mx.output;
  expect_paths(q30 + "--format mxfp8 --batch 383,384 --upload untiled --sm90a no --card h200",
               {{"mxfp8", "untiled", 383, "warp"}, {"mxfp8", "untiled", 384, "classical"}});
  expect_paths(q30 + "--format bf16 --batch 4097 --upload tiled-only --max-batch 8192 --sm90a yes --card h200",
               {{"bf16", "tiled-only", 4097, "classical"}});
  expect_paths(q30 + "--format bf16 --batch 4096,4097 --upload tiled-only --max-batch 8192 --sm90a no --card h200",
               {{"bf16", "tiled-only", 4096, "warp"}, {"bf16", "tiled-only", 4097, "refused"}});
  // Past --max-batch MoeDispatch refuses a batch on either path.
  const Result past = expect_paths(q30 + "--format bf16 --batch 8,9,200 --upload default,tiled-only --max-batch 8 "
                                         "--sm90a yes --card h200",
                                   {{"bf16", "default", 8, "warp"},
                                    {"bf16", "default", 9, "refused"},
                                    {"bf16", "default", 200, "refused"},
                                    {"bf16", "tiled-only", 9, "refused"}});
  EXPECT_NE(past.output.find("batch = 9 is past --max-batch = 8"), std::string::npos) << past.output;
  EXPECT_NE(past.output.find("the classical path up to B = 8 (--max-batch)"), std::string::npos) << past.output;
  // The H100's built-in table (README): BF16 from 72 on the default upload,
  // 160 on tiled-only weights read as they are (the H200's: 64 and 112).
  const Result h100 = expect_paths(q30 + "--format bf16 --batch 71,72,159,160 --upload default,tiled-only --sm90a yes "
                                         "--card h100",
                                   {{"bf16", "default", 71, "warp"},
                                    {"bf16", "default", 72, "classical"},
                                    {"bf16", "tiled-only", 159, "warp"},
                                    {"bf16", "tiled-only", 160, "classical"}});
  EXPECT_NE(h100.output.find("crossover table: built-in (H100)"), std::string::npos) << h100.output;
  const Result h200 = expect_paths(q30 + "--format bf16 --batch 63,64 --upload default --card h200",
                                   {{"bf16", "default", 63, "warp"}, {"bf16", "default", 64, "classical"}});
  EXPECT_NE(h200.output.find("crossover table: built-in (H200)"), std::string::npos) << h200.output;
  // bf16-activations without the sm_90a kernels: MXFP8 past warp decode's maximum refused.
  expect_paths(q30 + "--format mxfp8 --batch 4096,4097 --upload default --policy bf16-activations --sm90a no "
                     "--max-batch 8192" + with_table,
               {{"mxfp8", "default", 4096, "warp"}, {"mxfp8", "default", 4097, "refused"}});
  std::remove(name.c_str());
}

// Warp decode's largest batch is the one MoeDispatch sizes it to: below 4096
// where a gate_up block's B·K routing entries outgrow its shared memory (3200
// at K = 16), asked of the kernels' checks in a CUDA build (no GPU needed); a
// build without CUDA has no kernels to ask and shows 4096.
TEST(Cli, DispatchStopsWarpDecodeAtItsLargestBatchForTheShape) {
#if defined(WD_HAVE_CUDA)
  const int largest = 3200;
#else
  const int largest = 4096;
#endif
  const std::string k16 = "dispatch --preset qwen3-30b-a3b --top-k 16 --card h200 --format bf16 --upload tiled-only "
                          "--sm90a no --max-batch 8192 --batch ";
  const Result r = expect_paths(k16 + std::to_string(largest) + "," + std::to_string(largest + 1),
                                {{"bf16", "tiled-only", largest, "warp"}, {"bf16", "tiled-only", largest + 1, "refused"}});
  EXPECT_NE(r.output.find("warp decode up to B = " + std::to_string(largest) + ","), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("past warp decode's maximum " + std::to_string(largest)), std::string::npos) << r.output;
  // K = 8 keeps 4096 in either build.
  const Result k8 = expect_paths(
      "dispatch --preset qwen3-30b-a3b --card h200 --format bf16 --upload tiled-only --sm90a no --max-batch 8192 "
      "--batch 4096,4097",
      {{"bf16", "tiled-only", 4096, "warp"}, {"bf16", "tiled-only", 4097, "refused"}});
  EXPECT_NE(k8.output.find("warp decode up to B = 4096,"), std::string::npos) << k8.output;
}

// The crossover column says "none" where no batch reaches the classical path
// through it: W8A16 under bf16-activations without the sm_90a kernels, and
// MXFP8 on a shape the classical path does not take (H, I not multiples of
// 128), where every batch up to warp decode's maximum runs warp decode.
TEST(Cli, DispatchCrossoverIsNoneWhereNothingSwitches) {
  const std::string q30 = "dispatch --preset qwen3-30b-a3b --card h200 --format mxfp8 --upload default ";
  const Result a16 = expect_paths(q30 + "--policy bf16-activations --sm90a no --batch 64,128",
                                  {{"mxfp8", "default", 64, "warp"}, {"mxfp8", "default", 128, "warp"}});
  EXPECT_EQ(dispatch_row(a16.output, "mxfp8", "default", 128).first, "none") << a16.output;
  const Result runs = expect_paths(q30 + "--policy bf16-activations --sm90a yes --batch 64,128", {});
  EXPECT_NE(dispatch_row(runs.output, "mxfp8", "default", 128).first, "none") << runs.output;
  const Result odd = expect_paths(
      "dispatch --hidden 2880 --intermediate 2880 --experts 32 --top-k 4 --card h200 --format mxfp8,bf16 "
      "--upload default --sm90a yes --batch 48,512",
      {{"mxfp8", "default", 48, "warp"}, {"mxfp8", "default", 512, "warp"}, {"bf16", "default", 512, "classical"}});
  EXPECT_EQ(dispatch_row(odd.output, "mxfp8", "default", 512).first, "none") << odd.output;
  EXPECT_NE(dispatch_row(odd.output, "bf16", "default", 512).first, "none") << odd.output;
}

}  // namespace
