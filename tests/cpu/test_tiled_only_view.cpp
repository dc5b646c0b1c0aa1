// Views of tiled-only MXFP8 weights (DeviceWeightsOptions::tiled_only()): on
// the device a canonical tensor may be absent where its tiled copy is there,
// never elsewhere, and readers of the canonical layout refuse such views by
// name. (The pointers below are host memory standing in for device memory:
// validate() reads none of them.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "warpdecode/error.h"
#include "warpdecode/weights.h"

namespace wd {
namespace {

struct TiledOnly {
  MoeWeights w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).to_mxfp8();
  std::vector<uint8_t> gq = w.gate_up_q, gs = w.gate_up_scales, dq = w.down_q, ds = w.down_scales;

  // Both tiled copies set, both canonical tensors left out, on the device.
  MoeWeightsView view() const {
    MoeWeightsView v = w.view();
    v.space = MemorySpace::kDevice;
    v.gate_up_tiled = gq.data();
    v.gate_up_tiled_scales = gs.data();
    v.down_tiled = dq.data();
    v.down_tiled_scales = ds.data();
    v.gate_up = v.down = nullptr;
    v.gate_up_scales = v.down_scales = nullptr;
    return v;
  }
};

std::string error_of(const MoeWeightsView& v) {
  try {
    v.validate();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TiledOnlyView, ValidOnTheDeviceWithoutCanonicalTensors) {
  const TiledOnly t;
  const MoeWeightsView v = t.view();
  EXPECT_EQ(error_of(v), "");
  EXPECT_FALSE(v.has_canonical());
  EXPECT_TRUE(t.w.view().has_canonical());
  // One tensor tiled-only, the other canonical only: also readable.
  MoeWeightsView mixed = v;
  mixed.down = t.w.down_q.data();
  mixed.down_scales = t.w.down_scales.data();
  mixed.down_tiled = mixed.down_tiled_scales = nullptr;
  EXPECT_EQ(error_of(mixed), "");
  EXPECT_FALSE(mixed.has_canonical());
}

TEST(TiledOnlyView, RefusesTensorsWithNoCopyAtAll) {
  const TiledOnly t;
  MoeWeightsView no_down = t.view();
  no_down.down_tiled = no_down.down_tiled_scales = nullptr;
  EXPECT_NE(error_of(no_down).find("down tensor is missing"), std::string::npos) << error_of(no_down);
  MoeWeightsView no_gate_up = t.view();
  no_gate_up.gate_up_tiled = no_gate_up.gate_up_tiled_scales = nullptr;
  EXPECT_NE(error_of(no_gate_up).find("gate_up tensor is missing"), std::string::npos);
  // Scales without their weights are a broken view, not a tiled-only one.
  MoeWeightsView stray = t.view();
  stray.down_scales = t.w.down_scales.data();
  EXPECT_NE(error_of(stray).find("down scales are set without their weights"), std::string::npos);
}

TEST(TiledOnlyView, OnlyOnTheDeviceAndBesideATiledCopy) {
  const TiledOnly t;
  MoeWeightsView host = t.view();
  host.space = MemorySpace::kHost;  // host readers (the references) need the canonical tensors
  EXPECT_NE(error_of(host).find("gate_up tensor is missing"), std::string::npos);
  const MoeWeights bw = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{});
  MoeWeightsView bf = bw.view();
  bf.space = MemorySpace::kDevice;
  bf.gate_up = nullptr;
  EXPECT_NE(error_of(bf).find("gate_up tensor is missing"), std::string::npos);
  // BF16 tiled-only: both tiled copies, no scales.
  std::vector<uint16_t> gt = bw.gate_up_bf16, dt = bw.down_bf16;
  bf.down = nullptr;
  bf.gate_up_tiled = reinterpret_cast<const uint8_t*>(gt.data());
  bf.down_tiled = reinterpret_cast<const uint8_t*>(dt.data());
  EXPECT_EQ(error_of(bf), "");
  EXPECT_FALSE(bf.has_canonical());
}

TEST(TiledOnlyView, CanonicalReadersRefuseItByName) {
  const TiledOnly t;
  try {
    t.view().require_canonical("the classical MoE path");
    FAIL() << "require_canonical accepted a tiled-only view";
  } catch (const InvalidArgument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the classical MoE path"), std::string::npos) << m;
    EXPECT_NE(m.find("canonical_mxfp8"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(t.w.view().require_canonical("the classical MoE path"));
}

}  // namespace
}  // namespace wd
