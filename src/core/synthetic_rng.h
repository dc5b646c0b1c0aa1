// Deterministic, counter-based random values usable on host and device.
//
// Every value is a pure function of (seed, tensor, index) built from integer
// arithmetic and one exact float scaling, so the CPU and the GPU produce
// bit-identical tensors whatever the thread or block decomposition.
//
// "Normal" samples are the classic Irwin–Hall sum of twelve 16-bit uniforms
// minus their mean: mean 0, variance 1 - 2^-32, a bell bounded at ±6σ (the
// CLT sum; kurtosis 2.9 vs 3). Scaling by 2^-16 is exact.
#pragma once

#include <cstdint>

#include "warpdecode/formats.h"

namespace wd::rng {

WD_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

WD_HD uint64_t hash(uint64_t seed, uint32_t tensor, uint64_t index, uint32_t lane) {
  uint64_t h = splitmix64(seed ^ (uint64_t(tensor) << 56) ^ (uint64_t(lane) << 48));
  return splitmix64(h ^ index);
}

// Standard normal (Irwin–Hall 12) sample.
WD_HD float normal(uint64_t seed, uint32_t tensor, uint64_t index) {
  int32_t sum = 0;
  for (uint32_t j = 0; j < 3; ++j) {
    const uint64_t h = hash(seed, tensor, index, j);
    sum += int32_t(h & 0xFFFF) + int32_t((h >> 16) & 0xFFFF) + int32_t((h >> 32) & 0xFFFF) +
           int32_t(h >> 48);
  }
  return float(sum - 393210) * (1.0f / 65536.0f);
}

// Uniform in [0, 1) with 24 bits.
WD_HD float uniform(uint64_t seed, uint32_t tensor, uint64_t index) {
  return float(hash(seed, tensor, index, 7) >> 40) * (1.0f / 16777216.0f);
}

// Synthetic weight: N(0, stddev), with a fraction of outliers scaled up.
WD_HD float weight(uint64_t seed, uint32_t tensor, uint64_t index, float stddev,
                   float outlier_fraction, float outlier_scale) {
  float v = normal(seed, tensor, index) * stddev;
  if (outlier_fraction > 0.0f && uniform(seed, tensor, index) < outlier_fraction) v *= outlier_scale;
  return v;
}

}  // namespace wd::rng
