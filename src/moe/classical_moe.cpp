// The classical expert-centric MoE path: host side (see warpdecode/classical.h).
#include "warpdecode/classical.h"

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/device_buffer.h"
#include "kernels/classical_gemm.cuh"
#include "kernels/classical_stages.cuh"
#include "moe/classical_operands.h"
#include "moe/classical_rules.h"
#include "warpdecode/down_tiling.h"
#include "warpdecode/error.h"
#include "warpdecode/gate_up_tiling.h"
#include "warpdecode/routing_check.h"

namespace wd {

using namespace classical_rules;

// ---- DeviceFp8BlockWeights ------------------------------------------------------------
struct DeviceFp8BlockWeights::Impl {
  MoeShape shape;
  DeviceBuffer<uint16_t> router;
  DeviceBuffer<uint8_t> gate_up, down;
  DeviceBuffer<float> gate_up_scales, down_scales;
};

DeviceFp8BlockWeights::DeviceFp8BlockWeights() : impl_(std::make_unique<Impl>()) {}
DeviceFp8BlockWeights::DeviceFp8BlockWeights(DeviceFp8BlockWeights&&) noexcept = default;
DeviceFp8BlockWeights& DeviceFp8BlockWeights::operator=(DeviceFp8BlockWeights&&) noexcept = default;
DeviceFp8BlockWeights::~DeviceFp8BlockWeights() = default;

DeviceFp8BlockWeights DeviceFp8BlockWeights::upload(const MoeWeights& host) {
  WD_CHECK(host.format() == WeightFormat::kFP8Block128, "DeviceFp8BlockWeights::upload: weights are ",
           to_string(host.format()), ", not fp8-block128 (convert with MoeWeights::to_fp8_block128)");
  DeviceFp8BlockWeights d;
  Impl& m = *d.impl_;
  m.shape = host.shape();
  m.router = DeviceBuffer<uint16_t>(host.router);
  m.gate_up = DeviceBuffer<uint8_t>(host.gate_up_q);
  m.down = DeviceBuffer<uint8_t>(host.down_q);
  m.gate_up_scales = DeviceBuffer<float>(host.gate_up_block_scales);
  m.down_scales = DeviceBuffer<float>(host.down_block_scales);
  return d;
}

DeviceFp8BlockWeights DeviceFp8BlockWeights::quantize(const MoeWeightsView& w, cudaStream_t stream) {
  w.validate();
  WD_CHECK(w.format == WeightFormat::kBF16 && w.space == MemorySpace::kDevice,
           "DeviceFp8BlockWeights::quantize needs BF16 weights in device memory");
  w.require_canonical("DeviceFp8BlockWeights::quantize");  // it reads the canonical (E, N, K) tensors
  const MoeShape& s = w.shape;
  const size_t E = s.experts, H = s.hidden, I = s.intermediate, B = kFp8BlockSize;
  const size_t hb = (H + B - 1) / B, ib = (I + B - 1) / B;
  DeviceFp8BlockWeights d;
  Impl& m = *d.impl_;
  m.shape = s;
  m.router = DeviceBuffer<uint16_t>(E * H);
  WD_CUDA_CHECK(cudaMemcpyAsync(m.router.data(), w.router, m.router.bytes(), cudaMemcpyDeviceToDevice, stream));
  m.gate_up = DeviceBuffer<uint8_t>(E * 2 * I * H);
  m.down = DeviceBuffer<uint8_t>(E * H * I);
  m.gate_up_scales = DeviceBuffer<float>(E * 2 * ib * hb);
  m.down_scales = DeviceBuffer<float>(E * hb * ib);
  // gate_up: 2E matrices (I, H) (gate and up blocked separately); down: E matrices (H, I).
  kernels::quantize_fp8_block128(static_cast<const uint16_t*>(w.gate_up), 2 * E, I, H, m.gate_up.data(),
                                 m.gate_up_scales.data(), stream);
  kernels::quantize_fp8_block128(static_cast<const uint16_t*>(w.down), E, H, I, m.down.data(),
                                 m.down_scales.data(), stream);
  return d;
}

MoeWeightsView DeviceFp8BlockWeights::view() const {
  const Impl& m = *impl_;
  MoeWeightsView v;
  v.shape = m.shape;
  v.format = WeightFormat::kFP8Block128;
  v.space = MemorySpace::kDevice;
  v.router = m.router.data();
  v.gate_up = m.gate_up.data();
  v.down = m.down.data();
  v.gate_up_block_scales = m.gate_up_scales.data();
  v.down_block_scales = m.down_scales.data();
  return v;
}

size_t DeviceFp8BlockWeights::bytes() const {
  const Impl& m = *impl_;
  return m.router.bytes() + m.gate_up.bytes() + m.down.bytes() + m.gate_up_scales.bytes() + m.down_scales.bytes();
}

const char* to_string(ClassicalStage s) {
  switch (s) {
    case ClassicalStage::kRouterGemm: return "router_gemm";
    case ClassicalStage::kTopK: return "topk";
    case ClassicalStage::kAlign: return "align";
    case ClassicalStage::kPermute: return "permute";
    case ClassicalStage::kGateUp: return "gate_up_gemm";
    case ClassicalStage::kSiluMul: return "silu_mul";
    case ClassicalStage::kDown: return "down_gemm";
    case ClassicalStage::kCombine: return "combine";
  }
  return "?";
}

// ---- ClassicalMoe ------------------------------------------------------------------------
namespace {

// Upper bound of the blocks of T rows for `entries` entries over E experts,
// each expert padded to a multiple of R = T (or 2T, paired):
// Σ_e ceil(c_e / R)·R / T <= (entries + nonzero·(R-1)) / T, nonzero <= min(E, entries).
int max_blocks_for(int entries, int experts, int T, bool paired = false) {
  const long nz = std::min(experts, entries), R = paired ? 2L * T : T;
  return int((long(entries) + nz * (R - 1)) / T);
}
}  // namespace

struct ClassicalMoe::Workspace {
  int max_rows = 0;
  DeviceBuffer<float> logits;             // (max_batch, E)
  DeviceBuffer<int32_t> ids;              // (max_batch, K)
  DeviceBuffer<float> weights;            // (max_batch, K)
  DeviceBuffer<int32_t> counts, offsets, meta;
  DeviceBuffer<int32_t> sorted_entries;   // (max_rows)
  DeviceBuffer<int32_t> block_expert;     // (max_rows / 8)
  DeviceBuffer<int32_t> entry_row;        // (max_batch·K)
  DeviceBuffer<int32_t> chunk_counts;     // (ceil(max_batch·K / 1024), E): the multi-block align's scratch
  DeviceBuffer<uint8_t> a;                // (max_rows, H) 2 bytes an element (BF16 or E4M3)
  DeviceBuffer<float> a_scales;           // (max_rows, ceil(H/128))
  DeviceBuffer<uint16_t> gate_up;         // (max_rows, 2I)
  DeviceBuffer<uint8_t> h;                // (max_rows, I) 2 bytes an element
  DeviceBuffer<float> h_scales;           // (max_rows, ceil(I/128))
  DeviceBuffer<uint16_t> partials;        // (max_rows, H)
};

ClassicalMoe::ClassicalMoe(const MoeShape& shape, int max_batch)
    : shape_(shape), max_batch_(max_batch), sm90a_(kernels::wgmma_available()), ws_(std::make_unique<Workspace>()) {
  shape.validate();
  WD_CHECK(max_batch >= 1 && max_batch <= 65536, "classical MoE: max_batch = ", max_batch,
           " must be in [1, 65536]");
  const size_t E = shape.experts, K = shape.top_k, H = shape.hidden, I = shape.intermediate;
  const int entries = max_batch * shape.top_k;
  size_t rows = 0;  // the most rows any token tile pads the entries to
  // (Paired, for the weight-sharing clusters: at least as many as unpaired.)
  for (int T : kTiles) rows = std::max(rows, size_t(max_blocks_for(entries, shape.experts, T, true)) * T);
  Workspace& w = *ws_;
  w.max_rows = int(rows);
  w.logits = DeviceBuffer<float>(size_t(max_batch) * E);
  w.ids = DeviceBuffer<int32_t>(size_t(max_batch) * K);
  w.weights = DeviceBuffer<float>(size_t(max_batch) * K);
  w.counts = DeviceBuffer<int32_t>(E);
  w.offsets = DeviceBuffer<int32_t>(E + 1);
  w.meta = DeviceBuffer<int32_t>(2);
  w.sorted_entries = DeviceBuffer<int32_t>(rows);
  w.block_expert = DeviceBuffer<int32_t>(rows / 8 + 1);
  w.entry_row = DeviceBuffer<int32_t>(size_t(entries));
  w.chunk_counts = DeviceBuffer<int32_t>((size_t(entries) + 1023) / 1024 * E);
  w.a = DeviceBuffer<uint8_t>(rows * H * 2);
  w.a_scales = DeviceBuffer<float>(rows * ((H + 127) / 128));
  w.gate_up = DeviceBuffer<uint16_t>(rows * 2 * I);
  w.h = DeviceBuffer<uint8_t>(rows * I * 2);
  w.h_scales = DeviceBuffer<float>(rows * ((I + 127) / 128));
  w.partials = DeviceBuffer<uint16_t>(rows * H);
  // Padding rows are never written by a call: zeros keep them finite.
  w.meta.fill_bytes(0);
  w.a.fill_bytes(0);
  w.a_scales.fill_bytes(0);
  w.gate_up.fill_bytes(0);
  w.h.fill_bytes(0);
  w.h_scales.fill_bytes(0);
  w.partials.fill_bytes(0);
}

ClassicalMoe::~ClassicalMoe() = default;

bool ClassicalMoe::wgmma_available() { return kernels::wgmma_available(); }

ClassicalWorkspaceView ClassicalMoe::workspace() const {
  const Workspace& w = *ws_;
  return ClassicalWorkspaceView{w.logits.data(),   w.ids.data(),            w.weights.data(),
                                w.counts.data(),   w.offsets.data(),        w.sorted_entries.data(),
                                w.block_expert.data(), w.entry_row.data(),  w.meta.data(),
                                w.a.data(),        w.a_scales.data(),       w.gate_up.data(),
                                w.h.data(),        w.h_scales.data(),       w.partials.data(),
                                w.max_rows};
}

const int32_t* ClassicalMoe::routing_ids() const { return ws_->ids.data(); }
const float* ClassicalMoe::routing_weights() const { return ws_->weights.data(); }

void ClassicalMoe::check_io(const uint16_t* x, const MoeOutput& out) {
  WD_CHECK(x && out.y, "classical MoE: a required pointer is null");
  const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  WD_CHECK(!misaligned(x) && !misaligned(out.y) && !misaligned(out.residual),
           "classical MoE: x, y and the residual must be 16-byte aligned (its stages move 16-byte chunks)");
}

namespace {
void check_weights(const MoeShape& mine, const MoeWeightsView& w, const ClassicalConfig& config) {
  w.validate();
  WD_CHECK(w.space == MemorySpace::kDevice, "classical MoE: weights must be in device memory");
  // Without both canonical tensors the GEMMs read both tiled copies (run_stage):
  // a view of one canonical tensor and the other's tiled copy alone is refused
  // here, not read through a null pointer on the device.
  if (!w.has_canonical()) {
    WD_CHECK(w.gate_up_tiled && w.down_tiled &&
                 (w.format != WeightFormat::kMXFP8 || (w.gate_up_tiled_scales && w.down_tiled_scales)),
             "classical MoE: weights without both canonical tensors must hold both tiled copies (a view of one "
             "canonical tensor and the other's tiled copy alone is not read); upload them with "
             "DeviceWeightsOptions::tiled_only() or the default options");
    WD_CHECK(config.reads_tiled(mine, w.format), "classical MoE: these weights keep only their tiled copies "
             "(DeviceWeightsOptions::tiled_only()), which the classical path reads only on the TMA GEMM with BF16 "
             "activations (BF16 weights, or MXFP8 in W8A16) and SiLU·up fused (ClassicalConfig::reads_tiled, an "
             "sm_90a device); not ", to_string(w.format), " with ", config.label(), ". Upload them with the default "
             "options, or un-tile them (UntiledWeights)");
  }
  WD_CHECK(w.shape.same_dims(mine), "classical MoE: weights' shape differs from the shape this layer was built for");
  if (w.format != WeightFormat::kBF16)
    WD_CHECK(w8a8_shape_ok(mine), "classical MoE: W8A8 (",
             to_string(w.format), ") needs H = ", mine.hidden, " and I = ", mine.intermediate,
             " to be multiples of 128 (activation groups, FP8 block-128 scale blocks)");
}

// The configuration of a call given none: for_batch's, or for tiled-only
// weights for_tiled_copies'.
ClassicalConfig default_config(const MoeShape& s, const MoeWeightsView& w, int batch, bool sm90a) {
  batch = std::max(1, batch);
  return w.has_canonical() ? ClassicalConfig::for_batch(s, batch, w.format, sm90a)
                           : ClassicalConfig::for_tiled_copies(s, batch, sm90a, w.format);
}

kernels::GemmKernel gemm_kernel(const ClassicalConfig& c) {
  switch (c.gemm) {
    case ClassicalGemm::kWgmma: return kernels::GemmKernel::kWgmma;
    case ClassicalGemm::kStream: return kernels::GemmKernel::kStream;
    case ClassicalGemm::kStreamWgmma: return kernels::GemmKernel::kStreamWgmma;
    case ClassicalGemm::kTma: return kernels::GemmKernel::kTma;
    case ClassicalGemm::kMmaSync: break;
  }
  return kernels::GemmKernel::kMmaSync;
}
}  // namespace

void set_weight_operands(kernels::GroupedGemmParams& p, const MoeWeightsView& w, bool up) {
  p.w_tiled = w.has_canonical() ? 0 : 1;
  if (p.w_tiled) {
    p.w = up ? w.gate_up_tiled : w.down_tiled;
    p.w_mx_scales = up ? w.gate_up_tiled_scales : w.down_tiled_scales;  // MXFP8 (W8A16); BF16: none
    p.w_block_scales = nullptr;
  } else {
    p.w = up ? w.gate_up : w.down;
    p.w_mx_scales = up ? w.gate_up_scales : w.down_scales;
    p.w_block_scales = up ? w.gate_up_block_scales : w.down_block_scales;
  }
}

void ClassicalMoe::check_call(WeightFormat format, int batch, const ClassicalConfig& config) const {
  const int B = batch, H = shape_.hidden, I = shape_.intermediate;
  WD_CHECK(B >= 1 && B <= max_batch_, "classical MoE: batch = ", B, " must be in [1, max_batch = ", max_batch_, "]");
  const int T = config.tile_tokens;
  // One device query per object (the constructor's), not three per check:
  // every stage of a call runs this check.
  const bool supported = config.supports(shape_, format, sm90a_);
  WD_CHECK(tile_allowed(T), "classical MoE: tile_tokens = ", T, " (allowed: 8, 16, 32, 64, 80, 128, 144)");
  WD_CHECK(config.gemm != ClassicalGemm::kStream || supported,
           "classical MoE: the stream GEMM takes T = 8 or 16 (not ", T, ") and H, I multiples of 64 (BF16) or 128 "
           "(W8A8); H = ", H, ", I = ", I);
  WD_CHECK(config.gemm != ClassicalGemm::kStreamWgmma || supported,
           "classical MoE: the stream-wgmma GEMM takes T = 8 (not ", T, "), FP8 block-128 weights (not ",
           to_string(format), ") and an sm_90a device");
  WD_CHECK(w8a16_ok(config, format), "classical MoE: W8A16 (", config.label(),
           ") takes the TMA GEMM and MXFP8 weights, not ", to_string(format));
  WD_CHECK(!config.fuse_silu || (config.gemm == ClassicalGemm::kTma &&
                                  silu_fuses(shape_, format, config.bf16_activations, config.tile_tokens)),
           "classical MoE: SiLU·up fused into the gate_up GEMM takes the TMA GEMM, BF16 activations (BF16 weights or "
           "W8A16) or W8A8 at T = 64 or 80 (FP8 block-128 also 128), and I % 128 == 0; ", config.label(), ", ", to_string(format), ", I = ", I);
  WD_CHECK(config.gemm != ClassicalGemm::kTma || supported,
           "classical MoE: the TMA GEMM needs an sm_90a device and H, I multiples of 8 (BF16) or 128 (W8A8); ",
           to_string(format), ", H = ", H, ", I = ", I);
  // Whatever else the GEMMs refuse (a tile the mma.sync or wgmma kernel does
  // not have, W8A8 on a shape it does not take), refused here, before the
  // first stage launches.
  WD_CHECK(supported, "classical MoE: ", config.label(), " does not take ", to_string(format),
           " weights at H = ", H, ", I = ", I, " on this device");
}

void ClassicalMoe::run_stage(ClassicalStage stage, const MoeWeightsView& w, const uint16_t* x, const RoutingView& r,
                             const MoeOutput& out, const ClassicalConfig& config, cudaStream_t stream) const {
  check_weights(shape_, w, config);
  check_call(w.format, r.batch, config);
  const int B = r.batch, H = shape_.hidden, I = shape_.intermediate, E = shape_.experts, K = shape_.top_k;
  const int T = config.tile_tokens;
  const bool w8a8 = w.format != WeightFormat::kBF16 && !config.bf16_activations;
  const int entries = B * K;
  const int max_blocks = max_blocks_for(entries, E, T, config.share_weights);
  Workspace& ws = *ws_;
  WD_CHECK(size_t(max_blocks) * T <= size_t(ws.max_rows), "classical MoE: workspace too small");

  switch (stage) {
    case ClassicalStage::kRouterGemm: {
      WD_CHECK(x, "classical MoE: x is null");
      const int rt = B <= 64 ? 8 : 64;  // token tile of the router GEMM
      kernels::GroupedGemmParams p{};
      p.w = w.router;
      p.a = x;
      p.out = ws.logits.data();
      p.out_fp32 = 1;
      p.rows = B;
      p.n = E;
      p.k = H;
      p.max_blocks = (B + rt - 1) / rt;
      kernels::grouped_gemm(p, WeightFormat::kBF16, rt, kernels::GemmKernel::kMmaSync, stream);
      return;
    }
    case ClassicalStage::kTopK: {
      kernels::TopKParams p{ws.logits.data(), ws.ids.data(), ws.weights.data(), B, E, K,
                            shape_.norm_topk_prob ? 1 : 0};
      kernels::topk_softmax(p, stream);
      return;
    }
    case ClassicalStage::kAlign: {
      WD_CHECK(r.ids && r.top_k == K, "classical MoE: routing ids missing or K = ", r.top_k, " != ", K);
      kernels::AlignParams p{r.ids,       entries,          E, T, ws.counts.data(), ws.offsets.data(),
                             ws.sorted_entries.data(), ws.block_expert.data(), ws.entry_row.data(),
                             ws.meta.data(), ws.chunk_counts.data(), config.share_weights ? 1 : 0};
      kernels::moe_align(p, stream, config.pdl);
      return;
    }
    case ClassicalStage::kPermute: {
      WD_CHECK(x, "classical MoE: x is null");
      if (config.gathers_rows(w.format)) return;  // the gate_up GEMM reads x itself
      kernels::PermuteParams p{x,    ws.entry_row.data(), ws.a.data(), ws.a_scales.data(), B, H, K, w8a8 ? 1 : 0,
                               config.bf16_activations ? 1 : 0};
      kernels::permute_rows(p, stream, config.pdl);
      return;
    }
    case ClassicalStage::kGateUp:
    case ClassicalStage::kDown: {
      const bool up = stage == ClassicalStage::kGateUp;
      kernels::GroupedGemmParams p{};
      set_weight_operands(p, w, up);  // tiled-only weights (check_weights: config.reads_tiled): the tiled copies
      const bool gather = up && config.gathers_rows(w.format);
      WD_CHECK(!gather || x, "classical MoE: x is null");
      p.a = gather ? static_cast<const void*>(x)
            : up   ? static_cast<const void*>(ws.a.data())
                   : static_cast<const void*>(ws.h.data());
      p.a_rows = gather ? ws.sorted_entries.data() : nullptr;
      p.a_rows_div = K;
      // The TMA tile's rows in use: W8A16's wgmmas issue fewer rows where
      // they allow (kernels::tma_a16_issue_rows); the W8A8 token-split tile
      // skips a consumer's half of all padding rows.
      p.row_entries = (config.bf16_activations || (w8a8 && kernels::tma_w8a8_splits_tokens(w.format, T))) &&
                              config.gemm == ClassicalGemm::kTma
                          ? ws.sorted_entries.data()
                          : nullptr;
      p.a_scales = w8a8 ? (up ? ws.a_scales.data() : ws.h_scales.data()) : nullptr;
      p.block_expert = ws.block_expert.data();
      p.num_blocks = ws.meta.data();
      p.out = up ? (config.fuse_silu ? static_cast<void*>(ws.h.data()) : ws.gate_up.data()) : ws.partials.data();
      p.fuse_silu = up && config.fuse_silu ? 1 : 0;
      p.out_scales = p.fuse_silu && w8a8 ? ws.h_scales.data() : nullptr;  // W8A8: h quantized in the epilogue
      p.a_bf16 = config.bf16_activations ? 1 : 0;
      p.out_fp32 = 0;
      p.rows = ws.max_rows;
      p.n = up ? 2 * I : H;
      p.k = up ? H : I;
      p.max_blocks = max_blocks;
      p.experts = E;
      p.share_weights = config.share_weights ? 1 : 0;
      kernels::grouped_gemm(p, w.format, T, gemm_kernel(config), stream, config.pdl);
      return;
    }
    case ClassicalStage::kSiluMul: {
      if (config.fuse_silu) return;  // done by the gate_up GEMM
      kernels::SiluMulParams p{ws.gate_up.data(), ws.sorted_entries.data(), ws.meta.data(), ws.h.data(),
                               ws.h_scales.data(), max_blocks * T, I, w8a8 ? 1 : 0, config.bf16_activations ? 1 : 0};
      kernels::silu_mul(p, stream, config.pdl);
      return;
    }
    case ClassicalStage::kCombine: {
      WD_CHECK(r.weights && out.y, "classical MoE: routing weights or output missing");
      kernels::CombineParams p{ws.partials.data(), ws.entry_row.data(), r.weights, out.y, out.residual,
                               out.type == OutputType::kFP32 ? 1 : 0, B, H, K};
      kernels::combine(p, stream, config.pdl);
      return;
    }
  }
  throw InvalidArgument("classical MoE: unknown stage");
}

void ClassicalMoe::route(const MoeWeightsView& w, const uint16_t* x, int batch, int32_t* ids, float* weights,
                         cudaStream_t stream) const {
  WD_CHECK(ids && weights, "classical MoE: route needs ids and weights");
  const RoutingView r{batch, shape_.top_k, nullptr, nullptr};
  const ClassicalConfig c = default_config(shape_, w, batch, sm90a_);
  run_stage(ClassicalStage::kRouterGemm, w, x, r, MoeOutput{}, c, stream);
  kernels::TopKParams p{ws_->logits.data(), ids, weights, batch, shape_.experts, shape_.top_k,
                        shape_.norm_topk_prob ? 1 : 0};
  kernels::topk_softmax(p, stream);
}

void ClassicalMoe::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& r, const MoeOutput& out,
                           cudaStream_t stream) const {
  experts(w, x, r, out, default_config(shape_, w, r.batch, sm90a_), stream);
}

void ClassicalMoe::experts(const MoeWeightsView& w, const uint16_t* x, const RoutingView& r, const MoeOutput& out,
                           const ClassicalConfig& config, cudaStream_t stream) const {
  WD_CHECK(r.ids && r.weights, "classical MoE: a required pointer is null");
  check_io(x, out);
  check_weights(shape_, w, config);  // every stage checks them again; here before anything launches
  check_call(w.format, r.batch, config);
  maybe_validate_routing(r, shape_.experts, stream);
  for (ClassicalStage s : {ClassicalStage::kAlign, ClassicalStage::kPermute, ClassicalStage::kGateUp,
                           ClassicalStage::kSiluMul, ClassicalStage::kDown, ClassicalStage::kCombine})
    run_stage(s, w, x, r, out, config, stream);
}

void ClassicalMoe::forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
                           cudaStream_t stream) const {
  forward(w, x, batch, out, default_config(shape_, w, batch, sm90a_), stream);
}

void ClassicalMoe::forward(const MoeWeightsView& w, const uint16_t* x, int batch, const MoeOutput& out,
                           const ClassicalConfig& config, cudaStream_t stream) const {
  // The experts' checks before the router launches (nothing half-written).
  check_io(x, out);
  check_weights(shape_, w, config);
  check_call(w.format, batch, config);
  route(w, x, batch, ws_->ids.data(), ws_->weights.data(), stream);
  experts(w, x, RoutingView{batch, shape_.top_k, ws_->ids.data(), ws_->weights.data()}, out, config, stream);
}

}  // namespace wd
