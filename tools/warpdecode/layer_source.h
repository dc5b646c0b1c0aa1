// The layer `warpdecode check` and `warpdecode accuracy --model` run, in
// each weight format: synthetic weights of a shape, or one MoE
// layer of a Hugging Face checkpoint as the loader converts it
// (model::load_expert_stack).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "accuracy/backend.h"
#include "warpdecode/layout.h"
#include "warpdecode/weights.h"

namespace wd::cli {

struct LayerSource {
  std::string label;  // what a header line names: the preset, or the checkpoint and layer
  std::string name;   // short, for records and table columns: the preset, or "<checkpoint dir name>:<layer>"
  MoeShape shape;
  // Why format f cannot be checked on this source ("" when it can).
  std::function<std::string(WeightFormat)> unavailable;
  // Where format f's weights come from (an available format), for headers.
  std::function<std::string(WeightFormat)> origin;
  // The layer's weights in format f (one that is available). Each call may
  // load and convert afresh: the caller holds one format at a time.
  accuracy::LayerWeights weights;
};

// Weights drawn by MoeWeights::synthetic(shape, seed); MXFP8 and FP8
// block-128 are converted from those BF16 weights.
LayerSource synthetic_layer_source(const MoeShape& shape, const std::string& label, uint64_t seed);

// MoE layer `layer` (the model's layer index; -1: its first MoE layer) of
// the checkpoint in `dir`. BF16 and MXFP8 come from the loader's
// conversions of the checkpoint's values (an FP8 checkpoint dequantized
// exactly, then rounded to BF16 or quantized to MXFP8); FP8 block-128 is an
// FP8 checkpoint's bytes and scales as they are where its blocks are
// 128 x 128 (unavailable otherwise), and a BF16/F16/F32 checkpoint's BF16
// weights quantized by MoeWeights::to_fp8_block128. Throws wd::Error
// naming the problem (no such directory or layer, a dense layer, a format
// the loader refuses).
LayerSource model_layer_source(const std::string& dir, int layer);

}  // namespace wd::cli
