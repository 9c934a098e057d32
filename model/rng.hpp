// normkit model — the one random source of a run (initialization and batch
// sampling), seeded once. SplitMix64 and Box–Muller are written out rather
// than taken from <random>, whose distributions differ between standard
// libraries: a seed gives the same run everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace normkit::model {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n >= 1.
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  // Standard normal.
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace normkit::model
