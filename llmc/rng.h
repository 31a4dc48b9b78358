// A small, fully deterministic random number generator whose whole state is one uint64_t, so it
// can be saved in a checkpoint and restored exactly. SplitMix64 (Steele, Lea, Flood 2014): the
// state advances by the golden-ratio increment and each output is a bijective mix of the state.
#pragma once
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace llmc {

struct Rng {
  uint64_t state;

  explicit Rng(uint64_t seed = 0) : state(seed) {}

  uint64_t next_u64() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 24 random bits (every value exactly representable as a float).
  float uniform() { return float(next_u64() >> 40) * (1.0f / 16777216.0f); }

  // Uniform integer in [0, n) for 0 < n < 2^32 (Lemire's multiply-shift of 32 random bits).
  uint64_t below(uint64_t n) {
    return uint64_t((static_cast<unsigned __int128>(next_u64() >> 32) * n) >> 32);
  }

  // Standard normal via Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  float normal() {
    double u1 = 1.0 - double(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    double u2 = double(next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
};

// Fisher-Yates: every permutation of v equally likely given uniform below().
template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(rng.below(uint64_t(i)))]);
}

}  // namespace llmc
