// normkit bench — every implementation is checked against the fp64 oracle
// before it is timed, so no table shows the speed of a wrong answer (a
// swapped argument, variance read as rstd, a wrong dtype).
//
// This is a check of the bench's wiring, not of normkit's error contract
// (the test suite asserts that): it compares the first rows of one call's
// outputs with the oracle (src/reference) under a bound that any float
// implementation, the naive sequential sums included, must meet:
//   |out − ref| ≤ u_out·|ref| + 2·(D + 4)·u_f32·scale
// where (D + 4)·u is the worst-case relative error of a float sum of D terms
// plus the few roundings after it (linear growth: sequential sums are
// allowed), counted twice because two computed quantities (the mean and
// rstd, or mean(g) and mean(g·x̂)) carry it into each output, and scale is
// the magnitude of the output's terms:
//   y : |g|·(|x̂| + rstd·mean|x|) + |bias|
//   dx: rstd·(|g·dy| + mean|g·dy| + (|x̂| + rstd·mean|x|)·mean|g·dy·x̂|)
// h = x + residual of the fused ops is one rounding: u_out·|x + residual|.
// The parameter gradients, sums over the rows, are checked whole, against
// the oracle over every row, under the like bound of a float sum of `rows`
// terms (bench_check.cc, check_gradients).
#pragma once

#include <string>

#include "measure/traffic.hpp"

namespace normkit::bench {

// The traffic model, timing and ceilings live in measure/, shared with
// `normkit profile` and the lab.
using namespace normkit::measure;

// Rows of each call that are checked (from row 0 of buffer set 0).
inline constexpr std::int64_t kCheckedRows = 2;

// Before a backward is run for checking: writes the oracle's statistics of
// every row into set t's mean and rstd arrays — as rstd, or as the variance
// 1/rstd² − eps when the implementation takes the variance (oneDNN). The
// parameter gradients sum over every row, so every row's must be right.
void write_oracle_stats(const Op& op, const Shape& s, const Tensors& t, bool variance);

// After one call on set t: "" when the checked rows and the parameter
// gradients are within their bounds, otherwise a sentence naming the array,
// the element, the values and the bound.
std::string check_outputs(const Op& op, const Shape& s, const Tensors& t);

}  // namespace normkit::bench
