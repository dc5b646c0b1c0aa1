#include "warpdecode/gate_up_tiling.h"

#include <cstring>

#include "warpdecode/error.h"

namespace wd {

bool gate_up_tiling_fits(const MoeShape& s) {
  return s.hidden > 0 && s.intermediate > 0 && s.hidden % kGateUpTileElems == 0 &&
         s.intermediate % kGateUpTileNeurons == 0;
}

void tile_mxfp8_gate_up(const MoeShape& s, const uint8_t* q, const uint8_t* scales, uint8_t* q_tiled,
                        uint8_t* scales_tiled) {
  WD_CHECK(gate_up_tiling_fits(s), "tile_mxfp8_gate_up: H = ", s.hidden, ", I = ", s.intermediate,
           " need H % 64 == 0 and I % 16 == 0");
  WD_CHECK(q && scales && q_tiled && scales_tiled, "tile_mxfp8_gate_up: a pointer is null");
  const size_t E = s.experts, H = s.hidden, I = s.intermediate;
  for (size_t e = 0; e < E; ++e)
    for (size_t r = 0; r < 2 * I; ++r) {
      const size_t row = (e * 2 * I + r) * H;
      for (size_t k = 0; k < H; k += 16)  // 16 contiguous codes stay contiguous
        std::memcpy(q_tiled + gate_up_tiled_offset(e, r, k, H, I), q + row + k, 16);
      for (size_t j = 0; j < H / kMxBlock; ++j)
        scales_tiled[gate_up_tiled_scale_offset(e, r, j, H, I)] = scales[row / kMxBlock + j];
    }
}

}  // namespace wd
