// Warp decode (router, moe_gate_up, moe_down) against the FP64 CPU reference
// on fresh random weights and inputs, outputs NaN-poisoned before each run.
//
// Tolerances (relative L2 vs FP64 on the same dequantized weights):
//   FP32 output, FP32 intermediate: 2e-5 (FP32 accumulation)
//   BF16 output: 4e-3 (one BF16 rounding of y)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "kernels/router.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "warpdecode/classical.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/reference.h"
#include "warpdecode/warp_decode.h"
#include "warpdecode/weights.h"

#include "test_support.h"

namespace wd {
namespace {

using wd::test::fresh_seed;
using wd::test::make_shape;
using wd::test::unambiguous_inputs;

// One layer's weights on host and device, in one format.
struct Layer {
  MoeWeights host;
  DeviceMoeWeights dev;
  static Layer make(const MoeShape& s, WeightFormat f, uint64_t seed, float stddev = 0.02f) {
    SyntheticSpec spec;
    spec.seed = seed;
    spec.stddev = stddev;
    spec.outlier_fraction = 0.001f;
    MoeWeights bf = MoeWeights::synthetic(s, spec);
    MoeWeights w = f == WeightFormat::kBF16 ? std::move(bf) : bf.to_mxfp8();
    DeviceWeightsOptions o;
    o.tiled_mxfp8_gate_up = true;  // read only by configurations that ask for it
    DeviceMoeWeights d = DeviceMoeWeights::upload(w, o);
    return Layer{std::move(w), std::move(d)};
  }
};

using HostRouting = wd::test::HostRouting;
using wd::test::random_routing;

// Runs the two expert kernels and returns y as doubles.
std::vector<double> run_experts(const WarpDecodeMoe& moe, const Layer& layer,
                                const std::vector<uint16_t>& x, const HostRouting& r, int B,
                                OutputType type, const WarpDecodeConfig* config = nullptr,
                                const std::vector<float>* residual = nullptr,
                                const MoeWeightsView* view = nullptr) {
  const MoeShape& s = layer.host.shape();
  const MoeWeightsView w = view ? *view : layer.dev.view();
  const size_t BH = size_t(B) * s.hidden;
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<int32_t> ids(r.ids);
  DeviceBuffer<float> rw(std::vector<float>(r.w.begin(), r.w.end()));
  const RoutingView rv{B, s.top_k, ids.data(), rw.data()};
  std::vector<double> y(BH);
  if (type == OutputType::kFP32) {
    DeviceBuffer<float> dy(BH), res;
    dy.fill_bytes(0xFF);  // NaN poison
    if (residual) res = DeviceBuffer<float>(*residual);
    const MoeOutput out{dy.data(), type, residual ? res.data() : nullptr};
    if (config) moe.experts(w, dx.data(), rv, out, *config, nullptr);
    else moe.experts(w, dx.data(), rv, out, nullptr);
    const auto h = dy.download();
    std::copy(h.begin(), h.end(), y.begin());
  } else {
    DeviceBuffer<uint16_t> dy(BH), res;
    dy.fill_bytes(0xFF);
    if (residual) {
      std::vector<uint16_t> rb(residual->size());
      for (size_t i = 0; i < rb.size(); ++i) rb[i] = float_to_bf16((*residual)[i]);
      res = DeviceBuffer<uint16_t>(rb);
    }
    const MoeOutput out{dy.data(), type, residual ? res.data() : nullptr};
    if (config) moe.experts(w, dx.data(), rv, out, *config, nullptr);
    else moe.experts(w, dx.data(), rv, out, nullptr);
    const auto h = dy.download();
    for (size_t i = 0; i < BH; ++i) y[i] = bf16_to_float(h[i]);
  }
  WD_CUDA_CHECK(cudaDeviceSynchronize());
  return y;
}

std::vector<double> reference_y(const Layer& layer, const std::vector<uint16_t>& x,
                                const HostRouting& r, int B) {
  return reference::moe_experts(layer.host.view(), x.data(), r.ids.data(), r.w.data(), B,
                                reference::Precision::kFP64);
}

// Two runs that must agree bit for bit: memcmp (so -0 and +0 differ), and
// every value finite (the NaN poison of an unwritten output would otherwise
// compare equal to itself).
void expect_same_bits(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double))) << what;
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](double v) { return std::isfinite(v); })) << what;
}

void expect_close(const std::vector<double>& ref, const std::vector<double>& y, double tol,
                  const std::string& what) {
  const auto st = reference::compare(ref.data(), y.data(), ref.size());
  EXPECT_EQ(st.non_finite, 0u) << what << ": unwritten or non-finite outputs";
  EXPECT_LE(st.rel_l2, tol) << what << " max_rel " << st.max_rel;
}

const char* name(WeightFormat f) { return to_string(f); }

// A tensor-core configuration (the family's only knobs).
// tiled: MXFP8 down weights from the tiled copy (warpdecode/down_tiling.h),
// which DeviceMoeWeights keeps for MXFP8; the same bits either way.
// tiled_gu: MXFP8 gate_up weights from the tiled copy (warpdecode/gate_up_tiling.h).
WarpDecodeConfig tc_config(bool pdl = true, bool evict_first = true, bool deep = false, bool tiled = false,
                           bool tiled_gu = false, bool pairs = false) {
  WarpDecodeConfig c;
  c.tc_down_pairs = pairs;
  c.tensor_cores = true;
  c.programmatic_launch = pdl;
  c.evict_first = evict_first;
  c.tc_deep_loads = deep;
  c.tc_tiled_down = tiled;
  c.tc_tiled_gate_up = tiled_gu;
  return c;
}

// c with gate_up's two-tile passes (read where the kernel has them: the tiled
// gate_up copy without deep rounds).
WarpDecodeConfig two_tiles(WarpDecodeConfig c) {
  c.tc_gate_up_two_tiles = true;
  return c;
}

// The token (xt, rt) placed at position pos of a batch of B fresh tokens:
// how many of its outputs differ, bit for bit, from `alone`.
size_t bits_changed_in_batch(const WarpDecodeMoe& moe, const Layer& layer, const std::vector<uint16_t>& xt,
                             const HostRouting& rt, const std::vector<double>& alone, int B, int pos,
                             const WarpDecodeConfig* config) {
  const MoeShape& s = layer.host.shape();
  auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
  auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
  std::copy(xt.begin(), xt.end(), x.begin() + size_t(pos) * s.hidden);
  std::copy(rt.ids.begin(), rt.ids.end(), r.ids.begin() + pos * s.top_k);
  std::copy(rt.w.begin(), rt.w.end(), r.w.begin() + pos * s.top_k);
  const auto y = run_experts(moe, layer, x, r, B, OutputType::kFP32, config);
  size_t diff = 0;
  for (int d = 0; d < s.hidden; ++d) diff += y[size_t(pos) * s.hidden + d] != alone[d];
  return diff;
}

// ---- every batch size -------------------------------------------------------------
// Every B from 1 to 70 and a few larger (B > 64: the tensor-core moe_down walks
// the experts once per 128 tokens, or 64 where its shared memory is short) against FP64: FP32 output, and BF16 output
// every 7th B. config(B) gives each call's configuration (default: the
// object's own for that B).
void check_every_batch(const std::vector<MoeShape>& shapes, KernelFamily family,
                       const std::function<WarpDecodeConfig(int B)>& config = nullptr) {
  for (const MoeShape& s : shapes)
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
      const Layer layer = Layer::make(s, f, fresh_seed());
      WarpDecodeMoe moe(s, 256, family);
      std::vector<int> batches;
      for (int b = 1; b <= 70; ++b) batches.push_back(b);
      for (int b : {96, 127, 128, 200, 256}) batches.push_back(b);
      for (int B : batches) {
        const WarpDecodeConfig cfg = config ? config(B) : moe.default_config(B, layer.dev.view());
        const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
        const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
        const auto ref = reference_y(layer, x, r, B);
        const std::string what = std::string(name(f)) + " H=" + std::to_string(s.hidden) + " I=" +
                                 std::to_string(s.intermediate) + " B=" + std::to_string(B) + " " + cfg.label();
        expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kFP32, &cfg), 2e-5, what + " fp32");
        if (B % 7 == 1) expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kBF16, &cfg), 4e-3, what + " bf16");
      }
    }
}

TEST(WarpDecode, EveryBatchFrom1To70AndLargerOnAwkwardShapes) {
  WD_REQUIRE_GPU();
  // H = 160: 20 BF16 / 10 MXFP8 chunks per row (fewer than 32 lanes);
  // I = 96: 12 / 6 chunks; E = 20, K = 6: many tokens share experts.
  check_every_batch({make_shape(160, 96, 20, 6), preset_shape("tiny")}, KernelFamily::kScalar);
}

// ---- real shapes ---------------------------------------------------------------------
// The Qwen3-MoE shapes (the coder's with fewer experts: the same kernel paths,
// 1/10 the memory) on outlier inputs, FP32 and BF16 output, one family.
void check_real_shapes(KernelFamily family) {
  struct Case {
    MoeShape s;
    std::vector<int> batches;
  };
  MoeShape coder = preset_shape("qwen3-coder-480b-a35b");
  coder.experts = 16;  // tensor cores: I = 2560, H = 6144: 4 K ranges of 10 units
  const Case cases[] = {{preset_shape("qwen3-30b-a3b"), {1, 8, 32, 64}},
                        {preset_shape("qwen3-235b-a22b"), {1, 16}},  // tensor cores: 6 ranges of 4 units
                        {coder, {1, 5, 12}}};  // MXFP8 B = 1: the ten-unit by-token walk; 5, 12: its four-token general walk
  for (const auto& c : cases)
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
      const Layer layer = Layer::make(c.s, f, fresh_seed());
      WarpDecodeMoe moe(c.s, 64, family);
      for (int B : c.batches) {
        const auto x = synthetic_input(B, c.s.hidden, fresh_seed(), InputKind::kOutliers);
        const auto r = random_routing(B, c.s.experts, c.s.top_k, fresh_seed());
        const auto ref = reference_y(layer, x, r, B);
        const std::string what = std::string(name(f)) + " H=" + std::to_string(c.s.hidden) + " B=" +
                                 std::to_string(B) + " " + moe.default_config(B, layer.dev.view()).label();
        expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kFP32), 2e-5, what + " fp32");
        expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kBF16), 4e-3, what + " bf16");
      }
    }
}

TEST(WarpDecode, RealShapes) {
  WD_REQUIRE_GPU();
  check_real_shapes(KernelFamily::kScalar);
}

// ---- router ----------------------------------------------------------------------------
TEST(WarpDecode, RouterMatchesReference) {
  WD_REQUIRE_GPU();
  // The router's clusters: E = 20 (3 blocks of 8 warps), 128 (16 blocks, one
  // expert a warp), 160 and 256 (16 warps a block: 10 and 16 blocks), 300
  // and 1000 (16 blocks, warps taking 2 and 4 experts), 8 (one block: no
  // cluster); the top-K instances of 4, 8 (E = 160, 256), 16 (300) and 32
  // (1000) logits per lane. Groups of 1, 2 and 4 tokens (B = 1, <= 16, 64); H = 24576:
  // 4 tokens' activations exceed the shared memory, so B = 64 runs groups
  // of 2.
  for (const MoeShape& s : {preset_shape("qwen3-30b-a3b"), preset_shape("tiny"), make_shape(160, 96, 20, 6),
                            make_shape(512, 64, 160, 8), make_shape(256, 64, 256, 8), make_shape(256, 64, 300, 8),
                            make_shape(256, 64, 1000, 8), make_shape(24576, 64, 8, 4)}) {
    const Layer layer = Layer::make(s, WeightFormat::kBF16, fresh_seed());
    WarpDecodeMoe moe(s, 64);
    // One object, calls in turn; 7, 9 and 64 tokens: partial and several
    // groups.
    for (int B : {1, 2, 3, 7, 9, 64, 1, 2}) {
      const auto [x, r] = unambiguous_inputs(layer.host.view(), B, fresh_seed);
      DeviceBuffer<uint16_t> dx(x);
      DeviceBuffer<int32_t> ids(size_t(B) * s.top_k);
      DeviceBuffer<float> w(size_t(B) * s.top_k);
      ids.fill_bytes(0xFF);
      w.fill_bytes(0xFF);
      moe.route(layer.dev.view(), dx.data(), B, ids.data(), w.data(), nullptr);
      EXPECT_EQ(ids.download(), r.ids) << "B=" << B << " E=" << s.experts;
      const auto wh = w.download();
      for (size_t i = 0; i < wh.size(); ++i) EXPECT_NEAR(wh[i], r.weights[i], 1e-5 * r.weights[i]) << i;
    }
  }
}

// A token's routing weights are the same bits whatever the batch: groups of
// 1 (B = 1), 2 (B = 9) and 4 (B = 20, 64) tokens, the token at other
// positions of its group.
TEST(WarpDecode, RouterIsBatchInvariantBitwise) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  const Layer layer = Layer::make(s, WeightFormat::kBF16, fresh_seed());
  WarpDecodeMoe moe(s, 64);
  const auto [x, r] = unambiguous_inputs(layer.host.view(), 64, fresh_seed);
  auto route = [&](int first, int B) {
    DeviceBuffer<uint16_t> dx(std::vector<uint16_t>(x.begin() + size_t(first) * s.hidden,
                                                    x.begin() + size_t(first + B) * s.hidden));
    DeviceBuffer<int32_t> ids(size_t(B) * s.top_k);
    DeviceBuffer<float> w(size_t(B) * s.top_k);
    moe.route(layer.dev.view(), dx.data(), B, ids.data(), w.data(), nullptr);
    return std::make_pair(ids.download(), w.download());
  };
  const auto [all_ids, all_w] = route(0, 64);
  const size_t K = size_t(s.top_k);
  for (const auto& [first, B] : std::vector<std::pair<int, int>>{{0, 1}, {5, 1}, {0, 9}, {3, 9}, {1, 20}, {40, 20}}) {
    const auto [ids, w] = route(first, B);
    for (size_t i = 0; i < size_t(B) * K; ++i) {
      EXPECT_EQ(ids[i], all_ids[size_t(first) * K + i]) << "B=" << B << " first=" << first << " i=" << i;
      EXPECT_EQ(float_bits(w[i]), float_bits(all_w[size_t(first) * K + i])) << "B=" << B << " first=" << first;
    }
  }
}

// The router's kernel with every group size it takes forced (tokens a
// cluster: 1 up to 8, or fewer where H leaves less staging room) and chosen
// per call (0): the ids must be the reference's and the weights the same
// bits whatever the group. B = 70 leaves a part-filled last group for most
// sizes. Shapes: E = 128 (8 warps a block, 4 logits a lane), E = 300 (16
// warps a block, 16 logits a lane), and H = 40960 (at most 2 tokens a group).
TEST(WarpDecode, RouterBitsDoNotDependOnTheGroup) {
  WD_REQUIRE_GPU();
  for (const MoeShape& s : {make_shape(4096, 32, 128, 8), make_shape(1024, 32, 300, 10), make_shape(40960, 32, 16, 4)}) {
    SyntheticSpec spec;
    spec.seed = fresh_seed();
    const MoeWeights host = MoeWeights::synthetic(s, spec);
    const int B = 70, K = s.top_k;
    const auto [x, r] = unambiguous_inputs(host.view(), B, fresh_seed);
    DeviceBuffer<uint16_t> router(host.router), dx(x);
    DeviceBuffer<int32_t> ids(size_t(B) * K);
    DeviceBuffer<float> w(size_t(B) * K);
    auto route = [&](int group) {
      ids.fill_bytes(0xFF);
      w.fill_bytes(0xFF);
      kernels::RouterParams p{router.data(), dx.data(), ids.data(), w.data(), B, s.hidden, s.experts, K,
                              s.norm_topk_prob ? 1 : 0, /*programmatic_launch=*/0, group};
      kernels::router(p, nullptr);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      return std::make_pair(ids.download(), w.download());
    };
    const int largest = std::min(8, 81920 / s.hidden);
    const auto [ids1, w1] = route(1);
    EXPECT_EQ(ids1, r.ids) << "H=" << s.hidden << " E=" << s.experts;
    for (size_t i = 0; i < w1.size(); ++i)
      EXPECT_NEAR(w1[i], r.weights[i], 1e-5 * r.weights[i] + 1e-7) << "H=" << s.hidden << " i=" << i;
    for (int group = 0; group <= largest; ++group) {
      const auto [ids_g, w_g] = route(group);
      EXPECT_EQ(ids_g, ids1) << "H=" << s.hidden << " E=" << s.experts << " group=" << group;
      for (size_t i = 0; i < w_g.size(); ++i)
        ASSERT_EQ(float_bits(w_g[i]), float_bits(w1[i])) << "H=" << s.hidden << " group=" << group << " i=" << i;
    }
    EXPECT_THROW(route(largest + 1), Error) << "H=" << s.hidden;
  }
}

TEST(WarpDecode, ForwardIsRouterPlusExperts) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("tiny");
  const Layer layer = Layer::make(s, WeightFormat::kMXFP8, fresh_seed());
  WarpDecodeMoe moe(s, 16);
  const int B = 11;
  const auto [x, r] = unambiguous_inputs(layer.host.view(), B, fresh_seed);
  const auto ref = reference::moe_experts(layer.host.view(), x.data(), r.ids.data(), r.weights.data(), B,
                                          reference::Precision::kFP64);
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<float> dy(size_t(B) * s.hidden);
  dy.fill_bytes(0xFF);
  moe.forward(layer.dev.view(), dx.data(), B, MoeOutput{dy.data(), OutputType::kFP32, nullptr}, nullptr);
  const auto h = dy.download();
  expect_close(ref, std::vector<double>(h.begin(), h.end()), 2e-5, "forward");
}

// ---- odd routings ----------------------------------------------------------------------
void check_odd_routings_on(const MoeShape& s, KernelFamily family) {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    WarpDecodeMoe moe(s, 64, family), big(s, 150, family);
    const int K = s.top_k;
    struct Odd {
      const char* what;
      int B;
      std::function<int(int b, int k)> expert;
    } odds[] = {
        {"all tokens on the same 8 experts", 64, [](int, int k) { return 120 + k / 1; }},
        {"all experts distinct", 16, [K](int b, int k) { return b * K + k; }},
        {"repeated experts across tokens", 37, [](int b, int k) { return (b % 3) * 5 + k * 11; }},
        {"one expert twice in a token", 9, [](int b, int k) { return k == 1 ? b : (b + k * 13) % 128; }},
        // B <= 8: the tensor-core down kernel's by-token walk (a full tile, an
        // expert of one token) and its fallback for a repeated expert.
        {"8 tokens on the same 8 experts", 8, [](int, int k) { return 3 + 7 * k; }},
        {"some experts shared, 5 tokens", 5, [](int b, int k) { return (b % 2) * 9 + k * 5 + (k > 5 ? b : 0); }},
        {"one expert twice in a token", 5, [](int b, int k) { return k == 1 ? b : (b + k * 13) % 128; }},
        // B = 13: the quad walk (9 <= B <= 16) on shared experts; B = 24 with
        // a repeated expert: the duplicate-token walk; B = 32: the general
        // walk with four full tiles an expert (the quad walk up to B = 32 was
        // measured and not kept, but these cases stay).
        {"32 tokens on the same 8 experts", 32, [](int, int k) { return 90 + 3 * k; }},
        {"some experts shared, 13 tokens", 13, [](int b, int k) { return (b % 3) * 7 + k * 5 + (k > 4 ? b : 0); }},
        {"one expert twice in a token", 24, [](int b, int k) { return k == 1 ? b : (b + k * 13) % 128; }},
        // B > 64: the tensor-core down kernel's groups of 128 (two mask
        // words an expert), the duplicate-token walk over one, and a second
        // group at 150 with 16 full tiles an expert in the first.
        {"one expert twice in a token", 100, [](int b, int k) { return k == 1 ? b : (b + k * 13) % 128; }},
        {"150 tokens on the same 8 experts", 150, [](int, int k) { return 40 + 9 * k; }},
    };
    for (const auto& o : odds) {
      HostRouting r;
      std::mt19937 g{unsigned(fresh_seed())};
      for (int b = 0; b < o.B; ++b)
        for (int k = 0; k < K; ++k) {
          r.ids.push_back(o.expert(b, k) % s.experts);
          r.w.push_back(std::uniform_real_distribution<double>(0.01, 1.0)(g));
        }
      // Slot 1 of "one expert twice" repeats slot 0's expert.
      if (std::string(o.what) == "one expert twice in a token")
        for (int b = 0; b < o.B; ++b) r.ids[b * K + 1] = r.ids[b * K];
      const auto x = synthetic_input(o.B, s.hidden, fresh_seed(), InputKind::kGaussian);
      const auto ref = reference_y(layer, x, r, o.B);
      WarpDecodeMoe& m = o.B > 64 ? big : moe;
      expect_close(ref, run_experts(m, layer, x, r, o.B, OutputType::kFP32), 2e-5,
                   std::string(name(f)) + " I=" + std::to_string(s.intermediate) + " " + o.what + " B=" +
                       std::to_string(o.B) + " " + m.default_config(o.B, layer.dev.view()).label());
    }
  }
}

// The tensor cores also on I = 2560 and 7040 (four and ten units a warp:
// MXFP8's fixed-count kernels, their register and general walks and the
// duplicate-token walk in each), with 32 experts (ids modulo 32: more
// sharing, and more repeats in "one expert twice").
void check_odd_routings(KernelFamily family) {
  check_odd_routings_on(preset_shape("qwen3-30b-a3b"), family);
  if (family == KernelFamily::kTensorCores)
    for (const MoeShape& s : {make_shape(256, 2560, 32, 8), make_shape(256, 7040, 32, 8)})
      check_odd_routings_on(s, family);
}

TEST(WarpDecode, OddRoutings) {
  WD_REQUIRE_GPU();
  check_odd_routings(KernelFamily::kScalar);
}

// ---- residual -------------------------------------------------------------------------
// y = residual + moe(x), FP32 and BF16 output (the residual BF16-exact).
void check_residual(const MoeShape& s, KernelFamily family, const std::vector<WeightFormat>& formats,
                    const std::vector<int>& batches) {
  for (WeightFormat f : formats) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    WarpDecodeMoe moe(s, 80, family);
    for (int B : batches) {
      const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
      const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
      std::vector<float> res(size_t(B) * s.hidden);
      std::mt19937 g{unsigned(fresh_seed())};
      for (auto& v : res) v = bf16_to_float(float_to_bf16(std::normal_distribution<float>(0, 0.1f)(g)));
      auto ref = reference_y(layer, x, r, B);
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += res[i];
      const std::string what = std::string(name(f)) + " B=" + std::to_string(B) + " " + moe.default_config(B, layer.dev.view()).label();
      expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kFP32, nullptr, &res), 2e-5, what + " fp32 + residual");
      expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kBF16, nullptr, &res), 4e-3, what + " bf16 + residual");
    }
  }
}

TEST(WarpDecode, FusedResidualAdd) {
  WD_REQUIRE_GPU();
  check_residual(make_shape(160, 96, 20, 6), KernelFamily::kScalar, {WeightFormat::kMXFP8}, {13});
}

// ---- batch invariance and determinism -----------------------------------------------
// A token alone (under configs[0]) against the same token at random positions
// of batches of other tokens, under every configuration given: bit for bit.
// Beyond 64 tokens, every other configuration puts the token past the first
// 64 (the tensor-core moe_down's second mask word), beyond 128 past the
// first 128 (its second walk). Then run to run at B = 64.
void check_batch_invariance(const std::vector<WarpDecodeConfig>& configs, const std::vector<int>& batches,
                            const MoeShape& s = preset_shape("qwen3-30b-a3b")) {
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    WarpDecodeMoe moe(s, std::max(64, max_batch));
    // The token under test: its activations and routing.
    const auto xt = synthetic_input(1, s.hidden, fresh_seed(), InputKind::kGaussian);
    const auto rt = random_routing(1, s.experts, s.top_k, fresh_seed());
    const auto alone = run_experts(moe, layer, xt, rt, 1, OutputType::kFP32, &configs[0]);
    for (int B : batches)
      for (size_t ci = 0; ci < configs.size(); ++ci) {
        const WarpDecodeConfig& cfg = configs[ci];
        const int skip = B > 128 ? 128 : B > 64 ? 64 : 0;
        const int pos = skip > 0 && ci % 2 == 0 ? skip + int(fresh_seed() % (B - skip)) : int(fresh_seed() % B);
        EXPECT_EQ(bits_changed_in_batch(moe, layer, xt, rt, alone, B, pos, &cfg), 0u)
            << name(f) << " B=" << B << " pos=" << pos << " config " << cfg.label();
      }
    // Run to run.
    const auto x = synthetic_input(64, s.hidden, fresh_seed(), InputKind::kGaussian);
    const auto r = random_routing(64, s.experts, s.top_k, fresh_seed());
    const auto a = run_experts(moe, layer, x, r, 64, OutputType::kFP32, &configs[0]);
    const auto b = run_experts(moe, layer, x, r, 64, OutputType::kFP32, &configs[0]);
    EXPECT_EQ(a, b);
  }
}

// Every configuration of the scalar family.
TEST(WarpDecode, BatchInvariantAndDeterministicBitwise) {
  WD_REQUIRE_GPU();
  std::vector<WarpDecodeConfig> configs;
  for (int v = 0; v < 6; ++v) {
    WarpDecodeConfig c;
    c.gate_up_tokens_per_pass = v % 2 ? 4 : 1;
    c.gate_up_neurons_per_warp = 1 + v % 3;
    c.down_rows_per_warp = v < 3 ? 1 : 4;
    c.mx8_int_decode = v % 2 == 0;
    c.programmatic_launch = v != 3;
    c.gate_up_prefetch = v % 3;
    c.down_prefetch = 3 * (v % 3);
    c.evict_first = v >= 2;
    c.down_stage_h = v % 2 == 1;
    c.gate_up_narrow = v == 2 || v == 4;
    configs.push_back(c);
  }
  check_batch_invariance(configs, {2, 9, 37, 64});
}

// ---- engine-ready: graphs, errors ------------------------------------------------------
TEST(WarpDecode, CapturesInACudaGraph) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("tiny");
  const Layer layer = Layer::make(s, WeightFormat::kBF16, fresh_seed());
  WarpDecodeMoe moe(s, 8);
  const int B = 5;
  const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<float> y1(size_t(B) * s.hidden), y2(size_t(B) * s.hidden);
  cudaStream_t st;
  WD_CUDA_CHECK(cudaStreamCreate(&st));
  moe.forward(layer.dev.view(), dx.data(), B, MoeOutput{y1.data(), OutputType::kFP32, nullptr}, st);
  test::capture_and_replay(st, y2, [&](cudaStream_t cs) {
    moe.forward(layer.dev.view(), dx.data(), B, MoeOutput{y2.data(), OutputType::kFP32, nullptr}, cs);
  });
  EXPECT_EQ(y1.download(), y2.download());
  WD_CUDA_CHECK(cudaStreamDestroy(st));
}

TEST(WarpDecode, ClearErrorsForWhatItCannotTake) {
  WD_REQUIRE_GPU();
  MoeShape bad = preset_shape("tiny");
  bad.hidden = 100;
  EXPECT_THROW(WarpDecodeMoe(bad, 4), InvalidArgument);
  const MoeShape s = preset_shape("tiny");
  EXPECT_THROW(WarpDecodeMoe(s, 0), InvalidArgument);
  const Layer layer = Layer::make(s, WeightFormat::kBF16, 1);
  WarpDecodeMoe moe(s, 4);
  DeviceBuffer<uint16_t> x(size_t(8) * s.hidden);
  DeviceBuffer<float> y(size_t(8) * s.hidden);
  const MoeOutput out{y.data(), OutputType::kFP32, nullptr};
  EXPECT_THROW(moe.forward(layer.dev.view(), x.data(), 5, out, nullptr), InvalidArgument);  // > max_batch
  EXPECT_THROW(moe.forward(layer.host.view(), x.data(), 2, out, nullptr), InvalidArgument);  // host weights
}

// A call either kernel (or the router) refuses throws before anything is
// launched: recorded under a graph capture, it records no node, where the
// same call with valid arguments records the router and both kernels.
TEST(WarpDecode, ARefusedCallLaunchesNothing) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(256, 64, 16, 4);  // both families take it
  const int B = 6;
  const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
  const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<int32_t> ids(r.ids);
  DeviceBuffer<float> rw(std::vector<float>(r.w.begin(), r.w.end()));
  DeviceBuffer<float> y(size_t(B) * s.hidden);
  const MoeOutput out{y.data(), OutputType::kFP32, nullptr};
  const RoutingView rv{B, s.top_k, ids.data(), rw.data()};
  for (KernelFamily fam : {KernelFamily::kScalar, KernelFamily::kTensorCores}) {
    SCOPED_TRACE(to_string(fam));
    const Layer layer = Layer::make(s, WeightFormat::kMXFP8, fresh_seed());
    WarpDecodeMoe moe(s, 8, fam);
    const test::Recorded ok = test::record_on_capture([&](cudaStream_t st) {
      moe.forward(layer.dev.view(), dx.data(), B, out, st);
    });
    EXPECT_FALSE(ok.refused);
    EXPECT_GE(ok.nodes, 3u);  // the router, gate_up, down
    // No output: refused by the experts' checks, before the router launches.
    const test::Recorded no_y = test::record_on_capture([&](cudaStream_t st) {
      moe.forward(layer.dev.view(), dx.data(), B, MoeOutput{nullptr, OutputType::kFP32, nullptr}, st);
    });
    EXPECT_TRUE(no_y.refused);
    EXPECT_EQ(no_y.nodes, 0u);
    // x misaligned for the router's 16-byte loads.
    const test::Recorded odd_x = test::record_on_capture([&](cudaStream_t st) {
      moe.forward(layer.dev.view(), dx.data() + 1, B, out, st);
    });
    EXPECT_TRUE(odd_x.refused);
    EXPECT_EQ(odd_x.nodes, 0u);
    // A configuration the scalar down kernel refuses: gate_up, which takes
    // it, is not launched either.
    if (fam == KernelFamily::kScalar) {
      WarpDecodeConfig bad = moe.default_config(B, layer.dev.view());
      bad.down_rows_per_warp = 3;
      const test::Recorded late = test::record_on_capture([&](cudaStream_t st) {
        moe.experts(layer.dev.view(), dx.data(), rv, out, bad, st);
      });
      EXPECT_TRUE(late.refused);
      EXPECT_EQ(late.nodes, 0u);
    }
    // gate_up alone is still launched when asked for alone.
    const test::Recorded gate_up = test::record_on_capture([&](cudaStream_t st) {
      moe.experts(layer.dev.view(), dx.data(), rv, out, moe.default_config(B, layer.dev.view()), st,
                  WarpDecodeMoe::Kernels::kGateUp);
    });
    EXPECT_FALSE(gate_up.refused);
    EXPECT_EQ(gate_up.nodes, 1u);
  }
}

// The largest batch a layer object takes is checked at construction, not at
// the call that reaches it: a gate_up block lists its B·K routing entries in
// shared memory (200 KiB: B·K <= 51200 on the tensor cores). Every Qwen3
// preset takes kMaxBatch in both families (the scalar gate_up passes one
// token at a time where four would not fit beside the list); K = 16 does
// not (MoeDispatch then runs warp decode up to that batch only: Classical.
// DispatchSizesWarpDecodeToItsLargestBatch).
TEST(WarpDecode, TheLargestBatchIsCheckedAtConstruction) {
  WD_REQUIRE_GPU();
  for (const char* p : {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-coder-480b-a35b"})
    for (KernelFamily fam : {KernelFamily::kScalar, KernelFamily::kTensorCores})
      EXPECT_EQ(WarpDecodeMoe::largest_batch(preset_shape(p), fam), WarpDecodeMoe::kMaxBatch) << p << " "
                                                                                             << to_string(fam);
  const MoeShape k16 = make_shape(256, 64, 32, 16);
  const int largest = WarpDecodeMoe::largest_batch(k16);
  EXPECT_GT(largest, 64);
  EXPECT_LE(largest, 51200 / 16);
  EXPECT_NO_THROW(WarpDecodeMoe(k16, largest));
  try {
    WarpDecodeMoe too_many(k16, largest + 1);
    ADD_FAILURE() << "max_batch " << largest + 1 << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the largest batch"), std::string::npos) << e.what();
  }
  // Its largest batch runs, and gives the reference's result.
  const Layer layer = Layer::make(k16, WeightFormat::kBF16, fresh_seed());
  WarpDecodeMoe moe(k16, largest);
  const auto x = synthetic_input(largest, k16.hidden, fresh_seed(), InputKind::kGaussian);
  const auto r = random_routing(largest, k16.experts, k16.top_k, fresh_seed());
  const auto y = run_experts(moe, layer, x, r, largest, OutputType::kFP32);
  const auto ref = reference::moe_experts(layer.host.view(), x.data(), r.ids.data(), r.w.data(), largest,
                                          reference::Precision::kFP64);
  EXPECT_LE(reference::compare(ref.data(), y.data(), ref.size()).rel_l2, 2e-5);
}

TEST(WarpDecode, UploadFromAHostViewEqualsUploadFromWeights) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(160, 96, 20, 6);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    const DeviceMoeWeights from_view = DeviceMoeWeights::upload(layer.host.view());
    EXPECT_EQ(from_view.bytes(), layer.dev.bytes());
    WarpDecodeMoe moe(s, 16);
    const int B = 7;
    const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
    const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
    DeviceBuffer<uint16_t> dx(x);
    DeviceBuffer<int32_t> ids(r.ids);
    DeviceBuffer<float> rw(std::vector<float>(r.w.begin(), r.w.end()));
    DeviceBuffer<float> y1(size_t(B) * s.hidden), y2(size_t(B) * s.hidden);
    y1.fill_bytes(0xFF);
    y2.fill_bytes(0xFF);
    const RoutingView rv{B, s.top_k, ids.data(), rw.data()};
    moe.experts(layer.dev.view(), dx.data(), rv, MoeOutput{y1.data(), OutputType::kFP32, nullptr}, nullptr);
    moe.experts(from_view.view(), dx.data(), rv, MoeOutput{y2.data(), OutputType::kFP32, nullptr}, nullptr);
    EXPECT_EQ(y1.download(), y2.download()) << name(f);
  }
  MoeWeightsView device_view = DeviceMoeWeights::upload(Layer::make(s, WeightFormat::kBF16, 1).host).view();
  EXPECT_THROW(DeviceMoeWeights::upload(device_view), InvalidArgument);  // not a host view
}

// Small and quick: the case run under compute-sanitizer (memcheck, racecheck).
TEST(WarpDecode, SanitizerCase) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(160, 96, 20, 6);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    WarpDecodeMoe moe(s, 40);
    for (int B : {1, 9, 40}) {
      const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
      DeviceBuffer<uint16_t> dx(x);
      DeviceBuffer<uint16_t> y(size_t(B) * s.hidden);
      moe.forward(layer.dev.view(), dx.data(), B, MoeOutput{y.data(), OutputType::kBF16, nullptr}, nullptr);
      WD_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
}


// ---- the default path: one family per layer object --------------------------------------
// experts() without a config picks its configuration per batch size, but
// never its family: a token's output is the same at every B, for objects
// whose family is the scalar one, the tensor cores, or kAuto's choice.
TEST(WarpDecode, DefaultPathIsBatchInvariantForEveryFamily) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("qwen3-30b-a3b");
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    const auto xt = synthetic_input(1, s.hidden, fresh_seed(), InputKind::kGaussian);
    const auto rt = random_routing(1, s.experts, s.top_k, fresh_seed());
    for (KernelFamily fam : {KernelFamily::kAuto, KernelFamily::kScalar, KernelFamily::kTensorCores})
      for (int max_batch : {8, 64}) {
        WarpDecodeMoe moe(s, max_batch, fam);
        EXPECT_NE(moe.family(f), KernelFamily::kAuto);
        const auto alone = run_experts(moe, layer, xt, rt, 1, OutputType::kFP32);
        for (int B : {2, 5, 8, 16, 33, 64}) {
          if (B > max_batch) continue;
          const int pos = int(fresh_seed() % B);
          EXPECT_EQ(bits_changed_in_batch(moe, layer, xt, rt, alone, B, pos, nullptr), 0u)
              << name(f) << " family " << to_string(moe.family(f)) << " max_batch " << max_batch << " B=" << B
              << " config " << moe.default_config(B, layer.dev.view()).label();
        }
      }
  }
}

// ---- the tensor-core kernels (WarpDecodeConfig::tensor_cores) -------------------------
// The same checks as above, on the tensor-core family. Its bits differ from
// the scalar family's, so batch invariance is checked within the family.

TEST(WarpDecodeTensorCores, EveryBatchFrom1To70AndLargerOnSmallShapes) {
  WD_REQUIRE_GPU();
  // I = 192: 3 K ranges of one unit; tiny: I = 128, 2 ranges; E = 20, K = 6:
  // many tokens share experts. H = 512 takes MXFP8 gate_up's deep rounds,
  // H = 256 (tiny) falls back from them. I = 896: 7 K ranges of two units
  // (MXFP8 B <= 16: the down kernel's register walks with two units). PDL,
  // the L2 policy, deep loads and the tiled down weights vary with B.
  check_every_batch({make_shape(512, 192, 20, 6), preset_shape("tiny"), make_shape(256, 896, 20, 6)},
                    KernelFamily::kTensorCores,
                    [](int B) { return tc_config(B % 2 == 0, B % 3 != 0, B % 4 < 2, B % 5 != 0, B % 3 == 1); });
}

// MXFP8 weights with E8M0 codes above 142 (scales above 2^15, which no real
// checkpoint has): the decode's FP32 path (with_scale_path's wide branch in
// the tensor-core kernels; the scalar codecs) against FP64, both families,
// the canonical and the tiled copies. Weights ~ N(0, 0.02 · 2^30): codes
// 143-148 on this shape (checked).
TEST(WarpDecodeTensorCores, WideScalesTakeTheFp32Decode) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(512, 192, 20, 6);
  const Layer layer = Layer::make(s, WeightFormat::kMXFP8, fresh_seed(), 0.02f * 0x1p30f);
  const uint8_t top = *std::max_element(layer.host.gate_up_scales.begin(), layer.host.gate_up_scales.end());
  ASSERT_GT(top, 142) << "no wide scale code: the case tests the narrow path only";
  ASSERT_LE(top, 246);
  EXPECT_FALSE(layer.dev.view().mx_scales_narrow) << "codes above 142 measured as narrow";
  for (KernelFamily family : {KernelFamily::kScalar, KernelFamily::kTensorCores}) {
    WarpDecodeMoe moe(s, 64, family);
    for (int B : {1, 8, 64}) {
      const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
      const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
      const auto ref = reference_y(layer, x, r, B);
      std::vector<WarpDecodeConfig> cfgs = {moe.default_config(B, layer.dev.view())};
      if (family == KernelFamily::kTensorCores) cfgs.push_back(tc_config(true, true, B == 8, true, true));
      for (const auto& cfg : cfgs)
        expect_close(ref, run_experts(moe, layer, x, r, B, OutputType::kFP32, &cfg), 2e-5,
                     "wide scales B=" + std::to_string(B) + " " + cfg.label());
    }
  }
}

// Weights whose scale codes are all narrow (every real checkpoint) are
// marked so at upload (MoeWeightsView::mx_scales_narrow), and the
// tensor-core kernels then skip their per-item scale vote (kNarrowOnly):
// the same decode, so the same bits as with the flag cleared, and FP32
// accurate. One unit a warp (I = 192: the narrow-only down kernel) and two
// (I = 1536, as qwen3-235b-a22b: down keeps its vote there), canonical and
// tiled weights.
TEST(WarpDecodeTensorCores, NarrowScalesSkipTheVoteWithTheSameBits) {
  WD_REQUIRE_GPU();
  for (const MoeShape& s : {make_shape(512, 192, 20, 6), make_shape(256, 1536, 16, 4)}) {
    const Layer layer = Layer::make(s, WeightFormat::kMXFP8, fresh_seed());
    const MoeWeightsView narrow = layer.dev.view();
    ASSERT_TRUE(narrow.mx_scales_narrow) << "N(0, 0.02) weights: every code should be narrow";
    MoeWeightsView voting = narrow;
    voting.mx_scales_narrow = false;
    WarpDecodeMoe moe(s, 64, KernelFamily::kTensorCores);
    for (int B : {1, 9, 64}) {
      const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
      const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
      const auto ref = reference_y(layer, x, r, B);
      for (const WarpDecodeConfig& cfg : {tc_config(), tc_config(true, true, true, true, true)}) {
        const auto y_narrow = run_experts(moe, layer, x, r, B, OutputType::kFP32, &cfg, nullptr, &narrow);
        const auto y_voting = run_experts(moe, layer, x, r, B, OutputType::kFP32, &cfg, nullptr, &voting);
        const std::string what = "I=" + std::to_string(s.intermediate) + " B=" + std::to_string(B) + " " + cfg.label();
        expect_same_bits(y_narrow, y_voting, what);
        expect_close(ref, y_narrow, 2e-5, "narrow-only " + what);
      }
    }
  }
}

TEST(WarpDecodeTensorCores, RealShapes) {
  WD_REQUIRE_GPU();
  check_real_shapes(KernelFamily::kTensorCores);
}

TEST(WarpDecodeTensorCores, OddRoutings) {
  WD_REQUIRE_GPU();
  check_odd_routings(KernelFamily::kTensorCores);
}

TEST(WarpDecodeTensorCores, FusedResidualAdd) {
  WD_REQUIRE_GPU();
  check_residual(preset_shape("tiny"), KernelFamily::kTensorCores, {WeightFormat::kBF16, WeightFormat::kMXFP8}, {3, 70});
}

// PDL, the L2 policy, deep loads, the tiled down and gate_up weights,
// down's paired walk and gate_up's two-tile passes on and off (none changes
// the bits: the token alone runs on both tiled copies with one-tile passes,
// in batches every way); 65 and 80 tokens: the group's second mask word, 130
// and 200 its second walk of 128.
TEST(WarpDecodeTensorCores, BatchInvariantAndDeterministicBitwise) {
  WD_REQUIRE_GPU();
  check_batch_invariance({tc_config(true, false, true, true, true), tc_config(false, true, false, false),
                          tc_config(true, true, false, true, true), tc_config(true, true, true, true, false),
                          tc_config(true, true, false, true, true, true),
                          two_tiles(tc_config(true, true, false, true, true, true))},
                         {1, 2, 7, 8, 9, 16, 17, 32, 33, 37, 64, 65, 80, 130, 200});
  // Two, four and ten units a warp (I = 896, 2560, 7040): MXFP8's register
  // walks up to B = 16 (ten units: 4), its general walk of four-token tiles
  // to B = 32.
  for (const MoeShape& s : {make_shape(512, 896, 128, 8), make_shape(256, 2560, 64, 8), make_shape(256, 7040, 32, 8)})
    check_batch_invariance({tc_config(true, false, true, true, true), tc_config(true, true, true, true, false),
                            tc_config(true, true, false, true, true, true)},
                           {1, 8, 9, 16, 17, 32, 33, 64}, s);
}

// The routings the same-bits tests run on: 0 uniform random; 1 the same,
// with a token routed twice to one expert in the first token and in the
// last (past 64 and 128 tokens: later mask words and walks; needs K >= 3);
// 2 every token on the same K experts (B tokens an expert).
constexpr int kSameBitsRoutings = 3;
HostRouting same_bits_routing(int variant, int B, const MoeShape& s) {
  HostRouting r = random_routing(B, s.experts, s.top_k, fresh_seed());
  const size_t K = size_t(s.top_k), last = size_t(B - 1) * K;
  if (variant == 1) {
    r.ids[1] = r.ids[0];
    r.ids[last + 2] = r.ids[last];
  } else if (variant == 2) {
    for (int t = 0; t < B; ++t)
      for (size_t k = 0; k < K; ++k) r.ids[size_t(t) * K + k] = int32_t((3 * k + 1) % size_t(s.experts));
  }
  return r;
}

// moe_down_tc's paired general walk (tc_down_pairs: two warps a K slice
// that fold into one set of accumulators in turns) against the one-warp
// walks, on weights it takes (tiled MXFP8 with narrow scales; one unit of I
// a warp: 3 K slices of H = 512, I = 192, 12 of qwen3-30b-a3b; four units:
// I = 2560; ten: I = 7040): the same bits, FP32 and BF16 outputs, from B =
// 1 (against the register walks up to 16) through one and two
// mask words and two walks of 128, on uniform routing, with tokens routed
// twice to one expert (its column-at-a-time fold), and with every token on
// the same K experts (B tokens an expert); FP32 output against the FP64
// reference on the small shapes.
TEST(WarpDecodeTensorCores, PairedDownWalkKeepsTheBits) {
  WD_REQUIRE_GPU();
  for (const MoeShape& s : {make_shape(512, 192, 20, 6), make_shape(256, 2560, 64, 8), make_shape(256, 7040, 32, 8),
                            preset_shape("qwen3-30b-a3b")}) {
    const bool small = s.hidden <= 512;
    SCOPED_TRACE("H=" + std::to_string(s.hidden) + " I=" + std::to_string(s.intermediate));
    const Layer layer = Layer::make(s, WeightFormat::kMXFP8, fresh_seed());
    ASSERT_TRUE(layer.dev.view().mx_scales_narrow) << "the paired walk needs narrow scales";
    ASSERT_NE(layer.dev.view().down_tiled, nullptr);
    WarpDecodeMoe moe(s, 200);
    const WarpDecodeConfig one = tc_config(true, true, false, true, true);
    const WarpDecodeConfig two = tc_config(true, true, false, true, true, true);
    ASSERT_NE(two.label().find("/pairs"), std::string::npos) << two.label();
    const std::vector<int> batches = s.intermediate == 192 || !small
                                         ? std::vector<int>{1, 2, 8, 9, 16, 17, 20, 31, 32, 33, 48, 64, 65, 70,
                                                            100, 128, 130, 200}
                                         : std::vector<int>{1, 5, 9, 16, 17, 32, 64, 70};
    for (int B : batches)
      for (int routing = 0; routing < kSameBitsRoutings; ++routing) {
        const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
        const HostRouting r = same_bits_routing(routing, B, s);
        const std::string what = "B=" + std::to_string(B) + " routing " + std::to_string(routing);
        for (OutputType type : {OutputType::kFP32, OutputType::kBF16}) {
          const auto y_one = run_experts(moe, layer, x, r, B, type, &one);
          const auto y_two = run_experts(moe, layer, x, r, B, type, &two);
          expect_same_bits(y_one, y_two, what + (type == OutputType::kFP32 ? " FP32" : " BF16"));
          if (small && type == OutputType::kFP32) expect_close(reference_y(layer, x, r, B), y_two, 2e-5, what);
        }
      }
  }
}

// moe_gate_up_tc's two-tile passes (tc_gate_up_two_tiles: 16 of an expert's
// tokens against one decoded weight fragment) against one-tile passes, on
// the tiled gate_up copy, BF16 (tiled-only weights) and MXFP8 (narrow
// scales, and the same weights with the per-round scale vote): the same bits, FP32 and BF16
// outputs, at B where experts hold one token to many tiles, on uniform
// routing, with tokens routed twice to one expert, and with every token on
// the same K experts (B tokens an expert: odd tile counts, a part-filled
// last pass); FP32 against the FP64 reference on the small shape. The
// default turns them on by the measured rule (WarpDecodeConfig::for_batch).
TEST(WarpDecodeTensorCores, GateUpTwoTilePassesKeepTheBits) {
  WD_REQUIRE_GPU();
  for (const MoeShape& s : {make_shape(512, 192, 20, 6), preset_shape("qwen3-30b-a3b")}) {
    const bool small = s.hidden <= 512;
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
      SCOPED_TRACE(std::string(name(f)) + " H=" + std::to_string(s.hidden));
      // BF16 weights hold the tiled gate_up copy only tiled-only.
      const Layer layer = [&] {
        Layer l = Layer::make(s, f, fresh_seed());
        if (f == WeightFormat::kBF16) l.dev = DeviceMoeWeights::upload(l.host, DeviceWeightsOptions::tiled_only());
        return l;
      }();
      ASSERT_NE(layer.dev.view().gate_up_tiled, nullptr);
      std::vector<MoeWeightsView> views{layer.dev.view()};
      if (f == WeightFormat::kMXFP8) {
        ASSERT_TRUE(views[0].mx_scales_narrow);
        views.push_back(views[0]);
        views[1].mx_scales_narrow = false;  // the kernels with the scale vote
      }
      WarpDecodeMoe moe(s, 256);
      const WarpDecodeConfig one = tc_config(true, true, false, true, true);
      const WarpDecodeConfig two = two_tiles(one);
      ASSERT_NE(two.label().find("/2t"), std::string::npos) << two.label();
      EXPECT_EQ(moe.default_config(256, views[0]).tc_gate_up_two_tiles, true);
      EXPECT_EQ(moe.default_config(1, views[0]).tc_gate_up_two_tiles, false);
      const std::vector<int> batches = small ? std::vector<int>{1, 3, 8, 17, 33, 70, 130}
                                             : std::vector<int>{1, 16, 64, 72, 96, 128, 200, 256};
      for (int B : batches)
        for (int routing = 0; routing < kSameBitsRoutings; ++routing) {
          const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
          const HostRouting r = same_bits_routing(routing, B, s);
          for (size_t v = 0; v < views.size(); ++v)
            for (OutputType type : {OutputType::kFP32, OutputType::kBF16}) {
              const auto y_one = run_experts(moe, layer, x, r, B, type, &one, nullptr, &views[v]);
              const auto y_two = run_experts(moe, layer, x, r, B, type, &two, nullptr, &views[v]);
              const std::string what = "B=" + std::to_string(B) + " routing " + std::to_string(routing) +
                                       (v ? " voting" : " narrow") + (type == OutputType::kFP32 ? " FP32" : " BF16");
              expect_same_bits(y_one, y_two, what);
              if (type == OutputType::kFP32 && (small || B <= 16)) expect_close(reference_y(layer, x, r, B), y_two, 2e-5, what);
            }
        }
    }
  }
}

// Run under compute-sanitizer memcheck and racecheck by scripts/gpu_check.sh;
// B = 70 takes one walk of a 128-token group (two mask words; token 66
// repeats an expert: the slow bookkeeping path), B = 140 two; a repeated
// expert at B = 5, 9 the slow bookkeeping path too, B = 1 and 8 the down kernel's by-token walk,
// B = 16 its quad walk and B = 32 MXFP8's four-token general walk (I = 192:
// one unit a warp; I = 896, 2560 and 7040, MXFP8, B = 1, 9, 16: two, four and
// ten units, the last with the four-token general walk from B = 5). Shallow
// and deep loads (H = 512: MXFP8 gate_up's deep rounds apply). The last
// configuration but one asks for down's paired walk: MXFP8 at B = 32, 70
// (with its duplicate) and 140 take it, and in the second loop four units at
// B = 32 and ten at B = 9 (with a duplicate) and 32, so racecheck sees the
// pairs' turns. The last of the first loop: gate_up's two-tile passes on the
// tiled copy, both formats (at B = 70 and 140, 21 and 42 entries an expert:
// full second tiles; below, part-filled).
TEST(WarpDecodeTensorCores, SanitizerCase) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(512, 192, 20, 6);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    const Layer layer = Layer::make(s, f, fresh_seed());
    WarpDecodeMoe moe(s, 140);
    for (const WarpDecodeConfig& cfg : {tc_config(), tc_config(true, true, true, true),
                                        tc_config(true, true, true, true, true), tc_config(true, true, false, true, true),
                                        tc_config(true, true, false, true, true, true),
                                        two_tiles(tc_config(true, true, false, true, true))}) {
      for (int B : {1, 5, 8, 9, 16, 32, 70, 140}) {
        const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
        auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
        if (B == 5 || B == 9) r.ids[1] = r.ids[0];
        if (B == 70) r.ids[66 * s.top_k + 1] = r.ids[66 * s.top_k];  // a duplicate in the second mask word
        run_experts(moe, layer, x, r, B, OutputType::kBF16, &cfg);
      }
    }
  }
  for (const MoeShape& s2 : {make_shape(256, 896, 20, 6), make_shape(256, 2560, 20, 6), make_shape(256, 7040, 20, 6)}) {
    const Layer layer = Layer::make(s2, WeightFormat::kMXFP8, fresh_seed());
    WarpDecodeMoe moe(s2, 32);
    for (const WarpDecodeConfig& cfg : {tc_config(), tc_config(true, true, false, true),
                                        tc_config(true, true, false, true, true, true)})
      for (int B : {1, 9, 16, 32}) {
        const auto x = synthetic_input(B, s2.hidden, fresh_seed(), InputKind::kGaussian);
        auto r = random_routing(B, s2.experts, s2.top_k, fresh_seed());
        if (B == 9) r.ids[1] = r.ids[0];
        run_experts(moe, layer, x, r, B, OutputType::kBF16, &cfg);
      }
  }
}

// Tiled-only weights (DeviceWeightsOptions::tiled_only()), BF16 and MXFP8:
// the canonical memory, and the same bits as weights that keep the canonical
// tensors, in every tensor-core configuration (those that ask for the
// canonical tensors read the tiled ones); the readers of the canonical layout
// refuse them, and so do options the shape cannot take. Uploaded and
// generated on the device.
TEST(WarpDecodeTensorCores, TiledOnlyWeightsGiveTheSameBits) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(512, 192, 20, 6);  // both tilings take it; deep rounds apply
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    SCOPED_TRACE(name(f));
    const Layer full = Layer::make(s, f, fresh_seed());
    const Layer tiled{full.host, DeviceMoeWeights::upload(full.host, DeviceWeightsOptions::tiled_only())};
    const MoeWeightsView tv = tiled.dev.view();
    EXPECT_FALSE(tv.has_canonical());
    EXPECT_EQ(tv.gate_up_scales, nullptr);
    EXPECT_EQ(tv.down_scales, nullptr);
    ASSERT_NE(tv.gate_up_tiled, nullptr);
    ASSERT_NE(tv.down_tiled, nullptr);
    EXPECT_EQ(tv.gate_up_tiled_scales == nullptr, f == WeightFormat::kBF16);
    DeviceWeightsOptions canonical_only;
    canonical_only.tiled_mxfp8_down = false;
    EXPECT_EQ(tiled.dev.bytes(), DeviceMoeWeights::upload(full.host, canonical_only).bytes());

    WarpDecodeMoe moe(s, 80);
    for (const WarpDecodeConfig& cfg : {tc_config(), tc_config(true, true, true, true, true),
                                        tc_config(false, false, false, false, false), tc_config(true, true, true, false, true),
                                        two_tiles(tc_config(true, true, false, true, true))})
      for (int B : {1, 9, 64, 70}) {
        const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
        const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
        const auto y_full = run_experts(moe, full, x, r, B, OutputType::kFP32, &cfg);
        const auto y_tiled = run_experts(moe, tiled, x, r, B, OutputType::kFP32, &cfg);
        const std::string what = "B=" + std::to_string(B) + " " + cfg.label();
        EXPECT_EQ(y_tiled, y_full) << what;
        expect_close(reference_y(full, x, r, B), y_tiled, 2e-5, what);
      }

    // Generated on the device (as bench-moe does): the same weights, the same bits.
    SyntheticSpec spec;
    spec.seed = fresh_seed();
    const auto gen = [&](const DeviceWeightsOptions& o) {
      return DeviceMoeWeights::synthetic(s, spec, f, MxScaleRule::kNoSaturate, nullptr, o);
    };
    MoeWeights gen_host = MoeWeights::synthetic(s, spec);
    if (f == WeightFormat::kMXFP8) gen_host = gen_host.to_mxfp8();
    const Layer gen_full{gen_host, gen(DeviceWeightsOptions{})};
    const Layer gen_tiled{gen_host, gen(DeviceWeightsOptions::tiled_only())};
    EXPECT_FALSE(gen_tiled.dev.view().has_canonical());
    {
      const int B = 33;
      const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
      const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
      const auto y = run_experts(moe, gen_tiled, x, r, B, OutputType::kFP32);
      EXPECT_EQ(y, run_experts(moe, gen_full, x, r, B, OutputType::kFP32));
      expect_close(reference_y(gen_full, x, r, B), y, 2e-5, "generated, B=33");
    }

    // Readers of the canonical layout refuse by name: the scalar kernels and
    // the classical path (BF16 too here: it reads tiled copies only with
    // SiLU·up fused, and I = 192 does not fuse; Classical.
    // TmaTileReadsTiledOnlyBf16Weights covers the shapes it reads).
    const auto refused_for = [](const std::function<void()>& call) {
      try {
        call();
      } catch (const InvalidArgument& e) {
        return std::string(e.what()).find("keep only their tiled copies") != std::string::npos;
      }
      return false;
    };
    const auto x = synthetic_input(2, s.hidden, 1, InputKind::kGaussian);
    const auto r = random_routing(2, s.experts, s.top_k, 1);
    WarpDecodeConfig scalar;
    EXPECT_TRUE(refused_for([&] { run_experts(moe, tiled, x, r, 2, OutputType::kFP32, &scalar); }));
    WarpDecodeMoe scalar_moe(s, 4, KernelFamily::kScalar);
    EXPECT_TRUE(refused_for([&] { run_experts(scalar_moe, tiled, x, r, 2, OutputType::kFP32); }));
    EXPECT_NO_THROW(run_experts(scalar_moe, full, x, r, 2, OutputType::kFP32));
    ClassicalMoe classical(s, 4);
    DeviceBuffer<uint16_t> dx(x);
    DeviceBuffer<float> y(size_t(2) * s.hidden);
    EXPECT_TRUE(refused_for(
        [&] { classical.forward(tv, dx.data(), 2, MoeOutput{y.data(), OutputType::kFP32, nullptr}, nullptr); }));
    WD_CUDA_CHECK(cudaDeviceSynchronize());

    // Shapes the layouts cannot take.
    MoeWeights odd = MoeWeights::synthetic(make_shape(160, 96, 20, 6), SyntheticSpec{});
    if (f == WeightFormat::kMXFP8) odd = odd.to_mxfp8();
    EXPECT_THROW(DeviceMoeWeights::upload(odd, DeviceWeightsOptions::tiled_only()), InvalidArgument);  // H % 64
    // A shape both tilings take but the tensor-core kernels do not (H % 256
    // != 0): tiled-only weights no kernel could read on every device, refused
    // at upload; with the default options they upload.
    MoeWeights narrow = MoeWeights::synthetic(make_shape(320, 64, 4, 2), SyntheticSpec{});
    if (f == WeightFormat::kMXFP8) narrow = narrow.to_mxfp8();
    try {
      DeviceMoeWeights::upload(narrow, DeviceWeightsOptions::tiled_only());
      ADD_FAILURE() << "tiled-only weights at H = 320 were accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("tensor-core kernels take"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(DeviceMoeWeights::upload(narrow));
  }
  // MXFP8 tiled-only needs both copies.
  DeviceWeightsOptions half = DeviceWeightsOptions::tiled_only();
  half.tiled_mxfp8_gate_up = false;
  EXPECT_THROW(DeviceMoeWeights::upload(MoeWeights::synthetic(s, SyntheticSpec{}).to_mxfp8(), half), InvalidArgument);
}

// DeviceMoeWeights holds BF16 or MXFP8 weights whose tensors have their
// layout's sizes: host weights changed after they were made (the vectors are
// public), FP8 block-128 weights (whose block scales it has no place for) and
// FP8 block-128 synthetic weights are refused before anything is allocated,
// where they used to be read past their ends or uploaded without their scales.
TEST(WarpDecode, UploadRefusesWhatItCannotHold) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("tiny");
  const MoeWeights bf16 = MoeWeights::synthetic(s, SyntheticSpec{});
  const auto message_of = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  MoeWeights shrunk = bf16;
  shrunk.down_bf16.resize(10);
  EXPECT_NE(message_of([&] { DeviceMoeWeights::upload(shrunk); }).find("bf16 down holds 10 elements"),
            std::string::npos);
  MoeWeights scales = bf16.to_mxfp8();
  scales.down_scales.clear();
  EXPECT_NE(message_of([&] { DeviceMoeWeights::upload(scales); }).find("mxfp8 down scales holds 0"),
            std::string::npos);
  EXPECT_NE(message_of([&] { DeviceMoeWeights::upload(bf16.to_fp8_block128()); }).find("BF16 or MXFP8"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              DeviceMoeWeights::synthetic(s, SyntheticSpec{}, WeightFormat::kFP8Block128, MxScaleRule::kNoSaturate,
                                          nullptr);
            }).find("BF16 or MXFP8"),
            std::string::npos);
  // The same weights as made: the upload is the host tensors, byte for byte.
  const DeviceMoeWeights d = DeviceMoeWeights::upload(bf16, DeviceWeightsOptions{});
  std::vector<uint16_t> down(bf16.down_bf16.size());
  WD_CUDA_CHECK(cudaMemcpy(down.data(), d.view().down, down.size() * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(down, bf16.down_bf16);
}

// Both tiled copies beside the canonical tensors
// (DeviceWeightsOptions::tiled_beside_canonical()), BF16 and MXFP8: the
// memory of the canonical tensors plus the tiled-only upload's, the default
// configuration streams the tiled copies, every tensor-core configuration
// gives the bits of canonical-only weights, and the readers of the canonical
// layout (the scalar kernels, the classical path) still take the weights,
// with the bits they give on canonical-only weights. A shape the tilings
// cannot take gets the canonical tensors alone.
TEST(WarpDecodeTensorCores, TiledBesideCanonicalServesEveryPath) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(512, 256, 20, 6);  // the classical W8A8 path needs H, I % 128
  DeviceWeightsOptions canonical_only;
  canonical_only.tiled_mxfp8_down = false;
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
    SCOPED_TRACE(name(f));
    MoeWeights host = MoeWeights::synthetic(s, SyntheticSpec{fresh_seed()});
    if (f == WeightFormat::kMXFP8) host = host.to_mxfp8();
    const Layer canon{host, DeviceMoeWeights::upload(host, canonical_only)};
    const Layer both{host, DeviceMoeWeights::upload(host, DeviceWeightsOptions::tiled_beside_canonical())};
    const MoeWeightsView bv = both.dev.view();
    ASSERT_TRUE(bv.has_canonical());
    ASSERT_NE(bv.gate_up_tiled, nullptr);
    ASSERT_NE(bv.down_tiled, nullptr);
    const size_t router_bytes = size_t(s.experts) * s.hidden * sizeof(uint16_t);
    EXPECT_EQ(both.dev.bytes(),
              canon.dev.bytes() + DeviceMoeWeights::upload(host, DeviceWeightsOptions::tiled_only()).bytes() -
                  router_bytes);

    WarpDecodeMoe moe(s, 80);
    const WarpDecodeConfig dflt = moe.default_config(9, bv);
    EXPECT_TRUE(dflt.tc_tiled_down && dflt.tc_tiled_gate_up) << dflt.label();
    for (const WarpDecodeConfig* cfg : {static_cast<const WarpDecodeConfig*>(nullptr), &dflt})
      for (int B : {1, 9, 64, 70}) {
        const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
        const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
        const auto y = run_experts(moe, both, x, r, B, OutputType::kFP32, cfg);
        const std::string what = "B=" + std::to_string(B) + (cfg ? " " + cfg->label() : " default");
        EXPECT_EQ(y, run_experts(moe, canon, x, r, B, OutputType::kFP32, cfg)) << what;
        expect_close(reference_y(canon, x, r, B), y, 2e-5, what);
      }

    const int B = 5;
    const auto x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
    const auto r = random_routing(B, s.experts, s.top_k, fresh_seed());
    WarpDecodeMoe scalar_moe(s, 8, KernelFamily::kScalar);
    EXPECT_EQ(run_experts(scalar_moe, both, x, r, B, OutputType::kFP32),
              run_experts(scalar_moe, canon, x, r, B, OutputType::kFP32));
    ClassicalMoe classical(s, 8);
    DeviceBuffer<uint16_t> dx(x);
    const auto classical_y = [&](const MoeWeightsView& v) {
      DeviceBuffer<float> y(size_t(B) * s.hidden);
      y.fill_bytes(0xFF);
      classical.forward(v, dx.data(), B, MoeOutput{y.data(), OutputType::kFP32, nullptr}, nullptr);
      WD_CUDA_CHECK(cudaDeviceSynchronize());
      return y.download();
    };
    const auto yc = classical_y(bv);
    EXPECT_EQ(yc, classical_y(canon.dev.view()));
    for (float v : yc) ASSERT_TRUE(std::isfinite(v));
  }
  // A shape the tilings cannot take (H % 64): the canonical tensors alone.
  const MoeWeights odd = MoeWeights::synthetic(make_shape(160, 96, 20, 6), SyntheticSpec{});
  const auto odd_dev = DeviceMoeWeights::upload(odd, DeviceWeightsOptions::tiled_beside_canonical());
  EXPECT_TRUE(odd_dev.view().has_canonical());
  EXPECT_EQ(odd_dev.view().gate_up_tiled, nullptr);
  EXPECT_EQ(odd_dev.view().down_tiled, nullptr);
}

TEST(WarpDecodeTensorCores, RefusesShapesItCannotTake) {
  WD_REQUIRE_GPU();
  const MoeShape s = make_shape(160, 96, 20, 6);  // H % 256 != 0
  const Layer layer = Layer::make(s, WeightFormat::kBF16, 1);
  WarpDecodeMoe moe(s, 4);
  const auto x = synthetic_input(2, s.hidden, 1, InputKind::kGaussian);
  const auto r = random_routing(2, s.experts, s.top_k, 1);
  const WarpDecodeConfig cfg = tc_config();
  EXPECT_THROW(run_experts(moe, layer, x, r, 2, OutputType::kFP32, &cfg), InvalidArgument);
  EXPECT_THROW(WarpDecodeMoe(s, 4, KernelFamily::kTensorCores), InvalidArgument);
  EXPECT_EQ(WarpDecodeMoe(s, 64).family(WeightFormat::kBF16), KernelFamily::kScalar);  // kAuto falls back
}

}  // namespace
}  // namespace wd
