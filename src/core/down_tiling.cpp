#include "warpdecode/down_tiling.h"

#include "core/mxfp8_tiling.h"

namespace wd {

bool down_tiling_fits(const MoeShape& s) {
  return s.hidden > 0 && s.intermediate > 0 && s.hidden % kDownTileRows == 0 && s.intermediate % kDownTileElems == 0;
}

void tile_mxfp8_down(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                     uint8_t* scales_tiled) {
  tile_on_host(down_walk(s, 1, "tile_mxfp8_down", {q, scales, q_tiled, scales_tiled}), s.experts, q, scales, q_tiled,
               scales_tiled);
}

void tile_bf16_down(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled) {
  tile_on_host(down_walk(s, 2, "tile_bf16_down", {w, w_tiled}), s.experts, reinterpret_cast<const uint8_t*>(w),
               nullptr, reinterpret_cast<uint8_t*>(w_tiled), nullptr);
}

void untile_mxfp8_down(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                       uint8_t* scales) {
  untile_on_host(down_walk(s, 1, "untile_mxfp8_down", {q_tiled, scales_tiled, q, scales}), s.experts, q_tiled,
                 scales_tiled, q, scales);
}

void untile_bf16_down(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w) {
  untile_on_host(down_walk(s, 2, "untile_bf16_down", {w_tiled, w}), s.experts,
                 reinterpret_cast<const uint8_t*>(w_tiled), nullptr, reinterpret_cast<uint8_t*>(w), nullptr);
}

}  // namespace wd
