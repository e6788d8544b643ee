// gradus/core/rng.hpp — the explicit random number generator every random thing takes.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace gradus {

/// xoshiro256** seeded through splitmix64: fast, 2^256 period, identical on every platform,
/// and its whole state is four words (saved with checkpoints via `state()` / `set_state()`).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0x9E3779B97F4A7C15ull) { this->seed(seed); }

  void seed(uint64_t s) {
    for (auto& w : s_) {
      s += 0x9E3779B97F4A7C15ull;
      uint64_t z = s;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n ? uint64_t((static_cast<unsigned __int128>(next()) * n) >> 64) : 0; }
  /// Standard normal (Box–Muller; no cached second value, so `state()` is the whole state).
  double normal() {
    double u1;
    do u1 = uniform(); while (u1 <= 0.0);
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double normal(double mean, double stddev) { return mean + stddev * normal(); }

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

}  // namespace gradus
