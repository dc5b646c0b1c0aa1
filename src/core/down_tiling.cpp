#include "warpdecode/down_tiling.h"

#include "core/mxfp8_tiling.h"
#include "warpdecode/error.h"

namespace wd {

bool down_tiling_fits(const MoeShape& s) {
  return s.hidden > 0 && s.intermediate > 0 && s.hidden % kDownTileRows == 0 && s.intermediate % kDownTileElems == 0;
}

void tile_mxfp8_down(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                     uint8_t* scales_tiled) {
  WD_CHECK(down_tiling_fits(s), "tile_mxfp8_down: H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 16 == 0 and I % 64 == 0");
  WD_CHECK(q && scales && q_tiled && scales_tiled, "tile_mxfp8_down: a pointer is null");
  const DownTiling t{size_t(s.hidden), size_t(s.intermediate)};
  tile_on_host(t, s.experts, q, scales, q_tiled, scales_tiled);
}

void tile_bf16_down(const MoeShape& s, const uint16_t* w, uint16_t* w_tiled) {
  WD_CHECK(down_tiling_fits(s), "tile_bf16_down: H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 16 == 0 and I % 64 == 0");
  WD_CHECK(w && w_tiled, "tile_bf16_down: a pointer is null");
  const DownTiling t{size_t(s.hidden), 2 * size_t(s.intermediate)};  // rows of 2I bytes
  tile_on_host(t, s.experts, reinterpret_cast<const uint8_t*>(w), nullptr, reinterpret_cast<uint8_t*>(w_tiled),
               nullptr);
}

void untile_mxfp8_down(const MoeShape& s, const uint8_t* q_tiled, const uint8_t* scales_tiled, uint8_t* q,
                       uint8_t* scales) {
  WD_CHECK(down_tiling_fits(s), "untile_mxfp8_down: H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 16 == 0 and I % 64 == 0");
  WD_CHECK(q_tiled && scales_tiled && q && scales, "untile_mxfp8_down: a pointer is null");
  untile_on_host(DownTiling{size_t(s.hidden), size_t(s.intermediate)}, s.experts, q_tiled, scales_tiled, q, scales);
}

void untile_bf16_down(const MoeShape& s, const uint16_t* w_tiled, uint16_t* w) {
  WD_CHECK(down_tiling_fits(s), "untile_bf16_down: H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 16 == 0 and I % 64 == 0");
  WD_CHECK(w_tiled && w, "untile_bf16_down: a pointer is null");
  untile_on_host(DownTiling{size_t(s.hidden), 2 * size_t(s.intermediate)}, s.experts,
                 reinterpret_cast<const uint8_t*>(w_tiled), nullptr, reinterpret_cast<uint8_t*>(w), nullptr);
}

}  // namespace wd
