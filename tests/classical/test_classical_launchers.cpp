// The grouped-GEMM launchers' refusals (kernels::grouped_gemm): every shape,
// tile and operand combination a kernel cannot take is refused with an
// InvalidArgument that names what it takes. The checks come before any CUDA
// call, so these run on a machine without a GPU; they need the CUDA build
// (the launchers are CUDA sources). The host rules that choose a
// configuration are tests/cpu/test_classical_config.cpp.
#include <gtest/gtest.h>

#include <string>

#include "kernels/classical_gemm.cuh"
#include "moe/classical_operands.h"
#include "warpdecode/classical.h"
#include "warpdecode/error.h"

namespace wd {
namespace {

// A grouped GEMM of 4 experts, N = K = 256, 128 rows, one block, over a
// dummy buffer: the refusals come before any access.
kernels::GroupedGemmParams small_gemm_params() {
  kernels::GroupedGemmParams p{};
  alignas(16) static uint16_t dummy[8];
  p.w = p.a = p.out = dummy;
  p.rows = 128;
  p.n = 256;
  p.k = 256;
  p.max_blocks = 1;
  p.experts = 4;
  return p;
}

// Calls the GEMM, which must refuse; the message must contain `names`.
void expect_refused(const kernels::GroupedGemmParams& p, WeightFormat f, int t, kernels::GemmKernel kernel,
                    const std::string& names, const std::string& what) {
  try {
    kernels::grouped_gemm(p, f, t, kernel, nullptr);
    ADD_FAILURE() << what << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << what << ": " << e.what();
  }
}

TEST(ClassicalLaunchers, TmaTileRefusesWhatItCannotTake) {
  kernels::GroupedGemmParams p = small_gemm_params();
  // T = 8, 16, 32, 64, 80, 128 or (BF16) 144 only.
  for (int t : {4, 48, 256})
    EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kBF16, t, kernels::GemmKernel::kTma, nullptr), InvalidArgument)
        << t;
  // The tensor map needs the weights' extent.
  p.experts = 0;
  EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kBF16, 128, kernels::GemmKernel::kTma, nullptr), InvalidArgument);
  // A shape the tile does not take.
  p.experts = 4;
  p.n = 252;
  EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kBF16, 128, kernels::GemmKernel::kTma, nullptr), InvalidArgument);
  // SiLU·up fused: the TMA kernel only, N = 2I a multiple of 256.
  p.fuse_silu = 1;
  p.n = 384;
  EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kBF16, 128, kernels::GemmKernel::kTma, nullptr), InvalidArgument);
  p.n = 512;
  EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kBF16, 8, kernels::GemmKernel::kStream, nullptr), InvalidArgument);
}

// W8A16: MXFP8 weights on the TMA kernel only (the message names it).
TEST(ClassicalLaunchers, W8A16IsMxfp8OnTheTmaTileOnly) {
  kernels::GroupedGemmParams p = small_gemm_params();
  p.a_bf16 = 1;
  alignas(16) static uint8_t codes[64];
  p.w_mx_scales = codes;
  p.w_block_scales = static_cast<const float*>(p.w);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFP8Block128})
    expect_refused(p, f, 8, kernels::GemmKernel::kTma, "W8A16", std::string(to_string(f)) + " W8A16");
  expect_refused(p, WeightFormat::kMXFP8, 8, kernels::GemmKernel::kStream, "W8A16", "W8A16 on the stream kernel");
}

// Weight-sharing clusters: BF16 at T = 144, FP8 block-128 W8A8 at 64 and 80;
// anything else refused, naming them.
TEST(ClassicalLaunchers, WeightSharingOnlyWhereItIsBuilt) {
  kernels::GroupedGemmParams p = small_gemm_params();
  p.share_weights = 1;
  alignas(16) static float scales[64];
  alignas(16) static uint8_t codes[64];
  p.a_scales = scales;
  p.w_block_scales = scales;
  p.w_mx_scales = codes;  // every format's scales present: the refusal is the clusters'
  const struct {
    WeightFormat f;
    int t;
  } unshared[] = {{WeightFormat::kBF16, 128}, {WeightFormat::kMXFP8, 64}, {WeightFormat::kFP8Block128, 128},
                  {WeightFormat::kFP8Block128, 32}};
  for (const auto& u : unshared)
    expect_refused(p, u.f, u.t, kernels::GemmKernel::kTma, "weight-sharing",
                   std::string(to_string(u.f)) + " T = " + std::to_string(u.t) + " weight-sharing");
}

// A tile the kernel is not built for is refused; on an sm_90a device, with
// the ones it takes named (elsewhere the device check refuses it first).
TEST(ClassicalLaunchers, TmaTileNamesTheTilesItTakes) {
  const kernels::GroupedGemmParams p = small_gemm_params();
  expect_refused(p, WeightFormat::kBF16, 96, kernels::GemmKernel::kTma,
                 ClassicalMoe::wgmma_available() ? "64, 80, 128" : "", "T = 96");
}

// SiLU·up and h's quantization fused into the W8A8 gate_up GEMM only where a
// tile is one activation group (tests/cpu/test_classical_config.cpp,
// W8A8FusesSiluWhereATileIsOneActivationGroup): MXFP8 at T = 128 and FP8
// block-128 at T = 32 refused on any machine.
TEST(ClassicalLaunchers, W8A8FusesSiluOnlyWhereATileIsOneGroup) {
  kernels::GroupedGemmParams p = small_gemm_params();
  alignas(16) static float scales[4];
  p.fuse_silu = 1;
  p.out_scales = scales;
  p.a_scales = p.w_block_scales = scales;
  p.w_mx_scales = reinterpret_cast<const uint8_t*>(scales);
  expect_refused(p, WeightFormat::kMXFP8, 128, kernels::GemmKernel::kTma, "FP8 block-128 also 128",
                 "MXFP8 W8A8 with SiLU·up fused at T = 128");
  EXPECT_THROW(kernels::grouped_gemm(p, WeightFormat::kFP8Block128, 32, kernels::GemmKernel::kTma, nullptr),
               InvalidArgument);
}

// The GEMMs' weight operands: the canonical tensors and their scales, or,
// for tiled-only weights, the tiled copies and (MXFP8) their tiled scales,
// never a canonical pointer (a tiled-only view has none: a kernel reading
// one would read address 0).
TEST(ClassicalLaunchers, GemmsTakeTheTiledCopiesOfTiledOnlyWeights) {
  alignas(16) static uint8_t buf[16][16];
  MoeWeightsView canonical;
  canonical.format = WeightFormat::kMXFP8;
  canonical.gate_up = buf[0], canonical.down = buf[1];
  canonical.gate_up_scales = buf[2], canonical.down_scales = buf[3];
  canonical.gate_up_block_scales = reinterpret_cast<const float*>(buf[4]);
  canonical.down_block_scales = reinterpret_cast<const float*>(buf[5]);
  MoeWeightsView tiled_only;
  tiled_only.format = WeightFormat::kMXFP8;
  tiled_only.gate_up_tiled = buf[6], tiled_only.down_tiled = buf[7];
  tiled_only.gate_up_tiled_scales = buf[8], tiled_only.down_tiled_scales = buf[9];
  ASSERT_TRUE(canonical.has_canonical());
  ASSERT_FALSE(tiled_only.has_canonical());
  for (bool up : {true, false}) {
    kernels::GroupedGemmParams p{};
    set_weight_operands(p, canonical, up);
    EXPECT_EQ(p.w_tiled, 0);
    EXPECT_EQ(p.w, up ? canonical.gate_up : canonical.down);
    EXPECT_EQ(p.w_mx_scales, up ? canonical.gate_up_scales : canonical.down_scales);
    EXPECT_EQ(p.w_block_scales, up ? canonical.gate_up_block_scales : canonical.down_block_scales);
    set_weight_operands(p, tiled_only, up);
    EXPECT_EQ(p.w_tiled, 1);
    EXPECT_EQ(p.w, up ? static_cast<const void*>(buf[6]) : static_cast<const void*>(buf[7]));
    EXPECT_EQ(p.w_mx_scales, up ? buf[8] : buf[9]) << "MXFP8 tiled-only: the tiled scales";
    EXPECT_EQ(p.w_block_scales, nullptr);
  }
}

}  // namespace
}  // namespace wd
