// `warpdecode check --model DIR` and `warpdecode accuracy --model DIR` as a
// user runs them: one MoE layer of a checkpoint, its real weights and
// router, against the FP64 reference (on checkpoints the tests write, and
// the transformers fixture). Without a GPU only the CPU rows and models run;
// the GPU rows run on the device (scripts/gpu_check.sh).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "model_files.h"

#include "test_support.h"

namespace wd::model {
namespace {

using Result = wd::test::CliResult;

Result run(const std::string& args) { return wd::test::run_cli(WD_CLI_PATH, args); }

bool has(const Result& r, const std::string& s) { return r.output.find(s) != std::string::npos; }

// The row of `format` (padded to the format column) and `path`, judged `result`.
bool row(const Result& r, std::string format, const std::string& path, const std::string& result) {
  format.resize(12, ' ');
  const size_t at = r.output.find(format + " " + path);
  if (at == std::string::npos) return false;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at) + " ";
  return line.find(" " + result + " ") != std::string::npos;
}

struct ErrorCase {
  std::string args, message;
};

// Each command fails with its one-line message.
void expect_errors(const std::vector<ErrorCase>& cases) {
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_NE(r.status, 0) << c.args << "\n" << r.output;
    EXPECT_TRUE(has(r, c.message)) << c.args << "\n" << r.output;
  }
}

TEST(CheckCli, ChecksTheFirstMoeLayerOfACheckpointInEveryFormat) {
  testing::TinyModelSpec spec;  // H 64, I 32, E 8, K 2; layer 1 dense
  spec.shards = 2;
  const std::string dir = testing::tiny_model_dir("check-bf16", spec);
  const Result r = run("check --model " + dir + " --batch 3");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "check " + dir + " layer 0 (MoE layer 1 of 2): H=64 I=32 E=8 K=2, B=3")) << r.output;
  for (const char* f : {"bf16", "mxfp8", "fp8-block128"}) EXPECT_TRUE(row(r, f, "cpu fp32", "pass")) << f << r.output;
  EXPECT_TRUE(has(r, "checks passed")) << r.output;

  const Result last = run("check --model " + dir + " --layer 2 --format mxfp8 --batch 2");
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_TRUE(has(last, "layer 2 (MoE layer 2 of 2)")) << last.output;
  EXPECT_TRUE(row(last, "mxfp8", "cpu fp32", "pass")) << last.output;
  EXPECT_FALSE(has(last, "bf16 ")) << last.output;
}

// Its own weights: two checkpoints that differ only in their values give
// different errors on the same inputs (a check that ignored the checkpoint
// would print the same figures for both).
TEST(CheckCli, ReadsTheCheckpointsOwnWeights) {
  testing::TinyModelSpec a;
  testing::TinyModelSpec b = a;
  b.seed = a.seed + 1;
  const Result ra = run("check --model " + testing::tiny_model_dir("check-seed-a", a) + " --format bf16 --batch 4");
  const Result rb = run("check --model " + testing::tiny_model_dir("check-seed-b", b) + " --format bf16 --batch 4");
  ASSERT_EQ(ra.status, 0) << ra.output;
  ASSERT_EQ(rb.status, 0) << rb.output;
  const auto figures = [](const Result& r) {
    const size_t at = r.output.find("cpu fp32");
    return r.output.substr(at, r.output.find('\n', at) - at);
  };
  EXPECT_NE(figures(ra), figures(rb)) << ra.output << rb.output;
}

TEST(CheckCli, Fp8CheckpointsRunTheirOwnBlocksWhereTheyAre128) {
  testing::TinyModelSpec spec;
  spec.dtype = testing::SourceDType::kFp8Block;
  spec.block = 128;  // ragged: H = 64 and I = 32 are one partial block
  const Result r = run("check --model " + testing::tiny_model_dir("check-fp8-128", spec) + " --batch 3");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"bf16", "mxfp8", "fp8-block128"}) EXPECT_TRUE(row(r, f, "cpu fp32", "pass")) << f << r.output;
  EXPECT_TRUE(has(r, "fp8-block128 weights: the checkpoint's own FP8 bytes and 128x128 block scales")) << r.output;

  spec.block = 24;  // blocks the classical path's FP8 format does not take
  const Result odd = run("check --model " + testing::tiny_model_dir("check-fp8-24", spec) + " --batch 3");
  ASSERT_EQ(odd.status, 0) << odd.output;
  EXPECT_TRUE(row(odd, "bf16", "cpu fp32", "pass")) << odd.output;
  EXPECT_TRUE(row(odd, "mxfp8", "cpu fp32", "pass")) << odd.output;
  EXPECT_TRUE(row(odd, "fp8-block128", "every path", "skip")) << odd.output;
  EXPECT_TRUE(has(odd, "the checkpoint's FP8 blocks are 24x24, fp8-block128 takes 128x128")) << odd.output;
  EXPECT_TRUE(has(odd, "all 5 checks passed (1 not run")) << odd.output;
  EXPECT_TRUE(has(odd, "mxfp8 weights: quantized from the checkpoint's dequantized FP8 values")) << odd.output;
  EXPECT_FALSE(has(odd, "fp8-block128 weights:")) << odd.output;

  const Result none = run("check --model " + testing::tiny_model_dir("check-fp8-24-only", spec) + " --format fp8-block128");
  EXPECT_NE(none.status, 0) << none.output;
  EXPECT_TRUE(has(none, "nothing was checked")) << none.output;
}

// The experts' tensors decide what the checkpoint holds, not config.json: an
// FP8 quantization_config kept beside BF16 experts (a dequantized copy, or
// experts left unconverted) takes fp8-block128 from the BF16 weights, as a
// BF16 checkpoint does, and names the BF16 values as the checkpoint's own.
TEST(CheckCli, AnFp8ConfigBesideBf16ExpertsReadsTheExperts) {
  const testing::TinyModelSpec spec;  // BF16
  const std::string dir = testing::tiny_model_dir("check-fp8-config-bf16", spec);
  nlohmann::json config = nlohmann::json::parse(testing::tiny_config_json(spec));
  config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 128}}};
  testing::write_file(dir + "/config.json", config.dump());
  const Result r = run("check --model " + dir + " --batch 3");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* f : {"bf16", "mxfp8", "fp8-block128"}) EXPECT_TRUE(row(r, f, "cpu fp32", "pass")) << f << r.output;
  EXPECT_TRUE(has(r, "bf16 weights: the checkpoint's values as BF16")) << r.output;
  EXPECT_TRUE(has(r, "fp8-block128 weights: quantized from the BF16 weights")) << r.output;
}

TEST(CheckCli, TheTransformersFixturePasses) {
  const std::string dir = std::string(WD_SOURCE_DIR) + "/tests/fixtures/qwen3moe-tiny";
  const Result r = run("check --model " + dir + " --batch 6");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "H=256 I=96 E=16 K=4, B=6")) << r.output;
  for (const char* f : {"bf16", "mxfp8", "fp8-block128"}) EXPECT_TRUE(row(r, f, "cpu fp32", "pass")) << f << r.output;
}

TEST(CheckCli, BadArgumentsGetOneClearError) {
  testing::TinyModelSpec spec;
  const std::string dir = testing::tiny_model_dir("check-errors", spec);
  expect_errors({
      {"check --model " + dir + " --layer 1", "--layer 1 is a dense layer, not an MoE layer"},
      {"check --model " + dir + " --layer 3", "--layer 3 is outside the model's layers [0, 3)"},
      {"check --model " + dir + " --layer -2", "--layer -2 must be >= 0"},
      {"check --model " + dir + " --preset tiny", "--model takes the checkpoint's shape: drop --preset"},
      {"check --model " + dir + " --hidden 128", "--model takes the checkpoint's shape: drop --hidden"},
      {"check --layer 0", "--layer needs --model"},
      {"check --model " + dir + "/missing", "config.json"},
  });
}

// The JSON `accuracy --json` wrote to path.
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(AccuracyCli, MeasuresACheckpointsLayer) {
  testing::TinyModelSpec spec;
  spec.hidden = 128;  // multiples of 128: the classical W8A8 path runs
  spec.moe_intermediate = 128;
  spec.experts = 16;
  spec.top_k = 4;
  const std::string dir = testing::tiny_model_dir("accuracy-model", spec);
  const std::string json = testing::make_temp_dir("accuracy-model-json") + "/acc.json";
  const Result r = run("accuracy --model " + dir + " --layer 2 --batch 4,8 --seeds 2 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "weights: " + dir + " layer 2 (MoE layer 2 of 2), the same layer for every seed")) << r.output;
  const auto doc = read_json(json);
  EXPECT_NE(doc["header"]["weights"].get<std::string>().find(dir + " layer 2"), std::string::npos);
  ASSERT_EQ(doc["records"].size(), 4u);  // 2 batches x 2 input kinds, MXFP8
  const std::string name = dir.substr(dir.find_last_of('/') + 1) + ":2";
  for (const auto& rec : doc["records"]) {
    EXPECT_EQ(rec["preset"], name);
    EXPECT_EQ(rec["shape"]["hidden"], 128);
    // Every path ran, and the W8A8 path's activation quantization costs
    // what it costs on synthetic weights: many times warp decode's error.
    for (const char* path : {"err_warp", "err_classical_bf16", "err_classical_fp8"})
      ASSERT_TRUE(rec[path].is_number()) << path << rec.dump();
    EXPECT_GT(rec["err_warp"].get<double>(), 0.0);
    EXPECT_LT(rec["err_warp"].get<double>(), 4e-3);
    EXPECT_GT(rec["ratio_fp8_over_warp"].get<double>(), 3.0) << rec.dump();
  }
}

// The checkpoint's own weights: two models that differ only in their values
// give different errors on the same inputs.
TEST(AccuracyCli, ReadsTheCheckpointsOwnWeights) {
  testing::TinyModelSpec a;
  testing::TinyModelSpec b = a;
  b.seed = a.seed + 1;
  std::string errs[2];
  int i = 0;
  for (const auto& spec : {a, b}) {
    const std::string dir = testing::tiny_model_dir("accuracy-seed-" + std::to_string(i), spec);
    const std::string json = dir + "-acc.json";
    const Result r = run("accuracy --model " + dir + " --batch 4 --inputs gaussian --seeds 1 --json " + json);
    ASSERT_EQ(r.status, 0) << r.output;
    // H = 64, I = 32: no W8A8 there, said so.
    EXPECT_TRUE(has(r, "not run: W8A8 needs H and I to be multiples of 128")) << r.output;
    const auto doc = read_json(json);
    ASSERT_EQ(doc["records"].size(), 1u);
    EXPECT_TRUE(doc["records"][0]["err_classical_fp8"].is_null());
    errs[i++] = doc["records"][0]["err_warp"].dump() + doc["records"][0]["err_weight_quant"].dump();
  }
  EXPECT_NE(errs[0], errs[1]);
}

// An FP8 checkpoint's FP8 block-128 records measure its own bytes and scales
// (AccuracyHarness.AGivenLayersOwnFp8WeightsAreMeasured shows a given FP8
// layer is the one measured); blocks other than 128 x 128 are not measured,
// said so, and nothing measurable is an error.
TEST(AccuracyCli, Fp8CheckpointsMeasureTheirOwnBlocks) {
  testing::TinyModelSpec spec;
  spec.dtype = testing::SourceDType::kFp8Block;
  spec.block = 128;
  const std::string dir = testing::tiny_model_dir("accuracy-fp8-128", spec);
  const std::string json = dir + "-acc.json";
  const std::string args = " --batch 3 --inputs gaussian --seeds 1 --format mxfp8,fp8-block128 --json " + json;
  const Result r = run("accuracy --model " + dir + args);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "bf16: the checkpoint's dequantized FP8 values rounded to BF16; mxfp8: quantized from the "
                     "checkpoint's dequantized FP8 values; fp8-block128: the checkpoint's own FP8 bytes and 128x128 "
                     "block scales"))
      << r.output;
  auto doc = read_json(json);
  EXPECT_NE(doc["header"]["weights"].get<std::string>().find("fp8-block128: the checkpoint's own FP8 bytes"),
            std::string::npos);
  ASSERT_EQ(doc["records"].size(), 2u);
  for (const auto& rec : doc["records"]) ASSERT_TRUE(rec["err_warp"].is_number()) << rec.dump();

  spec.block = 24;
  const std::string odd = testing::tiny_model_dir("accuracy-fp8-24", spec);
  const Result r24 = run("accuracy --model " + odd + args);
  ASSERT_EQ(r24.status, 0) << r24.output;
  EXPECT_TRUE(has(r24, "fp8-block128: not measured: the checkpoint's FP8 blocks are 24x24")) << r24.output;
  doc = read_json(json);
  ASSERT_EQ(doc["records"].size(), 1u);
  EXPECT_EQ(doc["records"][0]["format"], "mxfp8");
  EXPECT_EQ(doc["header"]["not_measured"].size(), 1u);
  expect_errors({{"accuracy --model " + odd + " --format fp8-block128",
                  "no format asked for can be measured on " + odd + " layer 0"}});
}

TEST(AccuracyCli, BadArgumentsGetOneClearError) {
  testing::TinyModelSpec spec;
  const std::string dir = testing::tiny_model_dir("accuracy-errors", spec);
  expect_errors({
      {"accuracy --model " + dir + " --drift-layers 2", "--model measures the checkpoint's layer alone"},
      {"accuracy --model " + dir + " --preset tiny", "--model takes the checkpoint's shape: drop --preset"},
      {"accuracy --model " + dir + " --layer 1", "--layer 1 is a dense layer, not an MoE layer"},
      {"accuracy --layer 0", "--layer needs --model"},
  });
}

}  // namespace
}  // namespace wd::model
