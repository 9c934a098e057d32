// Error budgets for comparing a kernel against the fp64 oracle, derived from
// the arithmetic the kernels do (the bound documented in normkit/ops.hpp).
//
// Derivation (forward; u = unit roundoff of the f32 — or f64 — accumulation):
//  * 16-bit inputs widen to f32 exactly, so all error comes from f32
//    arithmetic and from the final rounding to the output dtype.
//  * A sum of D terms accumulated in k independent lanes and then combined
//    has a rounding error bounded in practice by about √D·u·Σ|terms| (random-
//    walk growth; the worst case D·u is never approached with lane-parallel
//    sums and the test data here). We budget 4·(√D + 2)·u, the +2 covering
//    the divide, sqrt and reciprocal that follow the sum.
//  * The mean carries an absolute error of that size times mean|x|; after
//    multiplying by rstd this is an absolute error in x̂ of 4(√D+2)·u·rstd·mean|x|.
//    rstd carries a relative error of the same size, i.e. an absolute error
//    in x̂ of 4(√D+2)·u·|x̂|. Multiplying by the gain scales both by |g|; adding
//    the bias adds one rounding of |b|. |g| is read as |weight| + |offset|:
//    the gain weight + offset is itself formed in the arithmetic.
//  * Finally the result is rounded to the output dtype: u_out·|y|, and an
//    output in the subnormal range may be off by half its smallest step.
// So |y − y_ref| ≤ u_out·|y_ref| + 4(√D+2)·u·(|g|(|x̂| + rstd·mean|x|) + |b|) + tiny.
//
// Backward: the same argument applied term by term to
//   dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
// gives a budget proportional to rstd·(|g| + mean|g| + |x̂|·mean|g·x̂|) plus the
// error x̂ carries (above) times mean|g·x̂|·rstd; dweight = Σ_rows dy·x̂ adds
// √rows growth from the sum over rows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bounds.hpp"
#include "normkit/tensor.hpp"
#include "reference.hpp"

namespace normkit::test {

using reference::accum_roundoff;
using reference::accum_smallest_normal;
using reference::budget;
using reference::growth;
using reference::half_min_subnormal;
using reference::unit_roundoff;

// A scale computed from finite operands that overflows the double range:
// kept finite, as the largest double, so that a comparison sees a scale past
// every arithmetic's range (where the result may honestly overflow either
// way), not a non-finite one (which means a non-finite operand). Seen with
// |gain| = DBL_MAX and |x̂| = 1 + ulp in the oracle.
inline double saturated(double scale) {
  return std::isinf(scale) ? std::numeric_limits<double>::max() : scale;
}

// The gain's size as the budget reads it, per column: |weight| +
// |weight_offset|, not the size of their sum. The kernels form the sum in
// their arithmetic (the offset rounded to it first), so where the two cancel
// the error is relative to their own sizes (docs/numerics.md §2). An absent
// weight is a gain of 1 (its offset is 0).
inline std::vector<double> gain_size(ConstVector weight, std::int64_t D, double offset) {
  std::vector<double> g = reference::to_double(weight, D, 1.0);
  for (double& v : g) v = std::abs(v) + std::abs(offset);
  return g;
}

// Dense double copies of a kernel's inputs, and the per-element scales that
// the budget multiplies. gain_size (above) and bias are (D), with an absent
// bias filled in as 0.
struct Scales {
  std::vector<double> y;        // (rows·D)  |g|(|x̂| + rstd·mean|x|) + |b|
  std::vector<double> dx;       // (rows·D)
  std::vector<double> dweight;  // (D)
  std::vector<double> dbias;    // (D)
};

// xhat and rstd from the oracle's statistics; layer: LayerNorm (centred);
// x_dtype: the activations' dtype, whose arithmetic's λ bounds the
// statistics' absolute error for subnormal rows (f32 for data that has none).
inline Scales scales(const std::vector<double>& x, const std::vector<double>* dy, std::int64_t rows,
                     std::int64_t D, const std::vector<double>& gain_size, const std::vector<double>& bias,
                     const reference::Forward& ref, bool layer, DType x_dtype = DType::f32) {
  Scales s{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(D, 0.0),
           std::vector<double>(D, 0.0)};
  std::vector<double> xhat(D);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * D];
    const double rstd = ref.rstd[r];
    const double mu = layer ? ref.mean[r] : 0.0;
    double mean_abs = 0;
    for (std::int64_t j = 0; j < D; ++j) mean_abs += std::abs(xr[j]);
    mean_abs /= static_cast<double>(D);
    // Absolute error in x̂, per growth·u: |x̂| from rstd's relative error;
    // rstd·(mean|x| + λ) from the mean's error, floored at λ for rows of
    // subnormals; and, when rstd or x̂ themselves land below λ (a huge eps),
    // (|x − mean| + 1)·λ from their absolute rounding. `xerr` holds
    // everything but |x̂|; the last term is negligible unless values are tiny.
    const double lambda = accum_smallest_normal(x_dtype);
    const double shift_err = rstd * (mean_abs + lambda);
    std::vector<double> xerr(D);
    for (std::int64_t j = 0; j < D; ++j) {
      xhat[j] = (xr[j] - mu) * rstd;
      xerr[j] = shift_err + (std::abs(xr[j] - mu) + 1.0) * lambda;
      const double y_scale = std::abs(gain_size[j]) * (std::abs(xhat[j]) + xerr[j]) + std::abs(bias[j]);
      const bool finite_operands = std::isfinite(gain_size[j]) && std::isfinite(xhat[j]) && std::isfinite(xerr[j]) &&
                                   std::isfinite(bias[j]);
      s.y[r * D + j] = finite_operands ? saturated(y_scale) : y_scale;
    }
    if (dy == nullptr) continue;
    // The gradient's terms (g = gain·dy and the row means of g and g·x̂) are
    // formed in the same arithmetic, so they carry the same λ floor: for
    // subnormal dy their errors are absolute, u·λ per operation, and rstd
    // multiplies them afterwards.
    const double* dyr = &(*dy)[r * D];
    double mean_g = 0, mean_gx = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      const double g = std::abs(gain_size[j] * dyr[j]);
      mean_g += g;
      mean_gx += g * (std::abs(xhat[j]) + xerr[j]);
      s.dweight[j] += std::abs(dyr[j]) * (std::abs(xhat[j]) + xerr[j]) + lambda;
      s.dbias[j] += std::abs(dyr[j]) + lambda;
    }
    mean_g = mean_g / static_cast<double>(D) + lambda;
    mean_gx = mean_gx / static_cast<double>(D) + lambda;
    for (std::int64_t j = 0; j < D; ++j) {
      const double g = std::abs(gain_size[j] * dyr[j]) + lambda;
      s.dx[r * D + j] = rstd * (g + mean_g + (std::abs(xhat[j]) + xerr[j]) * mean_gx);
    }
  }
  return s;
}

// Per-row budget scales of the statistics, for the budget's growth·u term:
//   mean: mean|x| + λ (the same error as in x̂'s shift, before rstd);
//   rstd: rstd·(1 + growth·u·s²), s = rstd·(mean|x| + λ). The first term is
//         the relative error of the sum of squares and the root; the second
//         is the two-pass variance's one extra term: the mean's error δ ≤
//         growth·u·mean|x| enters the variance squared, a relative error
//         (δ·rstd)² = (growth·u·s)² = growth·u·(growth·u·s²). It is negligible
//         for a well-scaled row (s ≈ 1); for a row with a large common offset
//         it is what f32 allows, while a one-pass E[x²] − mean² variance
//         (error growth·u·s²) is far past it. The kernels take the one-pass
//         variance only for rows with |mean| ≤ std/4, where its error is
//         within 0.79·growth·u of rstd (docs/numerics.md §2).
struct StatScales {
  std::vector<double> mean, rstd;  // (rows)
};

inline StatScales stat_scales(const std::vector<double>& x, std::int64_t rows, std::int64_t D,
                              const reference::Forward& ref, DType x_dtype) {
  StatScales s{std::vector<double>(rows, 0.0), std::vector<double>(rows, 0.0)};
  const double gu = growth(D) * accum_roundoff(x_dtype);
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean_abs = 0;
    for (std::int64_t j = 0; j < D; ++j) mean_abs += std::abs(x[r * D + j]);
    s.mean[r] = mean_abs / static_cast<double>(D) + accum_smallest_normal(x_dtype);
    const double shift = ref.rstd[r] * s.mean[r];
    s.rstd[r] = ref.rstd[r] * (1.0 + gu * shift * shift);
  }
  return s;
}

// Compares n values of `got` (a matrix view or vector, widened to double)
// with `ref`. On failure, reports the worst element: index, value, reference,
// budget and how many budgets past it is.
inline ::testing::AssertionResult within_budget(const std::vector<double>& got, const std::vector<double>& ref,
                                                const std::vector<double>& scale, DType out, DType acc,
                                                double growth_factor, const std::string& what) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << what << ": size mismatch";
  double worst_ratio = 0;
  std::size_t worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double b = budget(out, acc, growth_factor, ref[i], scale[i]);
    const double err = std::abs(got[i] - ref[i]);
    const bool same_nonfinite = !std::isfinite(ref[i]) && (std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i]);
    if (same_nonfinite) continue;
    const double ratio = std::isnan(err) ? INFINITY : err / b;
    if (ratio > 1.0) ++bad;
    if (ratio > worst_ratio || (std::isnan(err) && worst_ratio != INFINITY)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(10);
  os << what << ": " << bad << " of " << got.size() << " elements past the budget; worst at index " << worst
     << ": got " << got[worst] << ", reference " << ref[worst] << ", budget "
     << budget(out, acc, growth_factor, ref[worst], scale[worst]) << " (" << worst_ratio << "x the budget)";
  return ::testing::AssertionFailure() << os.str();
}

}  // namespace normkit::test
