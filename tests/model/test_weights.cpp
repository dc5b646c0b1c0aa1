// Weight mapping and conversion: HF names -> our layout, every source dtype
// and expert layout to the same stacks, FP8 block checkpoints kept and
// converted, bad checkpoints refused by name, streaming memory bounded.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "model_files.h"
#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/model/expert_stack.h"
#include "warpdecode/model/model_weights.h"
#include "warpdecode/model/progress.h"
#include "warpdecode/model/safetensors.h"
#include "warpdecode/model/tensor_data.h"
#include "warpdecode/weights.h"

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's (its header, sanitizer/allocator_interface.h, is
// not installed with every compiler).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace wd::model {
namespace {

using testing::SourceDType;
using testing::TinyModelSpec;

struct Loaded {
  std::string dir;
  ModelConfig config;
  Checkpoint ckpt;
  ModelWeights weights;
};

Loaded load(const TinyModelSpec& spec, const std::string& tag) {
  const std::string dir = testing::make_temp_dir(tag);
  testing::write_tiny_model(dir, spec);
  ModelConfig c = load_config(dir);
  Checkpoint ckpt = Checkpoint::open(dir);
  ModelWeights w = ModelWeights::map(c, ckpt);
  return Loaded{dir, c, std::move(ckpt), std::move(w)};
}

std::string expert_name(int layer, int e, const char* m) {
  return "model.layers." + std::to_string(layer) + ".mlp.experts." + std::to_string(e) + "." + m + ".weight";
}

TEST(WeightMap, MapsEveryTensorOfTheTinyModel) {
  const TinyModelSpec spec;
  const Loaded m = load(spec, "map");
  const ModelWeights& w = m.weights;
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_TRUE(w.layers[0].moe);
  EXPECT_FALSE(w.layers[1].moe);  // mlp_only_layers = [1]
  EXPECT_TRUE(w.layers[2].moe);
  EXPECT_EQ(w.layers[0].experts.gate.size(), 8u);
  EXPECT_FALSE(w.layers[0].experts.fused);
  EXPECT_EQ(w.layers[0].attn.q_proj.rows, 64);
  EXPECT_EQ(w.layers[0].attn.k_proj.rows, 32);
  EXPECT_EQ(w.layers[1].mlp.down_proj.cols, 96);
  EXPECT_FALSE(w.fp8_block);
  EXPECT_TRUE(w.ignored.empty());
  // A value read through the map is the value written under that name.
  float v[64];
  w.layers[2].experts.up[5].read_rows(3, 1, v);
  for (int c = 0; c < 64; ++c)
    ASSERT_EQ(v[c], testing::tiny_value(spec, expert_name(2, 5, "up_proj"), 3 * 64 + c)) << c;
}

TEST(WeightMap, TiedEmbeddingsReuseTheEmbedding) {
  TinyModelSpec spec;
  spec.tie = true;
  const Loaded m = load(spec, "tied");
  EXPECT_EQ(m.weights.lm_head.weight, m.weights.embed_tokens.weight);
}

TEST(ExpertStack, Bf16StackIsTheLayoutOfLayoutH) {
  const TinyModelSpec spec;
  const Loaded m = load(spec, "stack");
  const ExpertStack s = load_expert_stack(m.weights, 2, StackFormat::kBF16);
  const size_t H = 64, I = 32;
  ASSERT_EQ(s.gate_up_bf16.size(), 8 * 2 * I * H);
  ASSERT_EQ(s.down_bf16.size(), 8 * H * I);
  for (int e : {0, 7}) {
    for (size_t r : {size_t(0), I - 1}) {
      for (size_t c : {size_t(0), H - 1}) {
        // gate rows [0, I), up rows [I, 2I) of expert e; down (E, H, I)
        EXPECT_EQ(bf16_to_float(s.gate_up_bf16[(e * 2 * I + r) * H + c]),
                  testing::tiny_value(spec, expert_name(2, e, "gate_proj"), r * H + c));
        EXPECT_EQ(bf16_to_float(s.gate_up_bf16[(e * 2 * I + I + r) * H + c]),
                  testing::tiny_value(spec, expert_name(2, e, "up_proj"), r * H + c));
      }
    }
    EXPECT_EQ(bf16_to_float(s.down_bf16[(e * H + 5) * I + 7]),
              testing::tiny_value(spec, expert_name(2, e, "down_proj"), 5 * I + 7));
  }
  EXPECT_EQ(bf16_to_float(s.router[3 * H + 9]), testing::tiny_value(spec, "model.layers.2.mlp.gate.weight", 3 * H + 9));
  s.view().validate();
  EXPECT_EQ(s.bytes(), 2 * (8 * H + 8 * 3 * I * H));
  EXPECT_THROW(load_expert_stack(m.weights, 1, StackFormat::kBF16), InvalidArgument);  // dense layer
}

// Every source dtype and expert layout holds the same numbers, so every one
// must give bit-identical stacks in both warp decode formats.
TEST(ExpertStack, EverySourceGivesTheSameStacks) {
  TinyModelSpec base;
  const Loaded ref = load(base, "src_ref");
  const ExpertStack want_bf16 = load_expert_stack(ref.weights, 0, StackFormat::kBF16);
  const ExpertStack want_mx = load_expert_stack(ref.weights, 0, StackFormat::kMXFP8);
  struct Variant {
    const char* what;
    SourceDType dtype;
    bool fused;
    int shards;
  };
  for (const Variant v : {Variant{"f32", SourceDType::kF32, false, 1}, Variant{"f16", SourceDType::kF16, false, 2},
                          Variant{"fused bf16", SourceDType::kBF16, true, 1},
                          Variant{"fused f32 sharded", SourceDType::kF32, true, 2}}) {
    TinyModelSpec spec = base;
    spec.dtype = v.dtype;
    spec.fused_experts = v.fused;
    spec.shards = v.shards;
    const Loaded m = load(spec, "src");
    EXPECT_EQ(m.weights.layers[0].experts.fused, v.fused) << v.what;
    const ExpertStack b = load_expert_stack(m.weights, 0, StackFormat::kBF16);
    EXPECT_EQ(b.gate_up_bf16, want_bf16.gate_up_bf16) << v.what;
    EXPECT_EQ(b.down_bf16, want_bf16.down_bf16) << v.what;
    EXPECT_EQ(b.router, want_bf16.router) << v.what;
    const ExpertStack q = load_expert_stack(m.weights, 0, StackFormat::kMXFP8);
    EXPECT_EQ(q.gate_up_q, want_mx.gate_up_q) << v.what;
    EXPECT_EQ(q.gate_up_scales, want_mx.gate_up_scales) << v.what;
    EXPECT_EQ(q.down_q, want_mx.down_q) << v.what;
    EXPECT_EQ(q.down_scales, want_mx.down_scales) << v.what;
  }
}

TEST(ExpertStack, Mxfp8IsTheFoundationsQuantizationOfTheBf16Stack) {
  const Loaded m = load(TinyModelSpec{}, "mx");
  const ExpertStack b = load_expert_stack(m.weights, 0, StackFormat::kBF16);
  const ExpertStack q = load_expert_stack(m.weights, 0, StackFormat::kMXFP8);
  const size_t E = 8, H = 64, I = 32;
  std::vector<uint8_t> gq(E * 2 * I * H), gs(E * 2 * I * H / 32), dq(E * H * I), ds(E * H * I / 32);
  quantize_mxfp8(b.gate_up_bf16.data(), E * 2 * I, H, gq.data(), gs.data(), MxScaleRule::kNoSaturate);
  quantize_mxfp8(b.down_bf16.data(), E * H, I, dq.data(), ds.data(), MxScaleRule::kNoSaturate);
  EXPECT_EQ(q.gate_up_q, gq);
  EXPECT_EQ(q.gate_up_scales, gs);
  EXPECT_EQ(q.down_q, dq);
  EXPECT_EQ(q.down_scales, ds);
  EXPECT_EQ(q.router, b.router);
  const MoeWeightsView v = q.view();
  EXPECT_EQ(v.format, WeightFormat::kMXFP8);
  v.validate();
}

TEST(ExpertStack, Fp8BlockCheckpointsAreKeptAndConverted) {
  TinyModelSpec spec;
  spec.dtype = SourceDType::kFp8Block;  // 24x24 blocks: ragged at I = 32 and H = 64
  const Loaded m = load(spec, "fp8");
  EXPECT_TRUE(m.weights.fp8_block);
  const Matrix& g = m.weights.layers[0].experts.gate[3];
  ASSERT_TRUE(g.fp8_block());
  EXPECT_EQ(g.scale_inv->shape, (std::vector<uint64_t>{2, 3}));

  // Kept as is: the checkpoint's E4M3 bytes and FP32 scales, gate block rows
  // then up block rows.
  const ExpertStack k = load_expert_stack(m.weights, 0, StackFormat::kFp8Block);
  EXPECT_EQ(k.block_rows, 24);
  const size_t H = 64, I = 32;
  const size_t gate_sr = 2, hc = 3;
  ASSERT_EQ(k.gate_up_block_scales.size(), 8 * 2 * gate_sr * hc);
  ASSERT_EQ(k.down_block_scales.size(), 8 * 3 * 2);
  float scale;
  const Matrix& u = m.weights.layers[0].experts.up[3];
  decode(*u.scale_inv, 4, 1, &scale);  // block (1, 1) of up
  EXPECT_EQ(k.gate_up_block_scales[(3 * 2 + 1) * gate_sr * hc + 4], scale);
  EXPECT_EQ(k.gate_up_q[(3 * 2 * I + I + 30) * H + 40], u.weight->data[30 * H + 40]);
  EXPECT_THROW(k.view(), InvalidArgument);  // 24x24 blocks are not layout.h's fp8-block128

  // Dequantized: e4m3 * scale_inv of its block, exactly.
  float row[64];
  u.read_rows(30, 1, row);
  EXPECT_EQ(row[40], e4m3_to_float(u.weight->data[30 * H + 40]) * scale);
  // The FP8 values approximate the BF16 ones they were made from (3 mantissa bits).
  const float orig = testing::tiny_value(spec, expert_name(0, 3, "up_proj"), 30 * H + 40);
  EXPECT_NEAR(row[40], orig, std::fabs(orig) * 0.07 + 1e-6);

  // Converted for warp decode: dequantize, then the foundation's MXFP8.
  const ExpertStack q = load_expert_stack(m.weights, 0, StackFormat::kMXFP8);
  std::vector<float> deq(I * H);
  u.read_rows(0, I, deq.data());
  std::vector<uint8_t> uq(I * H), us(I * H / 32);
  quantize_mxfp8(deq.data(), I, H, uq.data(), us.data(), MxScaleRule::kNoSaturate);
  EXPECT_TRUE(std::equal(uq.begin(), uq.end(), q.gate_up_q.begin() + long((3 * 2 * I + I) * H)));
  EXPECT_TRUE(std::equal(us.begin(), us.end(), q.gate_up_scales.begin() + long((3 * 2 * I + I) * H / 32)));

  // A BF16 checkpoint has no fp8-block form.
  const Loaded b = load(TinyModelSpec{}, "nofp8");
  try {
    load_expert_stack(b.weights, 0, StackFormat::kFp8Block);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("fp8-block needs an FP8 checkpoint"), std::string::npos) << e.what();
  }
}

// A NaN or infinite block scale would turn its whole block into NaN on every
// path, one past FLT_MAX / 448 could overflow it to Inf: each reader that
// decodes scales refuses them by tensor and block.
TEST(ExpertStack, NonFiniteBlockScalesAreRefusedByName) {
  const std::string down = expert_name(0, 5, "down_proj");
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY, 3e38f}) {
    TinyModelSpec spec;
    spec.dtype = SourceDType::kFp8Block;  // down (64, 32) in 24x24 blocks: scales (3, 2)
    spec.bad_scale_tensor = down;
    spec.bad_scale = bad;
    const Loaded m = load(spec, "fp8_badscale");
    const std::string what = std::string("block scales '") + down + "_scale_inv' hold " +
                             (std::isnan(bad)   ? "NaN"
                              : std::isinf(bad) ? "an infinite value"
                                                : std::string("3e+38, past FLT_MAX / 448,")) +
                             " at block (2, 1)";
    for (const StackFormat f : {StackFormat::kFp8Block, StackFormat::kMXFP8, StackFormat::kBF16}) {
      try {
        load_expert_stack(m.weights, 0, f);
        ADD_FAILURE() << to_string(f) << " accepted a scale of " << bad;
      } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << to_string(f) << ": " << e.what();
      }
    }
    // Rows outside the bad block still read; those inside it do not.
    const Matrix& d = m.weights.layers[0].experts.down[5];
    std::vector<double> row(32);
    EXPECT_NO_THROW(d.read_rows(47, 1, row.data()));
    EXPECT_THROW(d.read_rows(48, 1, row.data()), FormatError);
    // Another layer is untouched.
    EXPECT_NO_THROW(load_expert_stack(m.weights, 2, StackFormat::kFp8Block));
  }
}

// The tiny model of `spec` with element `index` of tensor `name` (one shard)
// overwritten by `value` (that tensor's element bytes), then loaded.
Loaded load_patched(const TinyModelSpec& spec, const std::string& tag, const std::string& name, uint64_t index,
                    const std::vector<uint8_t>& value) {
  const std::string dir = testing::make_temp_dir(tag);
  testing::write_tiny_model(dir, spec);
  const std::string file = dir + "/model.safetensors";
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const SafetensorsHeader h = parse_safetensors_header(bytes.data(), bytes.size(), file);
  const auto t = std::find_if(h.tensors.begin(), h.tensors.end(), [&](const TensorInfo& x) { return x.name == name; });
  EXPECT_NE(t, h.tensors.end()) << name;
  std::copy(value.begin(), value.end(), bytes.begin() + long(h.data_offset + t->begin + index * value.size()));
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  ModelConfig c = load_config(dir);
  Checkpoint ckpt = Checkpoint::open(dir);
  ModelWeights w = ModelWeights::map(c, ckpt);
  return Loaded{dir, c, std::move(ckpt), std::move(w)};
}

void expect_refused(const ModelWeights& w, StackFormat f, const std::string& what) {
  try {
    load_expert_stack(w, 0, f);
    ADD_FAILURE() << to_string(f) << " accepted: " << what;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << to_string(f) << ": " << e.what();
  }
}

// A non-finite weight is refused where the layer is loaded, by tensor and
// place, in every format: it had passed BF16 loads (a byte copy) and FP8
// block copies, to come out as a routing error or NaN outputs.
TEST(ExpertStack, NonFiniteWeightsAreRefusedByName) {
  const std::string router = "model.layers.0.mlp.gate.weight", up = expert_name(0, 3, "up_proj");
  // BF16 +Inf in the router (row 0, column 5), NaN in an expert (row 1, column 6 at H = 64).
  const Loaded inf = load_patched(TinyModelSpec{}, "nonfinite_router", router, 5, {0x80, 0x7F});
  for (StackFormat f : {StackFormat::kBF16, StackFormat::kMXFP8})
    expect_refused(inf.weights, f, "tensor '" + router + "' holds a non-finite value at row 0, column 5");
  const Loaded nan = load_patched(TinyModelSpec{}, "nonfinite_up", up, 70, {0xC0, 0x7F});
  expect_refused(nan.weights, StackFormat::kBF16, "tensor '" + up + "' holds a non-finite value at row 1, column 6");
  expect_refused(nan.weights, StackFormat::kMXFP8, "tensor '" + up + "': MXFP8 quantization: non-finite value");
  EXPECT_NO_THROW(load_expert_stack(nan.weights, 2, StackFormat::kBF16));  // another layer
  // E4M3 NaN (0x7F) in an FP8 checkpoint's expert: down (H 64, I 32), row 1, column 1.
  TinyModelSpec fp8;
  fp8.dtype = SourceDType::kFp8Block;
  fp8.block = 128;
  const std::string down = expert_name(0, 2, "down_proj");
  const Loaded e4m3 = load_patched(fp8, "nonfinite_e4m3", down, 33, {0x7F});
  expect_refused(e4m3.weights, StackFormat::kFp8Block, "tensor '" + down + "' holds a non-finite value at row 1, column 1");
  expect_refused(e4m3.weights, StackFormat::kBF16, "tensor '" + down + "' holds a non-finite value at row 1, column 1");
  // The same checkpoint unpatched loads.
  EXPECT_NO_THROW(load_expert_stack(load(fp8, "finite_e4m3").weights, 0, StackFormat::kFp8Block));
}

TEST(ExpertStack, Fp8Block128IsTheFoundationsFormat) {
  TinyModelSpec spec;
  spec.dtype = SourceDType::kFp8Block;
  spec.block = 128;  // Qwen3 FP8: one (partial) block covers H = 64
  const Loaded m = load(spec, "fp8_128");
  const ExpertStack k = load_expert_stack(m.weights, 2, StackFormat::kFp8Block);
  const MoeWeightsView v = k.view();
  EXPECT_EQ(v.format, WeightFormat::kFP8Block128);
  v.validate();
  EXPECT_EQ(v.gate_up_block_scales, k.gate_up_block_scales.data());
  // Its scales are indexed as the foundation indexes them.
  const MoeShape& s = k.shape;
  const Matrix& up = m.weights.layers[2].experts.up[6];
  float scale;
  decode(*up.scale_inv, 0, 1, &scale);
  EXPECT_EQ(k.gate_up_block_scales[fp8_block128_scale_index(s, true, 6, 32 + 5, 9)], scale);
  const Matrix& down = m.weights.layers[2].experts.down[1];
  decode(*down.scale_inv, 0, 1, &scale);
  EXPECT_EQ(k.down_block_scales[fp8_block128_scale_index(s, false, 1, 63, 31)], scale);
}

std::string map_error(const std::string& dir) {
  try {
    const ModelConfig c = load_config(dir);
    const Checkpoint ckpt = Checkpoint::open(dir);
    ModelWeights::map(c, ckpt);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(WeightMap, BadCheckpointsAreRefusedByName) {
  // Config and tensors that disagree.
  {
    const std::string dir = testing::make_temp_dir("bad_shape");
    TinyModelSpec spec;
    testing::write_tiny_model(dir, spec);
    spec.moe_intermediate = 64;
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    EXPECT_EQ(map_error(dir), dir + ": tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' has shape [32, 64], "
                                    "expected [64, 64] from config.json");
  }
  {
    const std::string dir = testing::make_temp_dir("bad_layers");
    TinyModelSpec spec;
    testing::write_tiny_model(dir, spec);
    spec.layers = 4;
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    EXPECT_EQ(map_error(dir), dir + ": tensor 'model.layers.3.input_layernorm.weight' is missing from the checkpoint");
  }
  {
    const std::string dir = testing::make_temp_dir("extra");
    TinyModelSpec spec;
    spec.layers = 4;
    testing::write_tiny_model(dir, spec);
    spec.layers = 3;
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    EXPECT_EQ(map_error(dir).rfind(dir + ": unexpected tensor 'model.layers.3.", 0), 0u) << map_error(dir);
  }
  {
    const std::string dir = testing::make_temp_dir("untied");
    TinyModelSpec spec;
    testing::write_tiny_model(dir, spec);
    spec.tie = true;  // lm_head.weight present in a tied model: ignored, like transformers
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    EXPECT_EQ(map_error(dir), "(accepted)");
  }
  {
    // FP8 tensors with no quantization_config in config.json.
    const std::string dir = testing::make_temp_dir("fp8_noconfig");
    TinyModelSpec spec;
    spec.dtype = SourceDType::kFp8Block;
    testing::write_tiny_model(dir, spec);
    spec.dtype = SourceDType::kBF16;
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    EXPECT_EQ(map_error(dir), dir + ": tensor 'model.layers.0.self_attn.q_proj.weight' is F8_E4M3 but config.json has "
                                    "no fp8 quantization_config with weight_block_size");
  }
  {
    // An FP8 weight without its scales.
    const std::string dir = testing::make_temp_dir("fp8_noscale");
    const std::string st = testing::safetensors_bytes({{"model.embed_tokens.weight", "F8_E4M3", {128, 64}, std::string(128 * 64, '\x30')}});
    TinyModelSpec spec;
    spec.dtype = SourceDType::kFp8Block;
    testing::write_file(dir + "/config.json", testing::tiny_config_json(spec));
    testing::write_file(dir + "/model.safetensors", st);
    EXPECT_EQ(map_error(dir), dir + ": FP8 tensor 'model.embed_tokens.weight' has no block scales "
                                    "'model.embed_tokens.weight_scale_inv'");
  }
  {
    const std::string dir = testing::make_temp_dir("dtype");
    const std::string st = testing::safetensors_bytes({{"model.embed_tokens.weight", "I32", {128, 64}, std::string(128 * 64 * 4, '\0')}});
    testing::write_file(dir + "/config.json", testing::tiny_config_json(TinyModelSpec{}));
    testing::write_file(dir + "/model.safetensors", st);
    EXPECT_EQ(map_error(dir), dir + ": tensor 'model.embed_tokens.weight' has dtype I32 (supported: BF16, F16, F32, F8_E4M3)");
  }
}

// Bytes of live heap allocations (glibc: main arena plus mmapped chunks; the
// stacks are allocated on the calling thread).
size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator replaces glibc's, whose mallinfo2 then
  // counts nothing.
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

// Resident file-backed pages of this process (mapped checkpoint pages).
size_t file_resident_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t size = 0, resident = 0, shared = 0;
  in >> size >> resident >> shared;
  return shared * size_t(sysconf(_SC_PAGESIZE));
}

TEST(ExpertStack, StreamingKeepsOneLayerInMemory) {
  // 10 MoE layers of 2.4 MB of BF16 experts each (24 MB in all): the
  // streaming loader must hold about one converted stack and one layer's
  // mapped pages at a time, never the whole model.
  TinyModelSpec spec;
  spec.layers = 10;
  spec.mlp_only_layers = {};
  spec.hidden = 128;
  spec.moe_intermediate = 96;
  spec.experts = 32;
  const Loaded m = load(spec, "stream");
  const size_t layer_bf16 = size_t(32) * 3 * 96 * 128 * 2;
  for (const StackFormat f : {StackFormat::kBF16, StackFormat::kMXFP8}) {
    std::vector<int> seen;
    size_t peak_heap = 0;
    const size_t heap0 = heap_in_use(), file0 = file_resident_bytes();
    stream_expert_stacks(m.weights, m.ckpt, f, [&](ExpertStack&& s) {
      seen.push_back(s.layer);
      EXPECT_EQ(s.format, f);
      peak_heap = std::max(peak_heap, heap_in_use() - std::min(heap0, heap_in_use()));
    }, nullptr);
    // Each layer's mapped pages are released once converted: none stay resident.
    const size_t file_after = file_resident_bytes() - std::min(file0, file_resident_bytes());
    EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_GT(peak_heap, layer_bf16 / 2 - 1);  // the stack itself (MXFP8 is about half of BF16)
    EXPECT_LT(peak_heap, 2 * layer_bf16) << to_string(f) << ": heap";
    EXPECT_LT(file_after, layer_bf16 / 2) << to_string(f) << ": mapped pages left resident";
    RecordProperty(std::string("peak_heap_") + to_string(f), std::to_string(peak_heap));
    RecordProperty(std::string("mapped_after_") + to_string(f), std::to_string(file_after));
  }
}

TEST(Progress, LinesWhenNotATerminal) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("loading", 2000000, f, Progress::Mode::kAuto);  // a file is not a terminal
    EXPECT_EQ(p.mode(), Progress::Mode::kLines);
    p.advance(150000);   // 7%: nothing new
    p.advance(450000);   // 30%
    p.advance(1400000);  // 100%
    p.finish();
  }
  std::rewind(f);
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  std::fclose(f);
  EXPECT_EQ(out,
            "loading: 0% (0.0 MB / 2.0 MB)\n"
            "loading: 30% (0.6 MB / 2.0 MB)\n"
            "loading: 100% (2.0 MB / 2.0 MB)\n");
}

TEST(Progress, BarRedrawsOneLine) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("experts", 100, f, Progress::Mode::kBar);
    for (int i = 0; i < 4; ++i) p.advance(25);
  }  // the destructor ends the line
  std::rewind(f);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  std::fclose(f);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 5) << out;  // 0, 25, 50, 75, 100 %
  EXPECT_NE(out.find("\rexperts [##############################] 100%"), std::string::npos) << out;
}

}  // namespace
}  // namespace wd::model
