// The device build of the number formats agrees bit for bit with the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/formats_device.cuh"
#include "kernels/synthetic.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/packed_e4m3.h"
#include "warpdecode/warp_decode.h"
#include "warpdecode/weights.h"

namespace wd {
namespace {

TEST(GpuDevice, Query) {
  WD_REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_GT(prop.multiProcessorCount, 0);
  EXPECT_GT(prop.totalGlobalMem, size_t(1) << 30);
  std::printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
}

// A CUDA error that WD_CUDA_CHECK threw is not reported again by the next,
// unrelated launch check (session 15: a failed router launch made the next
// test fail in formats_device.cu).
TEST(GpuDevice, AThrownCudaErrorIsNotReportedAgain) {
  WD_REQUIRE_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  EXPECT_THROW(WD_CUDA_CHECK(cudaSetDevice(devices + 7)), CudaError);  // invalid device: not sticky
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  DeviceBuffer<uint16_t> x(4096);
  SyntheticSpec spec;
  spec.seed = 1;
  EXPECT_NO_THROW(kernels::synthetic_bf16(x.data(), x.size(), spec, SyntheticTensor::kInput, nullptr));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(GpuFormats, E4M3DecodeAllCodes) {
  WD_REQUIRE_GPU();
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = uint8_t(i);
  DeviceBuffer<uint8_t> in(codes);
  DeviceBuffer<float> out(256);
  out.fill_bytes(0x55);
  kernels::e4m3_decode(in.data(), out.data(), 256, nullptr);
  const auto got = out.download();
  for (int i = 0; i < 256; ++i) {
    const float want = e4m3_to_float(uint8_t(i));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[i])) << i;
    else EXPECT_EQ(float_bits(got[i]), float_bits(want)) << i;
  }
}

// The tensor-core kernels' E4M3 × E8M0 -> BF16 decodes are exact: every
// code (NaN aside) at every scale code where the product is a BF16 normal
// (10 to 246; the narrow paths up to their limits, 142 or 134), sign and
// E4M3 subnormals included, bit for bit against the host's FP32 product
// rounded to BF16 (exact: four significant bits).
TEST(GpuFormats, Mxfp8Bf16DecodesAreExact) {
  WD_REQUIRE_GPU();
  struct Path {
    kernels::Mx8Bf16Decode path;
    int max_code;
    const char* name;
    bool packed;  // the codes go in as packed words (warpdecode/packed_e4m3.h)
  };
  const Path paths[] = {
      {kernels::Mx8Bf16Decode::kConvertNarrow, 142, "convert, narrow", false},
      {kernels::Mx8Bf16Decode::kConvertWide, 246, "convert, wide", false},
      {kernels::Mx8Bf16Decode::kIntegerNarrow, 134, "integer, narrow", false},
      {kernels::Mx8Bf16Decode::kIntegerWide, 246, "integer, wide", false},
      {kernels::Mx8Bf16Decode::kSixteenNarrow, kMxNarrowMaxCode, "e4m3x16_to_bf16x8, narrow", false},
      {kernels::Mx8Bf16Decode::kSixteenWide, 246, "e4m3x16_to_bf16x8, wide", false},
      {kernels::Mx8Bf16Decode::kSixteenNarrowPacked, kMxNarrowMaxCode, "e4m3x16_to_bf16x8, narrow, packed", true},
      {kernels::Mx8Bf16Decode::kSixteenWidePacked, 246, "e4m3x16_to_bf16x8, wide, packed", true}};
  for (const Path& p : paths) {
    // Per scale code, every E4M3 code at each of the four places of a word.
    std::vector<uint8_t> codes, scales;
    for (int c = 10; c <= p.max_code; ++c)
      for (int i = 0; i < 1024; ++i) {
        codes.push_back(uint8_t(i + i / 256));
        if (i % 16 == 0) scales.push_back(uint8_t(c));
      }
    std::vector<uint8_t> stored = codes;
    if (p.packed) pack_e4m3_words(codes.data(), codes.size(), stored.data());
    EXPECT_EQ(p.packed, stored != codes) << p.name;
    DeviceBuffer<uint8_t> dc(stored), ds(scales);
    DeviceBuffer<uint16_t> out(codes.size());
    out.fill_bytes(0x7F);
    kernels::mx8_bf16_decode(dc.data(), ds.data(), codes.size(), p.path, out.data(), nullptr);
    const auto got = out.download();
    size_t bad = 0, checked = 0;
    for (size_t i = 0; i < codes.size(); ++i) {
      if ((codes[i] & 0x7F) == 0x7F) continue;  // NaN
      const float want = e4m3_to_float(codes[i]) * e8m0_to_float(scales[i / 16]);
      ++checked;
      if (got[i] != float_to_bf16(want) && ++bad <= 5)
        ADD_FAILURE() << p.name << ": code 0x" << std::hex << int(codes[i]) << " scale 0x" << int(scales[i / 16])
                      << " gave 0x" << got[i] << ", want 0x" << float_to_bf16(want) << std::dec;
    }
    EXPECT_EQ(bad, 0u) << p.name << ", of " << checked;
    EXPECT_GT(checked, 400u * 254u) << p.name;
  }
}

TEST(GpuFormats, EncodeMatchesHostOnRandomAndSpecialValues) {
  WD_REQUIRE_GPU();
  std::mt19937 g(std::random_device{}());
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = g();
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);                                     // any bit pattern
    v.push_back(std::ldexp(float(g() % 100000) / 1e5f, int(g() % 40) - 20));  // E4M3 range
  }
  for (float f : {0.0f, -0.0f, 448.0f, 464.0f, 1e-9f, INFINITY, -INFINITY, NAN}) v.push_back(f);
  DeviceBuffer<float> in(v);
  DeviceBuffer<uint8_t> q(v.size());
  DeviceBuffer<uint16_t> b(v.size());
  kernels::e4m3_encode(in.data(), q.data(), v.size(), nullptr);
  kernels::bf16_encode(in.data(), b.data(), v.size(), nullptr);
  const auto qh = q.download();
  const auto bh = b.download();
  size_t bad_q = 0, bad_b = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    bad_q += qh[i] != float_to_e4m3(v[i]);
    const uint16_t hb = float_to_bf16(v[i]);
    bad_b += !(bh[i] == hb || (std::isnan(v[i]) && std::isnan(bf16_to_float(bh[i]))));
  }
  EXPECT_EQ(bad_q, 0u);
  EXPECT_EQ(bad_b, 0u);
}

TEST(GpuFormats, Mxfp8QuantizeAndSyntheticWeightsMatchHost) {
  WD_REQUIRE_GPU();
  const MoeShape s = preset_shape("tiny");
  SyntheticSpec spec;
  spec.seed = std::random_device{}();
  spec.outlier_fraction = 0.01f;
  const auto host = MoeWeights::synthetic(s, spec);
  const size_t n = host.gate_up_bf16.size();
  DeviceBuffer<uint16_t> dev(n);
  kernels::synthetic_bf16(dev.data(), n, spec, SyntheticTensor::kGateUp, nullptr);
  EXPECT_EQ(dev.download(), host.gate_up_bf16);
  const auto hq = host.to_mxfp8();
  DeviceBuffer<uint8_t> q(n), sc(n / 32);
  kernels::mxfp8_quantize(dev.data(), size_t(s.experts) * 2 * s.intermediate, s.hidden, q.data(),
                          sc.data(), MxScaleRule::kNoSaturate, nullptr);
  EXPECT_EQ(q.download(), hq.gate_up_q);
  EXPECT_EQ(sc.download(), hq.gate_up_scales);
}

// The device tiling of MXFP8 down weights (what DeviceMoeWeights keeps for
// moe_down_tc) equals the host's, on random bytes, and the device weights'
// view carries it.
TEST(GpuFormats, Mxfp8DownTilingMatchesHost) {
  WD_REQUIRE_GPU();
  MoeShape s = preset_shape("tiny");
  s.hidden = 96;  // 6 row tiles
  s.intermediate = 192;
  std::mt19937 rng(std::random_device{}());
  const size_t n = size_t(s.experts) * s.hidden * s.intermediate;
  std::vector<uint8_t> q(n), sc(n / 32), qt(n), st(n / 32);
  for (auto& b : q) b = uint8_t(rng());
  for (auto& b : sc) b = uint8_t(rng());
  tile_mxfp8_down(s, q.data(), sc.data(), qt.data(), st.data());
  DeviceBuffer<uint8_t> dq(q), dsc(sc), dqt(n), dst(n / 32);
  dqt.fill_bytes(0xA5);
  dst.fill_bytes(0xA5);
  kernels::tile_mxfp8_down(s, dq.data(), dsc.data(), dqt.data(), dst.data(), nullptr);
  EXPECT_EQ(dqt.download(), qt);
  EXPECT_EQ(dst.download(), st);

  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).to_mxfp8();
  const auto d = DeviceMoeWeights::upload(w);
  const MoeWeightsView v = d.view();
  ASSERT_NE(v.down_tiled, nullptr);
  ASSERT_NE(v.down_tiled_scales, nullptr);
  std::vector<uint8_t> wt(w.down_q.size()), wst(w.down_scales.size());
  tile_mxfp8_down(w.shape(), w.down_q.data(), w.down_scales.data(), wt.data(), wst.data());
  std::vector<uint8_t> got(wt.size()), got_s(wst.size());
  WD_CUDA_CHECK(cudaMemcpy(got.data(), v.down_tiled, got.size(), cudaMemcpyDeviceToHost));
  WD_CUDA_CHECK(cudaMemcpy(got_s.data(), v.down_tiled_scales, got_s.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, wt);
  EXPECT_EQ(got_s, wst);
  EXPECT_EQ(DeviceMoeWeights::upload(MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{})).view().down_tiled,
            nullptr);  // BF16: none
  DeviceWeightsOptions no_tiles;
  no_tiles.tiled_mxfp8_down = false;
  const auto plain = DeviceMoeWeights::upload(w, no_tiles);
  EXPECT_EQ(plain.view().down_tiled, nullptr);
  EXPECT_EQ(plain.bytes() + w.down_q.size() + w.down_scales.size(), d.bytes());
}

// The same for the tiled gate_up copy, which DeviceMoeWeights keeps only when
// asked (DeviceWeightsOptions::tiled_mxfp8_gate_up).
TEST(GpuFormats, Mxfp8GateUpTilingMatchesHost) {
  WD_REQUIRE_GPU();
  MoeShape s = preset_shape("tiny");
  s.hidden = 192;  // 3 chunks of 64
  s.intermediate = 48;  // 3 neuron tiles
  std::mt19937 rng(std::random_device{}());
  const size_t n = size_t(s.experts) * 2 * s.intermediate * s.hidden;
  std::vector<uint8_t> q(n), sc(n / 32), qt(n), st(n / 32);
  for (auto& b : q) b = uint8_t(rng());
  for (auto& b : sc) b = uint8_t(rng());
  tile_mxfp8_gate_up(s, q.data(), sc.data(), qt.data(), st.data());
  DeviceBuffer<uint8_t> dq(q), dsc(sc), dqt(n), dst(n / 32);
  dqt.fill_bytes(0xA5);
  dst.fill_bytes(0xA5);
  kernels::tile_mxfp8_gate_up(s, dq.data(), dsc.data(), dqt.data(), dst.data(), nullptr);
  EXPECT_EQ(dqt.download(), qt);
  EXPECT_EQ(dst.download(), st);

  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{}).to_mxfp8();
  EXPECT_EQ(DeviceMoeWeights::upload(w).view().gate_up_tiled, nullptr);  // off by default
  DeviceWeightsOptions o;
  o.tiled_mxfp8_gate_up = true;
  const auto d = DeviceMoeWeights::upload(w, o);
  const MoeWeightsView v = d.view();
  ASSERT_NE(v.gate_up_tiled, nullptr);
  ASSERT_NE(v.gate_up_tiled_scales, nullptr);
  std::vector<uint8_t> wt(w.gate_up_q.size()), wst(w.gate_up_scales.size());
  tile_mxfp8_gate_up(w.shape(), w.gate_up_q.data(), w.gate_up_scales.data(), wt.data(), wst.data());
  std::vector<uint8_t> got(wt.size()), got_s(wst.size());
  WD_CUDA_CHECK(cudaMemcpy(got.data(), v.gate_up_tiled, got.size(), cudaMemcpyDeviceToHost));
  WD_CUDA_CHECK(cudaMemcpy(got_s.data(), v.gate_up_tiled_scales, got_s.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, wt);
  EXPECT_EQ(got_s, wst);
  EXPECT_EQ(DeviceMoeWeights::upload(w).bytes() + w.gate_up_q.size() + w.gate_up_scales.size(), d.bytes());
}

// BF16 tiled-only weights: the device tiling of both projections equals the
// host's, and an upload holds exactly those bytes.
TEST(GpuFormats, Bf16TilingMatchesHost) {
  WD_REQUIRE_GPU();
  MoeShape s = preset_shape("tiny");
  s.hidden = 192;        // 3 gate_up chunks of 32 BF16 (6 byte-chunks)
  s.intermediate = 192;  // 3 down units of 64
  std::mt19937 rng(std::random_device{}());
  const size_t E = s.experts, H = s.hidden, I = s.intermediate;
  std::vector<uint16_t> gu(E * 2 * I * H), dn(E * H * I), gut(gu.size()), dnt(dn.size());
  for (auto& v : gu) v = uint16_t(rng());
  for (auto& v : dn) v = uint16_t(rng());
  tile_bf16_gate_up(s, gu.data(), gut.data());
  tile_bf16_down(s, dn.data(), dnt.data());
  DeviceBuffer<uint16_t> dgu(gu), ddn(dn), dgut(gu.size()), ddnt(dn.size());
  dgut.fill_bytes(0xA5);
  ddnt.fill_bytes(0xA5);
  kernels::tile_bf16_gate_up(s, dgu.data(), dgut.data(), nullptr);
  kernels::tile_bf16_down(s, ddn.data(), ddnt.data(), nullptr);
  EXPECT_EQ(dgut.download(), gut);
  EXPECT_EQ(ddnt.download(), dnt);

  const auto w = MoeWeights::synthetic(preset_shape("tiny"), SyntheticSpec{});
  const auto d = DeviceMoeWeights::upload(w, DeviceWeightsOptions::tiled_only());
  const MoeWeightsView v = d.view();
  ASSERT_NE(v.gate_up_tiled, nullptr);
  ASSERT_NE(v.down_tiled, nullptr);
  EXPECT_EQ(v.gate_up, nullptr);
  EXPECT_EQ(v.down, nullptr);
  std::vector<uint16_t> wgt(w.gate_up_bf16.size()), wdt(w.down_bf16.size());
  tile_bf16_gate_up(w.shape(), w.gate_up_bf16.data(), wgt.data());
  tile_bf16_down(w.shape(), w.down_bf16.data(), wdt.data());
  std::vector<uint16_t> got_g(wgt.size()), got_d(wdt.size());
  WD_CUDA_CHECK(cudaMemcpy(got_g.data(), v.gate_up_tiled, got_g.size() * 2, cudaMemcpyDeviceToHost));
  WD_CUDA_CHECK(cudaMemcpy(got_d.data(), v.down_tiled, got_d.size() * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_g, wgt);
  EXPECT_EQ(got_d, wdt);
  EXPECT_EQ(d.bytes(), DeviceMoeWeights::upload(w).bytes());  // the canonical memory
}

}  // namespace
}  // namespace wd
