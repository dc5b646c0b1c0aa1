#include "tools/warpdecode/layer_source.h"

#include <utility>

#include "warpdecode/error.h"
#include "warpdecode/model/checkpoint.h"
#include "warpdecode/model/config.h"
#include "warpdecode/model/expert_stack.h"
#include "warpdecode/model/model_weights.h"

namespace wd::cli {

LayerSource synthetic_layer_source(const MoeShape& shape, const std::string& label, uint64_t seed) {
  SyntheticSpec spec;
  spec.seed = seed;
  auto bf16 = std::make_shared<const MoeWeights>(MoeWeights::synthetic(shape, spec));
  LayerSource src;
  src.label = label;
  src.name = label;
  src.shape = shape;
  src.unavailable = [](WeightFormat) { return std::string(); };
  src.origin = [seed](WeightFormat f) {
    return f == WeightFormat::kBF16 ? detail::concat("synthetic N(0, 0.02), seed ", seed)
                                    : std::string("quantized from the BF16 weights");
  };
  src.weights = accuracy::converted_layer(bf16);
  return src;
}

namespace {

// The opened checkpoint: ModelWeights points into the mapped files.
struct OpenModel {
  model::ModelConfig config;
  model::Checkpoint ckpt;
  model::ModelWeights weights;
  int layer = -1;
  explicit OpenModel(const std::string& dir)
      : config(model::load_config(dir)), ckpt(model::Checkpoint::open(dir)),
        weights(model::ModelWeights::map(config, ckpt)) {}
};

std::shared_ptr<const MoeWeights> stack_weights(const OpenModel& m, model::StackFormat f) {
  model::ExpertStack stack = model::load_expert_stack(m.weights, m.layer, f);
  const MoeShape shape = stack.shape;
  const WeightFormat format = stack.view().format;  // throws for FP8 blocks other than 128 x 128
  return std::make_shared<const MoeWeights>(MoeWeights::adopt(std::move(stack), shape, format));
}

}  // namespace

LayerSource model_layer_source(const std::string& dir, int layer) {
  auto m = std::make_shared<OpenModel>(dir);
  const model::ModelConfig& c = m->config;
  int moe_index = 0;  // the layer's place among the MoE layers
  if (layer < 0) {
    for (int l = 0; l < c.num_hidden_layers && layer < 0; ++l)
      if (c.is_moe_layer(l)) layer = l;
    WD_CHECK(layer >= 0, dir, " has no MoE layer");
  }
  WD_CHECK(layer < c.num_hidden_layers, "--layer ", layer, " is outside the model's layers [0, ",
           c.num_hidden_layers, ")");
  WD_CHECK(c.is_moe_layer(layer), "--layer ", layer, " is a dense layer, not an MoE layer");
  for (int l = 0; l < layer; ++l) moe_index += c.is_moe_layer(l);
  m->layer = layer;

  LayerSource src;
  src.shape = c.moe_shape();
  src.label = detail::concat(dir, " layer ", layer, " (MoE layer ", moe_index + 1, " of ", c.num_moe_layers(), ")");
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  base = base.substr(base.find_last_of('/') + 1);  // npos + 1 == 0: no slash
  src.name = detail::concat(base, ":", layer);
  // What the layer's expert tensors hold decides, not config.json's
  // quantization_config: a checkpoint may keep that beside BF16 experts (a
  // dequantized copy, or experts in modules_to_not_convert). fp8_values:
  // some expert is FP8 with block scales (BF16 and MXFP8 then come from the
  // dequantized values); fp8_stack: every expert is, in one block shape.
  bool fp8_values = false, fp8_stack = true;
  int block_rows = 0, block_cols = 0;
  const model::MoeLayerWeights& ex = m->weights.layers[size_t(layer)].experts;
  for (const std::vector<model::Matrix>* mats : {&ex.gate, &ex.up, &ex.down})
    for (const model::Matrix& w : *mats) {
      if (!w.fp8_block()) {
        fp8_stack = false;
        continue;
      }
      if (!fp8_values) block_rows = w.block_rows, block_cols = w.block_cols;
      fp8_stack = fp8_stack && w.block_rows == block_rows && w.block_cols == block_cols;
      fp8_values = true;
    }
  fp8_stack = fp8_stack && fp8_values;
  const bool fp8_128 = fp8_stack && block_rows == kFp8BlockSize && block_cols == kFp8BlockSize;
  src.unavailable = [fp8_stack, fp8_128, block_rows, block_cols](WeightFormat f) {
    if (f != WeightFormat::kFP8Block128 || !fp8_stack || fp8_128) return std::string();
    return detail::concat("the checkpoint's FP8 blocks are ", block_rows, "x", block_cols,
                          ", fp8-block128 takes 128x128 (bf16 and mxfp8 come from its dequantized values)");
  };
  src.origin = [fp8_values, fp8_128](WeightFormat f) -> std::string {
    switch (f) {
      case WeightFormat::kBF16:
        return fp8_values ? "the checkpoint's dequantized FP8 values rounded to BF16" : "the checkpoint's values as BF16";
      case WeightFormat::kMXFP8:
        return fp8_values ? "quantized from the checkpoint's dequantized FP8 values"
                          : "quantized from the checkpoint's values";
      case WeightFormat::kFP8Block128:
        return fp8_128 ? "the checkpoint's own FP8 bytes and 128x128 block scales" : "quantized from the BF16 weights";
    }
    return "";
  };
  src.weights = [m, fp8_128](WeightFormat f) -> std::shared_ptr<const MoeWeights> {
    switch (f) {
      case WeightFormat::kBF16: return stack_weights(*m, model::StackFormat::kBF16);
      case WeightFormat::kMXFP8: return stack_weights(*m, model::StackFormat::kMXFP8);
      case WeightFormat::kFP8Block128:
        if (fp8_128) return stack_weights(*m, model::StackFormat::kFp8Block);
        return std::make_shared<const MoeWeights>(
            stack_weights(*m, model::StackFormat::kBF16)->to_fp8_block128());
    }
    throw InvalidArgument("model_layer_source: unknown weight format");
  };
  return src;
}

}  // namespace wd::cli
