// `warpdecode inspect` as a user runs it, on checkpoints written by the test
// (and on the transformers fixture once it exists).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "model_files.h"

#include "test_support.h"

namespace wd::model {
namespace {

using Result = wd::test::CliResult;

Result run(const std::string& args) { return wd::test::run_cli(WD_CLI_PATH, args); }

bool has(const Result& r, const std::string& s) { return r.output.find(s) != std::string::npos; }

TEST(InspectCli, PrintsShapeDtypesParametersAndMemory) {
  testing::TinyModelSpec spec;
  spec.shards = 2;
  const std::string dir = testing::tiny_model_dir("inspect", spec);
  const Result r = run("inspect " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  // H=64, 3 layers (layer 1 dense), 4/2 heads x 16, I=32, F=96, E=8, K=2, V=128, untied:
  //   embeddings 2*128*64 = 16384, final norm 64; per layer 2*64 norms + 64*64 q
  //   + 2*32*64 k,v + 64*64 o + 2*16 q/k norms = 12448; MoE layers router 512 +
  //   experts 8*3*32*64 = 49152; dense 3*96*64 = 18432.
  //   total 16448 + 3*12448 + 2*49664 + 18432 = 171552; active: 2 layers
  //   without 6 of 8 experts = 171552 - 2*36864 = 97824.
  EXPECT_TRUE(has(r, "Qwen3MoeForCausalLM, 2 safetensors files")) << r.output;
  EXPECT_TRUE(has(r, "layers      3 (2 MoE, 1 dense: 1)")) << r.output;
  EXPECT_TRUE(has(r, "hidden H=64, 4 q heads / 2 kv heads x head_dim 16")) << r.output;
  EXPECT_TRUE(has(r, "E=8 experts, top-K=2 (norm_topk_prob true), moe_intermediate I=32, per-expert tensors")) << r.output;
  EXPECT_TRUE(has(r, "dense mlp   intermediate 96")) << r.output;
  EXPECT_TRUE(has(r, "vocab       128, lm_head untied")) << r.output;
  EXPECT_TRUE(has(r, "dtypes      BF16 80 tensors 335.1 KiB")) << r.output;  // 3 + 3 * 8 + 2 * 25 + 3 tensors
  EXPECT_TRUE(has(r, "parameters  171552 total, 98304 in routed experts, 97824 active per token, 16384 embeddings"))
      << r.output;
  // bf16: 2 * 171552 = 343104 B; mxfp8: experts 98304 * 33/32 = 101376 B + the
  // other 73248 parameters in BF16 = 247872 B.
  EXPECT_TRUE(has(r, "  bf16        335.1 KiB")) << r.output;
  EXPECT_TRUE(has(r, "  mxfp8       242.1 KiB")) << r.output;
  // The tiled copies exist only where the shape takes their layouts: I = 32
  // takes the gate_up one (H % 64, I % 16) but not the down one (I % 64), so
  // no BF16 copies (both or none) and no MXFP8 tiled-only upload; the
  // MXFP8 gate_up copy: 2 MoE layers x 8 experts x 2 x 32 x 64 codes, x 33/32
  // with scales = 67584 B.
  EXPECT_TRUE(has(r, "no tiled copies: the MoE shape does not take both tiled layouts")) << r.output;
  EXPECT_TRUE(has(r, "no tiled-only upload")) << r.output;
  EXPECT_TRUE(has(r, "no tiled down copy")) << r.output;
  EXPECT_TRUE(has(r, "tiled_beside_canonical() + 66.0 KiB")) << r.output;
  EXPECT_FALSE(has(r, "fp8-block")) << r.output;
  EXPECT_TRUE(has(r, "kv cache    0.4 KiB per token")) << r.output;  // 3 layers * 2 * 2 * 16 * 2 B = 384 B
}

// A shape both tiled layouts take (I = 64): every tiled copy, and the
// figures of each upload.
TEST(InspectCli, TiledCopiesWhereTheShapeTakesThem) {
  testing::TinyModelSpec spec;
  spec.moe_intermediate = 64;
  const std::string dir = testing::tiny_model_dir("inspect_tiled", spec);
  const Result r = run("inspect " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  // Experts: 2 MoE layers x 8 x 3 x 64 x 64 = 196608 parameters.
  // BF16 copies of all three: 2 B each = 384.0 KiB.
  // The un-tiling scratch: one layer, 98304 parameters: 192.0 KiB BF16, 99.0 KiB MXFP8 (codes and scales).
  EXPECT_TRUE(has(r, "the same when tiled-only, the fastest warp decode, + 192.0 KiB for "
                     "MoeDispatch::untile_tiled_only's one-layer scratch (prefill on the classical path); + 384.0 KiB "
                     "with tiled_beside_canonical()"))
      << r.output;
  EXPECT_TRUE(has(r, "the same when tiled-only, the fastest warp decode, + 99.0 KiB for its un-tiling scratch"))
      << r.output;
  // MXFP8 down copy: 65536 codes x 33/32 = 66.0 KiB; with gate_up, 3x = 198.0 KiB.
  EXPECT_TRUE(has(r, "+ 66.0 KiB for its tiled down copy; tiled_beside_canonical() + 198.0 KiB")) << r.output;
  EXPECT_FALSE(has(r, "no tiled")) << r.output;
}

// I % 128 == 0: tiled-only BF16 weights need no scratch for prefill on
// sm_90a (the classical path reads them as they are), and inspect says so.
TEST(InspectCli, TiledOnlyBf16NeedsNoScratchWhereTheClassicalPathReadsIt) {
  testing::TinyModelSpec spec;
  spec.moe_intermediate = 128;
  const std::string dir = testing::tiny_model_dir("inspect_tiled_direct", spec);
  const Result r = run("inspect " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  // The scratch: one layer, 8 x 3 x 64 x 128 = 196608 parameters: 384.0 KiB BF16.
  EXPECT_TRUE(has(r, "the same when tiled-only, the fastest warp decode (prefill: the classical path reads it as it "
                     "is on sm_90a; elsewhere + 384.0 KiB for MoeDispatch::untile_tiled_only's one-layer scratch"))
      << r.output;
}

// H and I multiples of 128: tiled-only MXFP8 too (W8A16 on sm_90a).
TEST(InspectCli, TiledOnlyMxfp8NeedsNoScratchWhereW8A16ReadsIt) {
  testing::TinyModelSpec spec;
  spec.hidden = 128;
  spec.moe_intermediate = 128;
  const std::string dir = testing::tiny_model_dir("inspect_tiled_mx_direct", spec);
  const Result r = run("inspect " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "the same when tiled-only, the fastest warp decode (prefill: the classical path reads it as it "
                     "is in W8A16 on sm_90a; elsewhere + "))
      << r.output;
  // H = 64 (the default spec): the scratch, without the exception.
  const Result small = run("inspect " + testing::tiny_model_dir("inspect_tiled_mx_scratch", testing::TinyModelSpec{}));
  ASSERT_EQ(small.status, 0) << small.output;
  EXPECT_FALSE(has(small, "in W8A16 on sm_90a")) << small.output;
}

TEST(InspectCli, Fp8CheckpointsShowTheirOwnFormatAndConvert) {
  testing::TinyModelSpec spec;
  spec.dtype = testing::SourceDType::kFp8Block;
  const std::string dir = testing::tiny_model_dir("inspect_fp8", spec);
  const Result r = run("inspect " + dir + " --convert mxfp8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "quant       fp8 e4m3, block scales 24x24")) << r.output;
  EXPECT_TRUE(has(r, "  fp8-block   ")) << r.output;
  EXPECT_TRUE(has(r, "experts -> mxfp8: 100%")) << r.output;  // progress lines: stderr is a pipe
  EXPECT_TRUE(has(r, "convert     2 MoE layers to mxfp8 in ")) << r.output;
  EXPECT_TRUE(has(r, "peak resident memory")) << r.output;
  const Result k = run("inspect " + dir + " --convert fp8-block");
  EXPECT_EQ(k.status, 0) << k.output;
}

TEST(InspectCli, ErrorsAreOneLineAndNonZero) {
  const std::string empty = testing::make_temp_dir("inspect_empty");
  Result r = run("inspect " + empty);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "warpdecode: error: cannot read '" + empty + "/config.json': No such file or directory (is '" +
                          empty + "' a Hugging Face model directory?)\n");
  testing::write_file(empty + "/config.json", testing::tiny_config_json({}));
  r = run("inspect " + empty);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "warpdecode: error: no checkpoint in '" + empty +
                          "': neither model.safetensors.index.json nor model.safetensors exists\n");
  r = run("inspect " + empty + " --convert fp4");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "warpdecode: error: unknown weight format 'fp4' (allowed: bf16, mxfp8, fp8-block)\n");
  const std::string bf16 = testing::tiny_model_dir("inspect_bf16", {});
  r = run("inspect " + bf16 + " --convert fp8-block");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r, "fp8-block needs an FP8 checkpoint")) << r.output;
  r = run("inspect");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r, "MODEL_DIR is required")) << r.output;
}

TEST(InspectCli, TheTransformersFixture) {
  const std::string dir = std::string(WD_SOURCE_DIR) + "/tests/fixtures/qwen3moe-tiny";
  struct stat st {};
  if (::stat((dir + "/config.json").c_str(), &st) != 0)
    GTEST_SKIP() << "fixture " << dir << " not generated yet (scripts/make_model_fixture.py)";
  const Result r = run("inspect " + dir);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r, "layers      4 (3 MoE, 1 dense: 1)")) << r.output;
  EXPECT_TRUE(has(r, "E=16 experts, top-K=4")) << r.output;
  EXPECT_TRUE(has(r, "2 safetensors files")) << r.output;
}

}  // namespace
}  // namespace wd::model
