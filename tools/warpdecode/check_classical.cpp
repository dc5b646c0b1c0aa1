// warpdecode check's rows for the classical expert-centric path and for
// MoeDispatch (CUDA builds): what bench-moe times beside warp decode, and
// what the dispatch runs above its crossover, checked on the user's machine.
//
// Tolerances (relative L2 error; tests/classical/test_classical.cpp derives
// them, docs/CLASSICAL.md "Formats and accuracy"):
//   BF16 weights, MXFP8 W8A16   exact FP64 layer 1e-2; the CPU emulation of
//                               the path's roundings 2e-3
//   W8A8 (MXFP8, FP8 block-128) exact 2^-4 and at least 5e-3 (the
//                               activations must have been quantized); the
//                               emulation 2^-5
//   MoeDispatch                 the bits of the path it takes (called on
//                               its own), and that path's tolerances; also
//                               on a tiled-only upload, which the classical
//                               path reads as it is (BF16 on sm_90a) or from
//                               the dispatch's un-tiling scratch (the
//                               canonical upload's bits either way)
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device_buffer.h"
#include "tools/warpdecode/check_rows.h"
#include "warpdecode/classical.h"
#include "warpdecode/classical_reference.h"
#include "warpdecode/error.h"
#include "warpdecode/moe_dispatch.h"
#include "warpdecode/warp_decode.h"

namespace wd::cli {
namespace {

constexpr double kW8A8Exact = 0x1p-4, kW8A8Floor = 5e-3, kW8A8Emulation = 0x1p-5;
constexpr double kBf16Exact = 1e-2, kBf16Emulation = 2e-3, kWarpExact = 2e-5;

std::string sci(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3e", v);
  return b;
}

// One run of the classical path against the exact layer and its emulation.
CheckRow judge_classical(const std::string& fmt, const std::string& path, const std::vector<double>& exact,
                         const std::vector<double>& emulation, const std::vector<double>& y, bool w8a8) {
  CheckRow r = judge(fmt, path, exact, y, w8a8 ? kW8A8Exact : kBf16Exact);
  const double e_emu = reference::compare(emulation.data(), y.data(), y.size()).rel_l2;
  const double emu_tol = w8a8 ? kW8A8Emulation : kBf16Emulation;
  add_note(r, "vs its emulation " + sci(e_emu) + " (tol " + sci(emu_tol) + ")");
  if (!(e_emu <= emu_tol)) r.pass = false;  // NaN fails too
  if (w8a8 && !(r.rel_l2 >= kW8A8Floor)) {
    r.pass = false;
    add_note(r, "below " + sci(kW8A8Floor) + ": were the activations quantized?");
  }
  return r;
}

CheckRow not_run(const std::string& fmt, const std::string& path, const std::string& why) {
  return CheckRow{fmt, path, NAN, NAN, NAN, false, "not run: " + why, true};
}

}  // namespace

std::vector<double> poisoned_fp32_output(size_t n, const std::function<void(const MoeOutput&)>& call) {
  DeviceBuffer<float> dy(n);
  dy.fill_bytes(0xFF);
  call(MoeOutput{dy.data(), OutputType::kFP32, nullptr});
  WD_CUDA_CHECK(cudaDeviceSynchronize());
  const auto h = dy.download();
  return std::vector<double>(h.begin(), h.end());
}

std::vector<CheckRow> check_classical(const MoeWeights& w, const std::vector<uint16_t>& x, int batch,
                                      const reference::Routing& routing, const std::vector<double>& ref) {
  std::vector<CheckRow> rows;
  const WeightFormat f = w.format();
  const std::string fmt = to_string(f);
  const MoeShape& s = w.shape();
  const size_t BH = size_t(batch) * s.hidden;
  const bool sm90a = ClassicalMoe::wgmma_available();

  std::unique_ptr<DeviceMoeWeights> dw;
  std::unique_ptr<DeviceFp8BlockWeights> d8;
  if (f == WeightFormat::kFP8Block128) d8 = std::make_unique<DeviceFp8BlockWeights>(DeviceFp8BlockWeights::upload(w));
  else dw = std::make_unique<DeviceMoeWeights>(DeviceMoeWeights::upload(w));
  const MoeWeightsView view = d8 ? d8->view() : dw->view();
  DeviceBuffer<uint16_t> dx(x);
  DeviceBuffer<int32_t> ids(routing.ids);
  DeviceBuffer<float> weights(std::vector<float>(routing.weights.begin(), routing.weights.end()));
  const RoutingView rv{batch, s.top_k, ids.data(), weights.data()};
  auto fp32_out = [&](const std::function<void(const MoeOutput&)>& call) { return poisoned_fp32_output(BH, call); };
  // The CPU emulation of a configuration's roundings, once per (SiLU·up
  // fused, BF16 activations): the dispatch's row reuses its path's (the
  // emulation dominates check's time at large batches).
  std::map<std::pair<bool, bool>, std::vector<double>> emulations;
  auto emulation = [&](const ClassicalConfig& c) -> const std::vector<double>& {
    auto& e = emulations[{c.fuse_silu, c.bf16_activations}];
    if (e.empty())
      e = reference::classical_experts(w.view(), x.data(), routing.ids.data(), routing.weights.data(), batch, 0,
                                       c.fuse_silu, c.bf16_activations);
    return e;
  };
  auto quantizes = [&](const ClassicalConfig& c) { return f != WeightFormat::kBF16 && !c.bf16_activations; };
  auto activations = [&](const ClassicalConfig& c) {
    return f == WeightFormat::kBF16 ? "" : c.bf16_activations ? " (W8A16)" : " (W8A8)";
  };

  // The classical path: the default configuration at this batch and, for
  // MXFP8 where this device runs it, W8A16.
  std::vector<ClassicalConfig> configs{ClassicalConfig::for_batch(s, batch, f, sm90a)};
  if (f == WeightFormat::kMXFP8) {
    const ClassicalConfig a16 = ClassicalConfig::for_batch(s, batch, f, sm90a, true);
    if (a16.bf16_activations) configs.push_back(a16);
    else rows.push_back(not_run(fmt, "gpu classical (W8A16)", "needs the sm_90a kernels and a shape the TMA tile takes"));
  }
  std::unique_ptr<ClassicalMoe> classical;
  try {
    classical = std::make_unique<ClassicalMoe>(s, batch);
  } catch (const InvalidArgument& e) {
    rows.push_back(not_run(fmt, "gpu classical", e.what()));
    return rows;
  }
  for (const ClassicalConfig& c : configs) {
    const std::string path = "gpu classical " + c.label() + activations(c);
    if (!c.supports(s, f)) {
      rows.push_back(not_run(fmt, path, "the classical path does not take this shape in this format"));
      continue;
    }
    const auto y = fp32_out([&](const MoeOutput& o) { classical->experts(view, dx.data(), rv, o, c, nullptr); });
    rows.push_back(judge_classical(fmt, path, ref, emulation(c), y, quantizes(c)));
  }

  // A dispatch's row: its output on weights wv must be the bits of the path
  // it takes, called on its own (warp decode on wv, the classical path on
  // the canonical upload), within that path's tolerances. False where the
  // path does not take this shape (its classical row above says so).
  auto dispatch_row = [&](const MoeDispatch& d, const MoeWeightsView& wv, const std::string& path,
                          const std::string& whose_warp, const std::string& whose_classical) {
    std::vector<double> y;
    try {
      y = fp32_out([&](const MoeOutput& o) { d.experts(wv, dx.data(), rv, o, nullptr); });
    } catch (const InvalidArgument& e) {
      rows.push_back(not_run(fmt, path, e.what()));
      return false;
    }
    const bool warp = d.choose(f, batch, weight_copies(wv)) == MoePath::kWarp;
    const ClassicalConfig c =
        warp ? ClassicalConfig{}
             : dispatch_classical_config(d.table(), s, f, batch, d.policy(), sm90a, weight_copies(wv));
    const auto own = fp32_out([&](const MoeOutput& o) {
      if (warp) d.warp().experts(wv, dx.data(), rv, o, nullptr);
      else d.classical().experts(view, dx.data(), rv, o, c, nullptr);
    });
    CheckRow r = warp ? judge(fmt, path + ": warp", ref, y, kWarpExact)
                      : judge_classical(fmt, path + ": classical " + c.label() + activations(c), ref, emulation(c), y,
                                        quantizes(c));
    r.pass = r.pass && y == own;
    add_note(r, std::string(y == own ? "bits equal " : "BITS DIFFER from ") + (warp ? whose_warp : whose_classical));
    rows.push_back(r);
    return true;
  };

  // MoeDispatch at this batch (the crossover table it loads by default, the
  // default policy): the path it takes, bit for bit.
  const MoeDispatch dispatch(s, batch);
  if (!dispatch_row(dispatch, view, "gpu MoeDispatch", "warp decode's", "the classical path's")) return rows;

  // The same weights uploaded tiled-only, through a dispatch that holds an
  // un-tiling scratch (MoeDispatch::untile_tiled_only) for the classical
  // path, which it leaves unused where that path reads them as they are.
  if (!dw) return rows;  // FP8 block-128 has no tiled copies
  const std::string upath = classical_reads_tiled_only(s, f, ClassicalMoe::wgmma_available())
                                ? "gpu MoeDispatch, tiled-only read as it is"
                                : "gpu MoeDispatch, tiled-only un-tiled";
  std::unique_ptr<DeviceMoeWeights> only;
  MoeDispatch udispatch(s, batch);
  try {
    only = std::make_unique<DeviceMoeWeights>(DeviceMoeWeights::upload(w, DeviceWeightsOptions::tiled_only()));
    udispatch.untile_tiled_only(f);
  } catch (const InvalidArgument& e) {  // a shape the tilings do not take
    rows.push_back(not_run(fmt, upath, e.what()));
    return rows;
  }
  dispatch_row(udispatch, only->view(), upath, "warp decode's on them", "the classical path's on the canonical upload");
  return rows;
}

}  // namespace wd::cli
