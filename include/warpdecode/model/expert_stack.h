// One MoE layer's experts in our layout, built from a checkpoint, and the
// streaming loader that builds them one layer at a time.
//
// Layouts (layout.h; E experts, I = moe_intermediate, H = hidden):
//   router          (E, H)        BF16 (the checkpoint's gate, rounded to BF16
//                                 if stored wider or dequantized from FP8)
//   kBF16   gate_up (E, 2I, H), down (E, H, I)            BF16
//   kMXFP8  gate_up (E, 2I, H), down (E, H, I)            E4M3
//           gate_up_scales (E, 2I, H/32), down_scales (E, H, I/32)  E8M0
//   kFp8Block (the checkpoint's bytes as they are, for the classical path):
//           gate_up (E, 2I, H), down (E, H, I)            E4M3
//           gate_up_block_scales (E, 2*ceil(I/br), ceil(H/bc))  FP32: gate's
//             ceil(I/br) block rows first, then up's (a block never spans
//             the gate/up boundary, even when br does not divide I)
//           down_block_scales (E, ceil(H/br), ceil(I/bc))       FP32
//           w = e4m3 * scale_inv of its (br, bc) block
//           With 128x128 blocks (Qwen3's FP8 checkpoints) this is layout.h's
//           WeightFormat::kFP8Block128 and view() returns it.
//
// Conversions: BF16 source -> kBF16 is a copy; F16/F32 -> kBF16 rounds to
// nearest even; any source -> kMXFP8 goes through wd::quantize_mxfp8 on the
// exact FP32 values (BF16 data is quantized in place from the mapping);
// FP8-block -> kMXFP8 dequantizes each 128x128 block exactly to FP32 and then
// quantizes (the warp decode path); FP8-block -> kFp8Block keeps bytes and
// scales. Scratch memory is one expert matrix in FP32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "warpdecode/formats.h"
#include "warpdecode/layout.h"
#include "warpdecode/model/model_weights.h"
#include "warpdecode/model/progress.h"

namespace wd::model {

enum class StackFormat { kBF16, kMXFP8, kFp8Block };
const char* to_string(StackFormat f);                  // "bf16", "mxfp8", "fp8-block"
StackFormat parse_stack_format(const std::string& s);  // throws InvalidArgument listing the allowed

struct ExpertStack {
  int layer = -1;
  MoeShape shape;
  StackFormat format = StackFormat::kBF16;
  int block_rows = 0, block_cols = 0;        // kFp8Block only

  std::vector<uint16_t> router;              // (E, H) BF16
  std::vector<uint16_t> gate_up_bf16;        // kBF16
  std::vector<uint16_t> down_bf16;
  std::vector<uint8_t> gate_up_q;            // kMXFP8, kFp8Block: E4M3
  std::vector<uint8_t> down_q;
  std::vector<uint8_t> gate_up_scales;       // kMXFP8: E8M0
  std::vector<uint8_t> down_scales;
  std::vector<float> gate_up_block_scales;   // kFp8Block
  std::vector<float> down_block_scales;

  // The MoE view of layout.h: kBF16, kMXFP8, and kFp8Block with 128x128
  // blocks as WeightFormat::kFP8Block128; throws for other block sizes.
  MoeWeightsView view() const;
  size_t bytes() const;                      // host bytes held
};

// Builds layer `layer`'s stack (it must be an MoE layer). kFp8Block needs an
// FP8-block checkpoint. Touches only that layer's tensors; calls
// progress->advance() with the checkpoint bytes consumed, expert by expert.
ExpertStack load_expert_stack(const ModelWeights& w, int layer, StackFormat format,
                              MxScaleRule rule = MxScaleRule::kNoSaturate,
                              Progress* progress = nullptr);

// Checkpoint bytes of one MoE layer's tensors (router and experts).
uint64_t moe_layer_checkpoint_bytes(const ModelWeights& w, int layer);

// Streams every MoE layer through `consume`, in layer order: at most one
// stack is alive at a time, and each layer's mapped pages are released once
// converted, so resident memory stays near one stack plus one layer's mapped
// pages above the baseline, whatever the checkpoint's size. Progress (bar on
// a terminal, lines otherwise, or none if progress_out is null) counts
// expert bytes read.
void stream_expert_stacks(const ModelWeights& w, const Checkpoint& ckpt, StackFormat format,
                          const std::function<void(ExpertStack&&)>& consume,
                          FILE* progress_out = stderr, MxScaleRule rule = MxScaleRule::kNoSaturate);

}  // namespace wd::model
