// The lab's random numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace normkit::lab {

// Deterministic pseudo-random numbers, identical on every platform (the
// standard distributions are not), so every run of the lab sees the same data.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box–Muller)
  std::vector<double> normals(std::int64_t n, double mean = 0.0, double scale = 1.0);

 private:
  std::uint64_t state_;
};

}  // namespace normkit::lab
