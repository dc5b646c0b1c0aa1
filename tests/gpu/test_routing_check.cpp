// validate_routing and WD_CHECK_ROUTING (warpdecode/routing_check.h): a bad
// id or weight anywhere in a routing is found, and named; a good routing
// passes untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/device_buffer.h"
#include "gpu_test_util.h"
#include "test_support.h"
#include "warpdecode/classical.h"
#include "warpdecode/error.h"
#include "warpdecode/routing_check.h"
#include "warpdecode/warp_decode.h"

namespace wd {
namespace {

using test::fresh_seed;

struct DeviceRouting {
  DeviceBuffer<int32_t> ids;
  DeviceBuffer<float> weights;
  int batch = 0, top_k = 0;
  DeviceRouting(const std::vector<int32_t>& i, const std::vector<float>& w, int B, int K)
      : ids(i), weights(w), batch(B), top_k(K) {}
  RoutingView view() { return RoutingView{batch, top_k, ids.data(), weights.data()}; }
};

struct HostEntries {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
HostEntries good_entries(int B, int E, int K) {
  const test::HostRouting r = test::random_routing(B, E, K, fresh_seed());
  return {r.ids, std::vector<float>(r.w.begin(), r.w.end())};
}

// The message of validate_routing's throw, or "" when it does not throw.
std::string validation_error(const HostEntries& h, int B, int E, int K) {
  DeviceRouting d(h.ids, h.weights, B, K);
  try {
    validate_routing(d.view(), E, nullptr);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(RoutingCheck, GoodRoutingsPassAndStayUnchanged) {
  WD_REQUIRE_GPU();
  for (int B : {1, 7, 64, 4096}) {
    const HostEntries h = good_entries(B, 128, 8);
    DeviceRouting d(h.ids, h.weights, B, 8);
    EXPECT_NO_THROW(validate_routing(d.view(), 128, nullptr)) << "B = " << B;
    EXPECT_EQ(d.ids.download(), h.ids);
    EXPECT_EQ(d.weights.download(), h.weights);
  }
  // The edges of [0, E) are in range: every id 0, then every id E - 1.
  for (int32_t id : {0, 127}) {
    HostEntries h = good_entries(3, 128, 8);
    std::fill(h.ids.begin(), h.ids.end(), id);
    EXPECT_EQ(validation_error(h, 3, 128, 8), "") << "every id " << id;
  }
}

TEST(RoutingCheck, EachKindOfBadEntryIsFoundAndNamed) {
  WD_REQUIRE_GPU();
  const int B = 37, E = 128, K = 8;
  std::mt19937 g(fresh_seed());
  const int token = std::uniform_int_distribution<int>(0, B - 1)(g);
  const int slot = std::uniform_int_distribution<int>(0, K - 1)(g);
  const size_t at = size_t(token) * K + slot;
  const std::string where = "token " + std::to_string(token) + ", slot " + std::to_string(slot) + ": ";
  struct Bad {
    int32_t id;  // -2: keep the good id
    float weight;
    std::string named;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const Bad& bad : {Bad{E, 0.5f, "id 128"}, Bad{-1, 0.5f, "id -1"}, Bad{1 << 30, 0.5f, "id 1073741824"},
                         Bad{-2, nan, "weight nan"}, Bad{-2, -inf, "weight -inf"}}) {
    HostEntries h = good_entries(B, E, K);
    if (bad.id != -2) h.ids[at] = bad.id;
    h.weights[at] = bad.weight;
    const std::string msg = validation_error(h, B, E, K);
    EXPECT_NE(msg.find("1 of 296 entries are bad"), std::string::npos) << msg;
    EXPECT_NE(msg.find(where + (bad.id == -2 ? "id " + std::to_string(h.ids[at]) + ", " : "") + bad.named),
              std::string::npos)
        << msg;
  }
}

TEST(RoutingCheck, TheFirstOfManyBadEntriesIsNamedWithTheirCount) {
  WD_REQUIRE_GPU();
  // Bad entries scattered over a prefill-sized routing (more entries than
  // the check's grid has threads): the lowest index is named whichever
  // thread finds it first.
  const int B = 4096, E = 128, K = 8;
  HostEntries h = good_entries(B, E, K);
  std::mt19937 g(fresh_seed());
  std::vector<size_t> at;
  for (int n = 0; n < 25; ++n) at.push_back(std::uniform_int_distribution<size_t>(0, h.ids.size() - 1)(g));
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  for (size_t i : at) h.ids[i] = E + int32_t(i % 5);
  const std::string msg = validation_error(h, B, E, K);
  EXPECT_NE(msg.find(std::to_string(at.size()) + " of 32768 entries are bad"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the first is token " + std::to_string(at[0] / K) + ", slot " + std::to_string(at[0] % K) +
                     ": id " + std::to_string(E + at[0] % 5)),
            std::string::npos)
      << msg;
}

TEST(RoutingCheck, ArgumentsTheCheckCannotTakeThrow) {
  WD_REQUIRE_GPU();
  const HostEntries h = good_entries(2, 16, 4);
  DeviceRouting d(h.ids, h.weights, 2, 4);
  EXPECT_THROW(validate_routing(d.view(), 0, nullptr), InvalidArgument);
  EXPECT_THROW(validate_routing(RoutingView{0, 4, d.ids.data(), d.weights.data()}, 16, nullptr), InvalidArgument);
  EXPECT_THROW(validate_routing(RoutingView{2, 4, nullptr, d.weights.data()}, 16, nullptr), InvalidArgument);
}

// The experts() entry points under WD_CHECK_ROUTING=1: ctest runs this test a
// second time with the variable set (RoutingCheckUnderTheEnvironment), and
// scripts/gpu_check.sh does too; without it the test skips.
TEST(RoutingCheck, ExpertsCallsCheckTheirRoutingUnderTheEnvironment) {
  WD_REQUIRE_GPU();
  if (!routing_checks_enabled()) GTEST_SKIP() << "WD_CHECK_ROUTING is not 1 in this process";
  const MoeShape s = preset_shape("tiny");
  const int B = 5;
  SyntheticSpec spec;
  spec.seed = fresh_seed();
  const DeviceMoeWeights w = DeviceMoeWeights::upload(MoeWeights::synthetic(s, spec));
  const std::vector<uint16_t> x = synthetic_input(B, s.hidden, fresh_seed(), InputKind::kGaussian);
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<float> y(size_t(B) * s.hidden);
  const MoeOutput out{y.data(), OutputType::kFP32, nullptr};
  HostEntries h = good_entries(B, s.experts, s.top_k);
  const WarpDecodeMoe warp(s, B);
  const ClassicalMoe classical(s, B);
  {
    DeviceRouting good(h.ids, h.weights, B, s.top_k);
    EXPECT_NO_THROW(warp.experts(w.view(), dx.data(), good.view(), out, nullptr));
    EXPECT_NO_THROW(classical.experts(w.view(), dx.data(), good.view(), out, nullptr));
  }
  h.ids[size_t(B) * s.top_k - 1] = s.experts;
  DeviceRouting bad(h.ids, h.weights, B, s.top_k);
  for (int path = 0; path < 2; ++path) {
    try {
      if (path == 0) warp.experts(w.view(), dx.data(), bad.view(), out, nullptr);
      else classical.experts(w.view(), dx.data(), bad.view(), out, nullptr);
      ADD_FAILURE() << (path == 0 ? "warp decode" : "classical") << " took an id of " << s.experts;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("token " + std::to_string(B - 1) + ", slot " +
                                           std::to_string(s.top_k - 1) + ": id " + std::to_string(s.experts)),
                std::string::npos)
          << e.what();
    }
  }
  // Inside a graph capture the check steps aside (a capture cannot
  // synchronise): recording the call neither throws nor breaks the capture.
  cudaStream_t st;
  WD_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const HostEntries g = good_entries(B, s.experts, s.top_k);
  DeviceRouting good(g.ids, g.weights, B, s.top_k);
  EXPECT_NO_THROW(test::capture_and_replay(
      st, y, [&](cudaStream_t c) { warp.experts(w.view(), dx.data(), good.view(), out, c); }));
  WD_CUDA_CHECK(cudaStreamDestroy(st));
  for (float v : y.download()) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace wd
