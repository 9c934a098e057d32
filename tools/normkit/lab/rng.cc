#include "lab/rng.hpp"

#include <cmath>
#include <numbers>

namespace normkit::lab {

// splitmix64: a tiny generator with good statistics and a fixed definition.
std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<double> Rng::normals(std::int64_t n, double mean, double scale) {
  std::vector<double> out(static_cast<std::size_t>(n));
  for (double& v : out) v = mean + scale * normal();
  return out;
}

}  // namespace normkit::lab
