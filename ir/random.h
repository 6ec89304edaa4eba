// Counter-based random numbers: element i of a random op depends only on (seed, i), so any
// backend and any split of the work gives the same values.
#pragma once

#include <cmath>
#include <cstdint>

namespace ember::random {

inline uint64_t mix(uint64_t seed, uint64_t counter) {
  // splitmix64 of a keyed counter
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + counter * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 53 random bits.
inline double unit(uint64_t seed, uint64_t counter) {
  return static_cast<double>(mix(seed, counter) >> 11) * 0x1.0p-53;
}

inline double uniform(uint64_t seed, uint64_t i, double low, double high) {
  return low + (high - low) * unit(seed, i);
}

// Box-Muller on two independent uniforms.
inline double normal(uint64_t seed, uint64_t i, double mean, double std) {
  double u1 = unit(seed, 2 * i), u2 = unit(seed, 2 * i + 1);
  return mean + std * std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ember::random
