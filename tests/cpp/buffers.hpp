// Test data: the project's typed arrays (src/support/array.hpp), filled with
// seeded normal values.
#pragma once

#include <cstdint>
#include <random>

#include "support/array.hpp"

namespace normkit::test {

using support::Array;
using support::store;

// Fill with N(mean, sd) values rounded to the dtype.
inline void fill_normal(Array& b, std::mt19937_64& rng, double mean = 0.0, double sd = 1.0) {
  std::normal_distribution<double> dist(mean, sd);
  for (std::int64_t r = 0; r < b.rows(); ++r)
    for (std::int64_t j = 0; j < b.cols(); ++j) b.set(r, j, dist(rng));
}

// A vector buffer (1 row of n) with N(mean, sd) values.
inline Array random_vector(DType t, std::int64_t n, std::mt19937_64& rng, double mean, double sd) {
  Array b(t, 1, n);
  fill_normal(b, rng, mean, sd);
  return b;
}

}  // namespace normkit::test
