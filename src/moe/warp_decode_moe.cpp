#include "warpdecode/warp_decode.h"

#include <algorithm>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/routing_check.h"
#include "kernels/classical_fits.h"
#include "kernels/formats_device.cuh"
#include "kernels/moe_down.cuh"
#include "kernels/moe_gate_up.cuh"
#include "kernels/moe_tc.cuh"
#include "kernels/router.cuh"
#include "kernels/synthetic.cuh"
#include "kernels/tc_shape.h"

namespace wd {

// ---- DeviceMoeWeights ----------------------------------------------------------
struct DeviceMoeWeights::Impl {
  MoeShape shape;
  WeightFormat format = WeightFormat::kBF16;
  DeviceBuffer<uint16_t> router;
  DeviceBuffer<uint8_t> gate_up;  // raw bytes: BF16 or E4M3
  DeviceBuffer<uint8_t> down;
  DeviceBuffer<uint8_t> gate_up_scales, down_scales;
  DeviceBuffer<uint8_t> down_tiled, down_tiled_scales;  // MXFP8: warpdecode/down_tiling.h
  DeviceBuffer<uint8_t> gate_up_tiled, gate_up_tiled_scales;  // MXFP8: warpdecode/gate_up_tiling.h
  bool scales_narrow = false;  // MXFP8: every scale code <= kMxNarrowMaxCode (MoeWeightsView::mx_scales_narrow)

  // MXFP8: the tiled copy of the down weights that moe_down_tc streams
  // (where the shape takes it).
  void tile_down(cudaStream_t stream) {
    if (format != WeightFormat::kMXFP8 || !down_tiling_fits(shape)) return;
    down_tiled = DeviceBuffer<uint8_t>(down.bytes());
    down_tiled_scales = DeviceBuffer<uint8_t>(down_scales.bytes());
    kernels::tile_mxfp8_down(shape, down.data(), down_scales.data(), down_tiled.data(), down_tiled_scales.data(),
                             stream);
  }
  // MXFP8: the tiled copy of the gate_up weights (where the shape takes it).
  void tile_gate_up(cudaStream_t stream) {
    if (format != WeightFormat::kMXFP8 || !gate_up_tiling_fits(shape)) return;
    gate_up_tiled = DeviceBuffer<uint8_t>(gate_up.bytes());
    gate_up_tiled_scales = DeviceBuffer<uint8_t>(gate_up_scales.bytes());
    kernels::tile_mxfp8_gate_up(shape, gate_up.data(), gate_up_scales.data(), gate_up_tiled.data(),
                                gate_up_tiled_scales.data(), stream);
  }
  // BF16: both tiled copies (tiled_bf16, or tiled-only weights), where the
  // shape takes both layouts, as the MXFP8 copies (check_options refuses
  // tiled-only weights on any other shape).
  void tile_bf16(cudaStream_t stream) {
    if (!down_tiling_fits(shape) || !gate_up_tiling_fits(shape)) return;
    down_tiled = DeviceBuffer<uint8_t>(down.bytes());
    gate_up_tiled = DeviceBuffer<uint8_t>(gate_up.bytes());
    kernels::tile_bf16_down(shape, reinterpret_cast<const uint16_t*>(down.data()),
                            reinterpret_cast<uint16_t*>(down_tiled.data()), stream);
    kernels::tile_bf16_gate_up(shape, reinterpret_cast<const uint16_t*>(gate_up.data()),
                               reinterpret_cast<uint16_t*>(gate_up_tiled.data()), stream);
  }
  // Whether the scales are narrow, then the tiled copies the options ask
  // for; tiled-only (canonical_mxfp8 off, tiled_only_bf16 on) then frees the
  // canonical tensors. Synchronises `stream`.
  void tile(const DeviceWeightsOptions& options, cudaStream_t stream) {
    const bool bf16 = format == WeightFormat::kBF16;
    if (!bf16)  // measured on the canonical scales, before they may go
      scales_narrow = kernels::max_byte(gate_up_scales.data(), gate_up_scales.bytes(), stream) <= kMxNarrowMaxCode &&
                      kernels::max_byte(down_scales.data(), down_scales.bytes(), stream) <= kMxNarrowMaxCode;
    if (bf16 && (options.tiled_bf16 || options.tiled_only_bf16)) tile_bf16(stream);
    if (!bf16 && options.tiled_mxfp8_down) tile_down(stream);
    if (!bf16 && options.tiled_mxfp8_gate_up) tile_gate_up(stream);
    WD_CUDA_CHECK(cudaStreamSynchronize(stream));  // the copies are made before a source can go
    if (bf16 ? !options.tiled_only_bf16 : options.canonical_mxfp8) return;
    gate_up = {};
    gate_up_scales = {};
    down = {};
    down_scales = {};
  }
};

namespace {
// What DeviceWeightsOptions asks must be possible before anything is
// allocated: tiled-only needs both copies, hence a shape both tilings take,
// and a shape warp decode's tensor-core kernels take (the scalar kernels
// read only the canonical tensors, the classical path tiled-only weights
// only on some shapes and devices: without the tensor cores, weights
// uploaded tiled-only could be unreadable).
void check_options(const MoeShape& shape, WeightFormat format, const DeviceWeightsOptions& o) {
  WD_CHECK(format == WeightFormat::kBF16 || format == WeightFormat::kMXFP8,
           "DeviceMoeWeights holds BF16 or MXFP8 weights, not ", to_string(format));
  const bool bf16 = format == WeightFormat::kBF16;
  if (bf16 ? !o.tiled_only_bf16 : o.canonical_mxfp8) return;  // MXFP8 otherwise (checked above)
  const char* option = bf16 ? "tiled_only_bf16 = true" : "canonical_mxfp8 = false";
  WD_CHECK(bf16 || (o.tiled_mxfp8_down && o.tiled_mxfp8_gate_up), "DeviceWeightsOptions: ", option,
           " needs both tiled copies (tiled_mxfp8_down and tiled_mxfp8_gate_up), or the weights could not be read");
  WD_CHECK(down_tiling_fits(shape) && gate_up_tiling_fits(shape), "DeviceWeightsOptions: ", option,
           " needs a shape both tiled layouts take (H % 64 == 0, I % 64 == 0; H = ", shape.hidden, ", I = ",
           shape.intermediate, ")");
  WD_CHECK(WarpDecodeConfig::tensor_cores_fit(shape), "DeviceWeightsOptions: ", option,
           " needs a shape warp decode's tensor-core kernels take (H % ", kernels::kTcHiddenMultiple, " == 0, I % ",
           kernels::kTcIntermediateMultiple, " == 0; H = ", shape.hidden, ", I = ", shape.intermediate,
           "): no other kernel reads these weights on every device");
}
}  // namespace

DeviceMoeWeights::DeviceMoeWeights() : impl_(std::make_unique<Impl>()) {}
DeviceMoeWeights::DeviceMoeWeights(DeviceMoeWeights&&) noexcept = default;
DeviceMoeWeights& DeviceMoeWeights::operator=(DeviceMoeWeights&&) noexcept = default;
DeviceMoeWeights::~DeviceMoeWeights() = default;

DeviceMoeWeights DeviceMoeWeights::upload(const MoeWeights& host, const DeviceWeightsOptions& options) {
  host.validate();  // the view below has pointers only: its tensors' sizes are checked here
  return upload(host.view(), options);
}

DeviceMoeWeights DeviceMoeWeights::upload(const MoeWeightsView& host, const DeviceWeightsOptions& options) {
  host.validate();
  WD_CHECK(host.space == MemorySpace::kHost, "DeviceMoeWeights::upload needs a host view");
  check_options(host.shape, host.format, options);
  DeviceMoeWeights d;
  Impl& m = *d.impl_;
  m.shape = host.shape;
  m.format = host.format;
  const size_t E = m.shape.experts, H = m.shape.hidden, I = m.shape.intermediate;
  const size_t elem = m.format == WeightFormat::kBF16 ? 2 : 1;
  auto copy = [](const void* src, size_t bytes) {
    DeviceBuffer<uint8_t> b(bytes);
    if (bytes) WD_CUDA_CHECK(cudaMemcpy(b.data(), src, bytes, cudaMemcpyHostToDevice));
    return b;
  };
  m.router = DeviceBuffer<uint16_t>(E * H);
  WD_CUDA_CHECK(cudaMemcpy(m.router.data(), host.router, E * H * 2, cudaMemcpyHostToDevice));
  m.gate_up = copy(host.gate_up, E * 2 * I * H * elem);
  m.down = copy(host.down, E * H * I * elem);
  if (m.format == WeightFormat::kMXFP8) {
    m.gate_up_scales = copy(host.gate_up_scales, E * 2 * I * H / kMxBlock);
    m.down_scales = copy(host.down_scales, E * H * I / kMxBlock);
  }
  m.tile(options, nullptr);
  return d;
}

DeviceMoeWeights DeviceMoeWeights::synthetic(const MoeShape& shape, const SyntheticSpec& spec,
                                             WeightFormat format, MxScaleRule rule,
                                             cudaStream_t stream, const DeviceWeightsOptions& options) {
  shape.validate();
  check_options(shape, format, options);
  DeviceMoeWeights d;
  Impl& m = *d.impl_;
  m.shape = shape;
  m.format = format;
  const size_t E = shape.experts, H = shape.hidden, I = shape.intermediate;
  const size_t gu = E * 2 * I * H, dn = E * H * I;
  m.router = DeviceBuffer<uint16_t>(E * H);
  kernels::synthetic_bf16(m.router.data(), E * H, spec, SyntheticTensor::kRouter, stream);
  if (format == WeightFormat::kBF16) {
    m.gate_up = DeviceBuffer<uint8_t>(gu * 2);
    m.down = DeviceBuffer<uint8_t>(dn * 2);
    kernels::synthetic_bf16(reinterpret_cast<uint16_t*>(m.gate_up.data()), gu, spec,
                            SyntheticTensor::kGateUp, stream);
    kernels::synthetic_bf16(reinterpret_cast<uint16_t*>(m.down.data()), dn, spec,
                            SyntheticTensor::kDown, stream);
    m.tile(options, stream);
  } else {
    // Generate BF16 one tensor at a time into a temporary, then quantize.
    DeviceBuffer<uint16_t> tmp(gu > dn ? gu : dn);
    m.gate_up = DeviceBuffer<uint8_t>(gu);
    m.gate_up_scales = DeviceBuffer<uint8_t>(gu / kMxBlock);
    kernels::synthetic_bf16(tmp.data(), gu, spec, SyntheticTensor::kGateUp, stream);
    kernels::mxfp8_quantize(tmp.data(), E * 2 * I, H, m.gate_up.data(), m.gate_up_scales.data(),
                            rule, stream);
    m.down = DeviceBuffer<uint8_t>(dn);
    m.down_scales = DeviceBuffer<uint8_t>(dn / kMxBlock);
    kernels::synthetic_bf16(tmp.data(), dn, spec, SyntheticTensor::kDown, stream);
    kernels::mxfp8_quantize(tmp.data(), E * H, I, m.down.data(), m.down_scales.data(), rule,
                            stream);
    m.tile(options, stream);  // synchronises: tmp is freed on return
  }
  return d;
}

MoeWeightsView DeviceMoeWeights::view() const {
  const Impl& m = *impl_;
  MoeWeightsView v;
  v.shape = m.shape;
  v.format = m.format;
  v.space = MemorySpace::kDevice;
  v.router = m.router.data();
  // Null where tiled-only weights freed the canonical tensors.
  v.gate_up = m.gate_up.bytes() != 0 ? m.gate_up.data() : nullptr;
  v.down = m.down.bytes() != 0 ? m.down.data() : nullptr;
  const bool mx = m.format == WeightFormat::kMXFP8;
  v.mx_scales_narrow = mx && m.scales_narrow;
  if (mx) {
    v.gate_up_scales = m.gate_up_scales.bytes() != 0 ? m.gate_up_scales.data() : nullptr;
    v.down_scales = m.down_scales.bytes() != 0 ? m.down_scales.data() : nullptr;
  }
  if (m.down_tiled.bytes() != 0) {
    v.down_tiled = m.down_tiled.data();
    v.down_tiled_scales = mx ? m.down_tiled_scales.data() : nullptr;
  }
  if (m.gate_up_tiled.bytes() != 0) {
    v.gate_up_tiled = m.gate_up_tiled.data();
    v.gate_up_tiled_scales = mx ? m.gate_up_tiled_scales.data() : nullptr;
  }
  return v;
}

size_t DeviceMoeWeights::bytes() const {
  const Impl& m = *impl_;
  return m.router.bytes() + m.gate_up.bytes() + m.down.bytes() + m.gate_up_scales.bytes() +
         m.down_scales.bytes() + m.down_tiled.bytes() + m.down_tiled_scales.bytes() + m.gate_up_tiled.bytes() +
         m.gate_up_tiled_scales.bytes();
}

// ---- WarpDecodeMoe ---------------------------------------------------------------
const char* to_string(KernelFamily f) {
  switch (f) {
    case KernelFamily::kAuto: return "auto";
    case KernelFamily::kScalar: return "scalar";
    case KernelFamily::kTensorCores: return "tensor-cores";
  }
  return "?";
}

KernelFamily WarpDecodeConfig::default_family(const MoeShape& shape, WeightFormat format, int max_batch) {
  // H200 (docs/PERF_LOG.md v9, run 4): the tensor cores are 1.1-2.5x faster
  // than the scalar kernels from B = 8 on every preset and format, and
  // within 8 % either way below (faster at B = 1 and 2 on qwen3-30b-a3b,
  // slower at B = 4). Until v8 the scalar kernels were 12-44 % faster for
  // MXFP8 at B <= 8, and MXFP8 objects below max_batch 16 kept them.
  (void)format;
  (void)max_batch;
  return tensor_cores_fit(shape) ? KernelFamily::kTensorCores : KernelFamily::kScalar;
}

// moe_gate_up_tc's passes of two n8 tiles (tc_gate_up_two_tiles) from this
// many routing entries an expert on average, doubled (9: B·K / E = 4.5, B >=
// 72 on 128 experts and top-8, 90 on 160; 12: 6, B >= 96 on 128 experts; 16:
// 8, B >= 128; 6: 3, B >= 48 on 128, 60 on 160): a rule of the shape and the
// batch alone, and either pass gives the same bits. Measured against
// one-tile passes, tiled-only:
//   session 49 (H200): layer −4 to −17 % at 8 an expert (qwen3-30b-a3b B =
//   128), −10 to −24 % at 12-16 (B = 192-256), −7 to +2 % at 6 (B = 96;
//   qwen3-coder-480b-a35b MXFP8 the +1.9 %), +2 to +8 % just past 4 (B =
//   65), where most experts hold one tile's tokens and the pair kernel runs
//   three blocks an SM instead of four or five;
//   session 68 (H100), gate_up: −6 to −13 % at 6 on the three presets and
//   both formats; at 4.5-5.75 (B = 72-92) BF16 −4 to −11 %, qwen3-235b-a22b
//   MXFP8 −2 to −9 %, qwen3-30b-a3b MXFP8 level at 4.5-4.75 and −2 to −5 %
//   from 5. Below 4.5 not measured on today's kernels;
//   session 72 (H200, starts at 4.5, 5 and 6 in one run, interleaved; the
//   identical kernels differed by up to 3 %): BF16 two-tile passes stay
//   ahead from 4.5 (one-tile layer +1.4 to +5.8 % at B = 80-88, +1.8 % at 72
//   on qwen3-235b-a22b); MXFP8 one-tile passes are faster at 4.5-5.5 (layer
//   −3.5 to −5.0 % at B = 72-88 on qwen3-30b-a3b, 0 to −2.8 % on
//   qwen3-235b-a22b), the H100's opposite: on the H200 MXFP8 starts at 6;
//   session 74 (H100, BF16, bench-moe --sweep, two runs that agreed within
//   0.2 %): two-tile passes never slower from 2 (B = 32), the layer −0.1 to
//   −0.4 % at 2.5-3.5 (B = 40-56 on 128 experts, 48-72 on 160), −1.1 % at 4
//   (qwen3-30b-a3b and qwen3-235b-a22b B = 64), −2.2 % at 4.5: on the H100
//   BF16 starts at 3 (level on qwen3-30b-a3b there, −0.3 % on
//   qwen3-235b-a22b). MXFP8 on the H100 at 4 (B = 64) −0.5 % on
//   qwen3-235b-a22b, level on qwen3-coder-480b-a35b at 3.2 (B = 64) and 4
//   (B = 80, −0.7 %): kept at 4.5;
//   session 75 (H200, bench-moe --sweep, MXFP8 B = 64-128:8, BF16 32-72:8):
//   MXFP8 on qwen3-30b-a3b (H = 2048) one-tile passes stay ahead to 7.5
//   (the layer +6.2 / +4.3 / +3.3 / +2.4 / +0.7 % with two tiles at B = 72
//   / 88 / 96 / 104 / 120), two tiles −2.0 % at 8 (B = 128): on the H200
//   MXFP8 starts at 8 where H < 4096, the short K walk amortising less of a
//   two-tile block's fixed cost; on qwen3-235b-a22b level at 5.5, −1.6 % at
//   6 (B = 96), on qwen3-coder-480b-a35b −0.8 % at 5.6 (B = 112), −2.6 % at
//   6: 6 holds for H >= 4096. BF16 as before (qwen3-30b-a3b one-tile ahead
//   by 0.7-1.8 % to B = 64, level at 72; the larger presets −0.1 to −0.8 %
//   with two tiles from B = 48).
namespace {
// The hidden size from which the tensor-core rules below were measured
// differently: qwen3-235b-a22b (4096) and qwen3-coder-480b-a35b (6144)
// against qwen3-30b-a3b (2048); no H between them was measured.
bool long_hidden(const MoeShape& shape) { return shape.hidden >= 4096; }
}  // namespace

int WarpDecodeConfig::gate_up_two_tiles_from_x2(const MoeShape& shape, WeightFormat format, TableCard card) {
  if (format == WeightFormat::kMXFP8) return card == TableCard::kH100 ? 9 : long_hidden(shape) ? 12 : 16;
  return card == TableCard::kH100 ? 6 : 9;
}

WarpDecodeConfig WarpDecodeConfig::for_batch(const MoeShape& shape, int batch, WeightFormat format,
                                             KernelFamily family, bool tiled_gate_up, TableCard card) {
  // A call's batch is checked after its configuration is chosen; no layer
  // takes more than kWarpDecodeMaxBatch tokens, so the rule need not look
  // past it (and its products of B stay far inside int).
  batch = std::min(batch, kWarpDecodeMaxBatch);
  if (family == KernelFamily::kAuto) family = default_family(shape, format, batch);
  WarpDecodeConfig c;
  if (family == KernelFamily::kTensorCores) {
    // PDL measured equal or faster at every B (run 2 of v7); evict-first as below.
    c.tensor_cores = true;
    c.evict_first = true;
    c.programmatic_launch = true;
    // The tiled down weights (v12): HBM serves moe_down_tc's 16-row × 64-byte
    // items as one contiguous kilobyte instead of 16 pieces of 64 bytes.
    c.tc_tiled_down = format == WeightFormat::kMXFP8;
    // The tiled gate_up weights (v13), where the weights hold them
    // (DeviceWeightsOptions::tiled_mxfp8_gate_up or tiled_only()): gate_up
    // 4-10 % faster, the layer 2-7 %.
    c.tc_tiled_gate_up = format == WeightFormat::kMXFP8 && tiled_gate_up;
    // BF16 has tiled copies only as a pair, in tiled-only weights (v14).
    if (format == WeightFormat::kBF16) c.tc_tiled_down = c.tc_tiled_gate_up = tiled_gate_up;
    // Deep MXFP8 gate_up rounds, only where the deep kernel runs (so that the
    // label says which one does). Re-measured in v14 (run 2, two runs each):
    // on the canonical rows 2-16 % faster on H >= 4096 at every B, and on
    // H = 2048 at B = 2-16 (3-6 %), level at 32, 3 % slower at B = 1 and 64;
    // on the tiled copy shallow rounds are level or faster everywhere (2-4 %
    // on H = 2048, 7.5 % at B = 16 on H = 4096) except B = 1 on H >= 4096 (3 %).
    // down's paired walk (two warps a K slice, the same bits), MXFP8 on the
    // tiled down copy where the shape gives a warp one unit of I (qwen3-30b-
    // a3b), at B = 16-64. Measured on an H200 (PERF_LOG session 62, three
    // rounds, with session 61's half-row fold): the layer −1.1 to −6.4 % at
    // B = 16-64 (down −1.7 to −14.6 %), +1.2 % at 8 (tiled-only weights; the
    // down kernel reads the same tiled copy in the default upload). On an
    // H100: the layer −0.3 to −1.4 % at 17-48 (session 58), down −0.9 % at 64
    // (session 61); 16 and 49-63 not measured there. Before that fold
    // (session 58): +4.4 % down at 64, +21 to +32 % at 96-256 (its
    // four-token tiles, where the one-warp walk takes eight).
    // One unit a warp: as many slices as 64-wide units of I (one unit always
    // has a paired walk, kernels::down_tc_pairs_fit).
    c.tc_down_pairs = format == WeightFormat::kMXFP8 && c.tc_tiled_down && batch >= 16 && batch <= 64 &&
                      kernels::down_tc_slices(shape.hidden, shape.intermediate) * 64 == shape.intermediate;
    const bool large = long_hidden(shape);
    c.tc_deep_loads = tc_deep_loads_apply(shape, format) &&
                      (c.tc_tiled_gate_up ? large && batch == 1 : large || (batch >= 2 && batch <= 16));
    // Two-tile passes where the kernel has them (the tiled copy, shallow
    // rounds: deep ones take the tiled copy at B = 1 only, where K < 4.5E
    // keeps them off anyway; canonical weights keep one-tile passes, not
    // measured with two).
    const long two_tiles_from_x2 = gate_up_two_tiles_from_x2(shape, format, card);
    c.tc_gate_up_two_tiles =
        c.tc_tiled_gate_up && !c.tc_deep_loads && 2L * batch * shape.top_k >= two_tiles_from_x2 * shape.experts;
    return c;
  }
  // From the sweeps of docs/PERF_LOG.md (H200):
  // - gate_up: one token per pass while experts rarely share tokens (B <= 8;
  //   MXFP8 up to 16), four beyond. At B <= 2 narrow rounds (24 warps per SM)
  //   and one neuron pair per warp (-7 % at B = 1); else two pairs for MXFP8
  //   up to B = 16, four from B = 16 (BF16) or 32 (MXFP8), one otherwise.
  // - down: one output per warp only while its grid (B·H/4 blocks) still fits
  //   one wave, i.e. qwen3-30b-a3b at B = 1 (at H = 4096 and 6144 four per warp
  //   measured 11-23 % faster already at B = 1). h staged in shared memory for
  //   BF16 at B = 1 while it is at most 48 KB (24 KB on qwen3-30b-a3b: -11 %;
  //   80 KB on qwen3-coder-480b-a35b: +21 %, occupancy falls).
  // - both: the hardware E4M3 convert; evict-first streaming loads (3-5 %
  //   faster at every B); PDL at B <= 8, where the launch of moe_down is a
  //   large part of the time. L2 prefetch ahead of the loads measured slower
  //   everywhere (off).
  const bool mx8 = format == WeightFormat::kMXFP8;
  const size_t h_bytes = size_t(shape.top_k) * shape.intermediate * sizeof(float);
  c.gate_up_tokens_per_pass = batch <= (mx8 ? 16 : 8) ? 1 : 4;
  // Four staged tokens beside the block's B·K routing entries can outgrow
  // its shared memory (qwen3-coder-480b-a35b from B = 3329): one token a pass
  // there, the same bits (the pass width never changes them).
  if (c.gate_up_tokens_per_pass == 4 &&
      kernels::moe_gate_up_smem_for(batch * shape.top_k, 4, shape.hidden) > kernels::kMoeGateUpMaxSmem)
    c.gate_up_tokens_per_pass = 1;
  c.gate_up_narrow = batch <= 2;
  c.gate_up_neurons_per_warp = batch <= 2 ? 1 : mx8 && batch <= 16 ? 2 : (batch >= 16 ? 4 : 1);
  c.down_rows_per_warp = batch * shape.hidden <= 2048 ? 1 : 4;
  c.down_stage_h = batch == 1 && !mx8 && h_bytes <= 48 * 1024;
  c.mx8_int_decode = false;
  c.evict_first = true;
  c.programmatic_launch = batch <= 8;
  return c;
}

bool WarpDecodeConfig::tensor_cores_fit(const MoeShape& shape) {
  return kernels::tensor_core_shape_ok(shape.hidden, shape.intermediate);
}

bool WarpDecodeConfig::tc_deep_loads_apply(const MoeShape& shape, WeightFormat format) {
  return format == WeightFormat::kMXFP8 && kernels::gate_up_tc_deep_fits(shape.hidden);
}

std::string WarpDecodeConfig::label() const {
  auto pf = [](int n) { return n > 0 ? "p" + std::to_string(n) : std::string(); };
  if (tensor_cores)
    return std::string("tc") + (tc_deep_loads ? "/deep" : "") + (evict_first ? "/ef" : "") +
           (programmatic_launch ? "/pdl" : "") + (tc_tiled_down ? "/tiled" : "") + (tc_tiled_gate_up ? "/tgu" : "") +
           (tc_gate_up_two_tiles ? "/2t" : "") + (tc_down_pairs ? "/pairs" : "");
  return "gu" + std::to_string(gate_up_tokens_per_pass) + "x" + std::to_string(gate_up_neurons_per_warp) +
         (gate_up_narrow && gate_up_tokens_per_pass == 1 ? "n" : "") + pf(gate_up_prefetch) + "/dn" + std::to_string(down_rows_per_warp) + pf(down_prefetch) +
         (down_stage_h ? "s" : "") +
         (mx8_int_decode ? "/int" : "/cvt") + (evict_first ? "/ef" : "") + (programmatic_launch ? "/pdl" : "");
}

struct WarpDecodeMoe::Workspace {
  DeviceBuffer<float> h;          // (max_batch, K, I)
  DeviceBuffer<int32_t> ids;      // (max_batch, K)
  DeviceBuffer<float> weights;    // (max_batch, K)
};

namespace {
bool kernels_take(const MoeShape& shape, int batch, KernelFamily family, TableCard card);
}  // namespace

int WarpDecodeMoe::largest_batch(const MoeShape& shape, KernelFamily family) {
  shape.validate();
  if (family == KernelFamily::kAuto) family = WarpDecodeConfig::default_family(shape, WeightFormat::kBF16, kMaxBatch);
  const TableCard card = kernels::device_table_card();
  if (kernels_take(shape, kMaxBatch, family, card)) return kMaxBatch;
  // What grows with the batch only grows: the largest batch taken is found
  // by bisection (0 if none).
  int lo = 0, hi = kMaxBatch;  // lo taken (or 0), hi not
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (kernels_take(shape, mid, family, card) ? lo : hi) = mid;
  }
  return lo;
}

WarpDecodeMoe::WarpDecodeMoe(const MoeShape& shape, int max_batch, KernelFamily family)
    : shape_(shape),
      max_batch_(max_batch),
      family_(family),
      card_(kernels::device_table_card()),
      ws_(std::make_unique<Workspace>()) {
  shape.validate();
  WD_CHECK(family != KernelFamily::kTensorCores || WarpDecodeConfig::tensor_cores_fit(shape),
           "warp decode: the tensor-core kernels need H % 256 == 0 and I % 64 == 0 (H = ", shape.hidden,
           ", I = ", shape.intermediate, "); use KernelFamily::kScalar or kAuto");
  WD_CHECK(max_batch >= 1 && max_batch <= kMaxBatch, "warp decode: max_batch = ", max_batch,
           " must be in [1, ", kMaxBatch, "]");
  // Refused here, not at the call that reaches it.
  if (!kernels_take(shape, max_batch, this->family(WeightFormat::kBF16), card_))
    throw InvalidArgument(detail::concat(
        "warp decode: max_batch = ", max_batch, " is past ", largest_batch(shape, family_),
        ", the largest batch the ", to_string(this->family(WeightFormat::kBF16)), " kernels take at H = ",
        shape.hidden, ", I = ", shape.intermediate, ", E = ", shape.experts, ", K = ", shape.top_k,
        " (a gate_up block lists its B·K routing entries in shared memory)"));
  const size_t BK = size_t(max_batch) * shape.top_k;
  ws_->h = DeviceBuffer<float>(BK * shape.intermediate);
  ws_->ids = DeviceBuffer<int32_t>(BK);
  ws_->weights = DeviceBuffer<float>(BK);
}

WarpDecodeMoe::~WarpDecodeMoe() = default;

KernelFamily WarpDecodeMoe::family(WeightFormat format) const {
  return family_ == KernelFamily::kAuto ? WarpDecodeConfig::default_family(shape_, format, max_batch_) : family_;
}

WarpDecodeConfig WarpDecodeMoe::default_config(int batch, WeightFormat format) const {
  return WarpDecodeConfig::for_batch(shape_, batch, format, family(format), false, card_);
}

WarpDecodeConfig WarpDecodeMoe::default_config(int batch, const MoeWeightsView& w) const {
  return WarpDecodeConfig::for_batch(shape_, batch, w.format, family(w.format), w.gate_up_tiled != nullptr, card_);
}

const int32_t* WarpDecodeMoe::routing_ids() const { return ws_->ids.data(); }
const float* WarpDecodeMoe::routing_weights() const { return ws_->weights.data(); }
float* WarpDecodeMoe::intermediate() const { return ws_->h.data(); }

namespace {
void check_call(const MoeShape& mine, const MoeWeightsView& w, int batch, int max_batch) {
  w.validate();
  WD_CHECK(w.space == MemorySpace::kDevice, "warp decode: weights must be in device memory");
  WD_CHECK(w.shape.same_dims(mine), "warp decode: weights' shape differs from the shape this layer was built for");
  WD_CHECK(batch >= 1 && batch <= max_batch, "warp decode: batch = ", batch,
           " must be in [1, max_batch = ", max_batch, "]");
}
}  // namespace

namespace {
kernels::RouterParams router_params(const MoeShape& shape, const MoeWeightsView& w, const uint16_t* x, int batch,
                                    int32_t* ids, float* weights) {
  return kernels::RouterParams{w.router,     x,           ids,
                               weights,      batch,       shape.hidden,
                               shape.experts, shape.top_k, shape.norm_topk_prob ? 1 : 0,
                               /*programmatic_launch=*/1, /*group_tokens=*/0};
}

// The expert kernels' parameters for one call, every check of both kernels
// done: a call that either kernel cannot take throws before anything is
// launched (nothing half-written).
struct ExpertKernels {
  kernels::GateUpParams g{};
  kernels::DownParams d{};
  bool tensor_cores = false;
};

ExpertKernels plan_experts(const MoeShape& shape, int max_batch, float* h, const MoeWeightsView& w,
                           const uint16_t* x, const RoutingView& r, const MoeOutput& out,
                           const WarpDecodeConfig& config, WarpDecodeMoe::Kernels which) {
  check_call(shape, w, r.batch, max_batch);
  WD_CHECK(r.top_k == shape.top_k, "warp decode: routing has K = ", r.top_k, ", layer has K = ", shape.top_k);
  WD_CHECK(r.ids && r.weights && x && out.y, "warp decode: a required pointer is null");
  if (!config.tensor_cores) w.require_canonical("warp decode's scalar kernels");
  ExpertKernels k;
  k.tensor_cores = config.tensor_cores;
  kernels::GateUpParams& g = k.g;
  g.weights = w.gate_up;
  g.scales = w.gate_up_scales;
  g.x = x;
  g.ids = r.ids;
  g.h = h;
  g.batch = r.batch;
  g.hidden = shape.hidden;
  g.intermediate = shape.intermediate;
  g.experts = shape.experts;
  g.top_k = shape.top_k;
  g.tokens_per_pass = config.gate_up_tokens_per_pass;
  g.neurons_per_warp = config.gate_up_neurons_per_warp;
  g.mx8_int_decode = config.mx8_int_decode ? 1 : 0;
  g.prefetch_pairs = config.gate_up_prefetch;
  g.evict_first = config.evict_first ? 1 : 0;
  g.narrow_rounds = config.gate_up_narrow ? 1 : 0;
  g.deep_loads = config.tc_deep_loads ? 1 : 0;
  g.scales_narrow = w.mx_scales_narrow ? 1 : 0;
  g.two_tiles = config.tc_gate_up_two_tiles ? 1 : 0;
  // Tensor cores read a tiled copy where the config asks and the weights
  // have it, and always where the weights have nothing else (tiled-only):
  // the same values, so the same bits.
  if (config.tensor_cores && w.gate_up_tiled != nullptr && (config.tc_tiled_gate_up || w.gate_up == nullptr)) {
    g.weights = w.gate_up_tiled;
    g.scales = w.gate_up_tiled_scales;
    g.tiled = 1;
  }

  kernels::DownParams& d = k.d;
  d.weights = w.down;
  d.scales = w.down_scales;
  d.h = h;
  d.ids = r.ids;
  d.route_w = r.weights;
  d.y = out.y;
  d.residual = out.residual;
  d.out_fp32 = out.type == OutputType::kFP32 ? 1 : 0;
  d.batch = r.batch;
  d.hidden = shape.hidden;
  d.intermediate = shape.intermediate;
  d.experts = shape.experts;
  d.top_k = shape.top_k;
  d.mx8_int_decode = config.mx8_int_decode ? 1 : 0;
  d.programmatic_launch = config.programmatic_launch && which != WarpDecodeMoe::Kernels::kDown ? 1 : 0;
  d.rows_per_warp = config.down_rows_per_warp;
  d.prefetch_experts = config.down_prefetch;
  d.evict_first = config.evict_first ? 1 : 0;
  d.stage_h = config.down_stage_h ? 1 : 0;
  d.scales_narrow = w.mx_scales_narrow ? 1 : 0;
  d.pair_warps = config.tensor_cores && config.tc_down_pairs ? 1 : 0;
  if (config.tensor_cores && w.down_tiled != nullptr && (config.tc_tiled_down || w.down == nullptr)) {
    d.weights = w.down_tiled;
    d.scales = w.down_tiled_scales;
    d.tiled = 1;
  }

  if (which != WarpDecodeMoe::Kernels::kDown)
    config.tensor_cores ? kernels::check_moe_gate_up_tc(g, w.format) : kernels::check_moe_gate_up(g, w.format);
  if (which != WarpDecodeMoe::Kernels::kGateUp)
    config.tensor_cores ? kernels::check_moe_down_tc(d, w.format) : kernels::check_moe_down(d, w.format);
  return k;
}

void launch_experts(const ExpertKernels& k, WeightFormat format, WarpDecodeMoe::Kernels which,
                    cudaStream_t stream) {
  if (which != WarpDecodeMoe::Kernels::kDown)
    k.tensor_cores ? kernels::moe_gate_up_tc(k.g, format, stream) : kernels::moe_gate_up(k.g, format, stream);
  if (which != WarpDecodeMoe::Kernels::kGateUp)
    k.tensor_cores ? kernels::moe_down_tc(k.d, format, stream) : kernels::moe_down(k.d, format, stream);
}

// Whether the expert kernels of `family` take `batch` tokens of this shape in
// both formats: a call of the default configuration at that batch planned
// through plan_experts, i.e. every check a real call makes (what grows with
// the batch: the B·K routing entries a gate_up block lists in shared memory,
// the scalar gate_up's staged tokens). The pointers are a stand-in aligned
// address: the checks test them for null and alignment and never read them.
bool kernels_take(const MoeShape& shape, int batch, KernelFamily family, TableCard card) {
  const auto* stand_in = reinterpret_cast<uint8_t*>(uintptr_t(256));
  const auto* stand_in16 = reinterpret_cast<const uint16_t*>(stand_in);
  float* h = reinterpret_cast<float*>(uintptr_t(256));
  const RoutingView r{batch, shape.top_k, reinterpret_cast<const int32_t*>(stand_in),
                      reinterpret_cast<const float*>(stand_in)};
  const MoeOutput out{h, OutputType::kFP32, nullptr};
  try {
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kMXFP8}) {
      MoeWeightsView w;
      w.shape = shape;
      w.format = f;
      w.space = MemorySpace::kDevice;
      w.router = stand_in16;
      w.gate_up = stand_in;
      w.down = stand_in;
      if (f == WeightFormat::kMXFP8) w.gate_up_scales = w.down_scales = stand_in;
      const WarpDecodeConfig c = WarpDecodeConfig::for_batch(shape, batch, f, family, false, card);
      plan_experts(shape, batch, h, w, stand_in16, r, out, c, WarpDecodeMoe::Kernels::kBoth);
    }
  } catch (const InvalidArgument&) {
    return false;
  }
  return true;
}
}  // namespace

void WarpDecodeMoe::route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids,
                          float* weights, cudaStream_t stream) const {
  check_call(shape_, w, batch, max_batch_);
  kernels::router(router_params(shape_, w, x, batch, ids, weights), stream);
}

void WarpDecodeMoe::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& r,
                            const MoeOutput& out, cudaStream_t stream) const {
  experts(w, x, r, out, default_config(r.batch, w), stream);
}

void WarpDecodeMoe::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& r,
                            const MoeOutput& out, const WarpDecodeConfig& config,
                            cudaStream_t stream, Kernels which) const {
  const ExpertKernels k = plan_experts(shape_, max_batch_, ws_->h.data(), w, x, r, out, config, which);
  maybe_validate_routing(r, shape_.experts, stream);
  launch_experts(k, w.format, which, stream);
}

void WarpDecodeMoe::forward(const MoeWeightsView& w, const uint16_t* x, int batch,
                            const MoeOutput& out, cudaStream_t stream) const {
  // The router and both expert kernels checked before the router launches
  // (plan_experts checks the call: weights, batch).
  const RoutingView r{batch, shape_.top_k, ws_->ids.data(), ws_->weights.data()};
  const ExpertKernels k =
      plan_experts(shape_, max_batch_, ws_->h.data(), w, x, r, out, default_config(batch, w), Kernels::kBoth);
  const kernels::RouterParams rp = router_params(shape_, w, x, batch, ws_->ids.data(), ws_->weights.data());
  kernels::check_router(rp);
  kernels::router(rp, stream);
  maybe_validate_routing(r, shape_.experts, stream);
  launch_experts(k, w.format, Kernels::kBoth, stream);
}

}  // namespace wd
