// How many K ranges (slices: warps or warpgroups of one block) a streaming
// decode GEMM splits each weight tile into — the host-side choice of
// classical_stream_gemm.cu and classical_stream_wgmma.cu. Pure C++: the CPU
// tests check it.
//
// A slice's time is about its rounds (per_round K units each: a round of
// loads in flight while the previous one is computed). The base choice is
// the fewest slices that give the least rounds per slice with base_slices
// slices (e.g. 6 rounds over 4: 3 slices of 2). A grid that would leave the
// device partly idle (decode at B = 1: a few experts' tiles) is split further,
// up to max_slices (and no more slices than units), taking the count that
// minimises waves × rounds per slice.
#pragma once

#include <algorithm>

namespace wd::kernels {

inline int choose_k_slices(int units, int per_round, int base_slices, int max_slices, long tiles, int warps_per_slice,
                           long resident_warps) {
  auto ceil_div = [](long a, long b) { return (a + b - 1) / b; };
  const int rounds = int(ceil_div(units, per_round));
  const int per_slice = int(ceil_div(rounds, base_slices));
  int slices = int(ceil_div(rounds, per_slice));
  if (tiles * slices * warps_per_slice < resident_warps) {
    long best = -1;
    for (int s = slices; s <= std::min(max_slices, units); ++s) {
      const long waves = ceil_div(tiles * s * warps_per_slice, resident_warps);
      const long cost = waves * ceil_div(ceil_div(units, s), per_round);
      if (best < 0 || cost < best) best = cost, slices = s;
    }
  }
  return slices;
}

}  // namespace wd::kernels
