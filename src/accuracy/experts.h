// Host copies of a few experts of one MoE layer, for the FP64 reference.
//
// The judge (wd::reference::moe_experts) needs only the experts a batch is
// routed to. A qwen3-30b-a3b layer is 1.2 GB in BF16 and the drift study
// walks up to 94 layers, so the harness never holds a whole model: it
// generates one layer at a time (on the device, or on the host without one)
// and copies out the routed experts into a compact layer whose expert j is
// expert `ids[j]` of the real layer. Routing ids are remapped to the compact
// numbering (remap) before the reference runs.
//
// Layout of the compact layer: exactly layout.h's, with E' = ids.size()
// experts. Its router holds the same E' rows (the view must be complete);
// route with the full router through router_only_view.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "warpdecode/layout.h"

namespace wd::accuracy {

struct HostExperts {
  MoeShape shape;                  // shape.experts = ids.size()
  WeightFormat format = WeightFormat::kBF16;
  std::vector<int32_t> ids;        // expert of the full layer held in each slot, ascending
  std::vector<uint16_t> router;    // (E', H)
  std::vector<uint16_t> gate_up_bf16, down_bf16;       // (E', 2I, H), (E', H, I), BF16
  std::vector<uint8_t> gate_up_q, down_q;               // same shapes, E4M3 (MXFP8, FP8 block-128)
  std::vector<uint8_t> gate_up_scales, down_scales;     // (E', 2I, H/32), (E', H, I/32), MXFP8
  std::vector<float> gate_up_block_scales, down_block_scales;  // (E', 2·ceil(I/128), ceil(H/128)), (E', ceil(H/128), ceil(I/128))

  MoeWeightsView view() const;  // host view of the compact layer
  // The compact id of each id in `layer_ids` (all must be held).
  std::vector<int32_t> remap(const std::vector<int32_t>& layer_ids) const;
};

// Copies `bytes` from src (in the memory space of the layer) to host dst.
using CopyToHost = std::function<void(void* dst, const void* src, size_t bytes)>;

// The experts `ids` (any order, duplicates allowed) of a full layer view in
// host or device memory, copied with `copy`.
HostExperts slice_experts(const MoeWeightsView& full, std::vector<int32_t> ids, const CopyToHost& copy);

// The distinct experts of a routing (B, K), ascending.
std::vector<int32_t> distinct_experts(const std::vector<int32_t>& ids);

// A view for wd::reference::router only: the full router (E, H) on the host.
// The expert tensors point at the router's bytes so that the view validates;
// nothing but reference::router may read it.
MoeWeightsView router_only_view(const MoeShape& shape, const uint16_t* router);

}  // namespace wd::accuracy
