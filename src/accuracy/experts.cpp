#include "accuracy/experts.h"

#include <algorithm>

#include "warpdecode/error.h"
#include "warpdecode/formats.h"
#include "warpdecode/weights.h"

namespace wd::accuracy {
namespace {

// Per-expert element counts of each tensor of the layout.
struct ExpertSizes {
  size_t gate_up, down, gate_up_mx, down_mx, gate_up_blocks, down_blocks;
  explicit ExpertSizes(const MoeShape& s) {
    const size_t H = s.hidden, I = s.intermediate, B = kFp8BlockSize;
    const size_t hb = (H + B - 1) / B, ib = (I + B - 1) / B;
    gate_up = 2 * I * H;
    down = H * I;
    gate_up_mx = gate_up / kMxBlock;
    down_mx = down / kMxBlock;
    gate_up_blocks = 2 * ib * hb;
    down_blocks = hb * ib;
  }
};

// dst gets, expert by expert, the `per_expert` elements of each expert in ids.
template <typename T>
void gather(std::vector<T>& dst, const void* src, size_t per_expert, const std::vector<int32_t>& ids,
            const CopyToHost& copy) {
  dst.resize(ids.size() * per_expert);
  const T* base = static_cast<const T*>(src);
  for (size_t j = 0; j < ids.size(); ++j)
    copy(&dst[j * per_expert], base + size_t(ids[j]) * per_expert, per_expert * sizeof(T));
}

}  // namespace

std::vector<int32_t> distinct_experts(const std::vector<int32_t>& ids) {
  std::vector<int32_t> d(ids);
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

HostExperts slice_experts(const MoeWeightsView& full, std::vector<int32_t> ids, const CopyToHost& copy) {
  full.validate();
  ids = distinct_experts(ids);
  WD_CHECK(!ids.empty(), "slice_experts: no experts asked for");
  for (int32_t e : ids)
    WD_CHECK(e >= 0 && e < full.shape.experts, "slice_experts: expert ", e, " is outside [0, ", full.shape.experts, ")");
  HostExperts h;
  h.shape = full.shape;
  h.shape.experts = int(ids.size());
  h.format = full.format;
  h.ids = ids;
  const ExpertSizes n(full.shape);
  gather(h.router, full.router, size_t(full.shape.hidden), ids, copy);
  switch (full.format) {
    case WeightFormat::kBF16:
      gather(h.gate_up_bf16, full.gate_up, n.gate_up, ids, copy);
      gather(h.down_bf16, full.down, n.down, ids, copy);
      break;
    case WeightFormat::kMXFP8:
      gather(h.gate_up_q, full.gate_up, n.gate_up, ids, copy);
      gather(h.down_q, full.down, n.down, ids, copy);
      gather(h.gate_up_scales, full.gate_up_scales, n.gate_up_mx, ids, copy);
      gather(h.down_scales, full.down_scales, n.down_mx, ids, copy);
      break;
    case WeightFormat::kFP8Block128:
      gather(h.gate_up_q, full.gate_up, n.gate_up, ids, copy);
      gather(h.down_q, full.down, n.down, ids, copy);
      gather(h.gate_up_block_scales, full.gate_up_block_scales, n.gate_up_blocks, ids, copy);
      gather(h.down_block_scales, full.down_block_scales, n.down_blocks, ids, copy);
      break;
  }
  return h;
}

MoeWeightsView HostExperts::view() const { return host_moe_view(*this, shape, format); }

std::vector<int32_t> HostExperts::remap(const std::vector<int32_t>& layer_ids) const {
  std::vector<int32_t> out(layer_ids.size());
  for (size_t i = 0; i < layer_ids.size(); ++i) {
    const auto it = std::lower_bound(ids.begin(), ids.end(), layer_ids[i]);
    WD_CHECK(it != ids.end() && *it == layer_ids[i], "remap: expert ", layer_ids[i], " is not held");
    out[i] = int32_t(it - ids.begin());
  }
  return out;
}

MoeWeightsView router_only_view(const MoeShape& shape, const uint16_t* router) {
  MoeWeightsView v;
  v.shape = shape;
  v.format = WeightFormat::kBF16;
  v.space = MemorySpace::kHost;
  v.router = router;
  v.gate_up = router;
  v.down = router;
  return v;
}

}  // namespace wd::accuracy
