// Numeric extremes through the public API, forward and backward, each
// against the fp64 oracle with the documented budget (tolerance.hpp):
// values whose squares overflow f32, subnormals, rows of one repeated value,
// a huge outlier in a long row, a large common offset, means on both sides of
// the one-pass variance's limit, D = 1, D = 2^20, the
// 16-bit formats at their largest finite values, and eps = 0 on a zero row.
//
// The statistics are checked with stat_scales (tolerance.hpp): the
// first-order budget of test_forward.cc plus the one term a two-pass
// variance adds for rows with a large common offset.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

// A few cases per activation dtype: both ops, parameters in x's dtype and,
// for 16-bit x, in f32; LayerNorm with weight and bias, RMSNorm with a
// weight and with Gemma's offset.
std::vector<Case> cases_for(DType x) {
  std::vector<Case> out = {{NormKind::layer_norm, x, x, Affine::both}, {NormKind::rms_norm, x, x, Affine::weight}};
  if (x == DType::f16 || x == DType::bf16) {
    out.push_back({NormKind::layer_norm, x, DType::f32, Affine::none});
    out.push_back({NormKind::rms_norm, x, DType::f32, Affine::offset});
  }
  return out;
}

using Gen = std::function<double(std::int64_t r, std::int64_t j)>;

// A double for a trace message, in any magnitude.
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

Array make(DType t, std::int64_t rows, std::int64_t D, const Gen& gen) {
  Array b(t, rows, D);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < D; ++j) b.set(r, j, gen(r, j));
  return b;
}

// A stored statistic that the exact value overflows (rstd = 1/0 with
// eps = 0) is correctly Inf; compare against the value as the dtype holds it.
std::vector<double> as_stored(std::vector<double> v, DType t) {
  for (double& e : v) {
    unsigned char one[8];
    store(one, t, 0, e);
    if (std::isinf(reference::load(one, t, 0))) e = reference::load(one, t, 0);
  }
  return v;
}

// The kernels' forward of case c on x, checked against the oracle: y with the
// documented bound, mean and rstd with the statistics' budget above.
void expect_forward(const Case& c, const Array& x, const Params& p, double eps) {
  SCOPED_TRACE(name_of(c) + " forward, eps=" + sci(eps));
  const std::int64_t rows = x.rows(), D = x.cols();
  const DType st = stat_dtype(c.x);
  const reference::Forward ref = reference_forward(c, x.cmat(), p, eps);
  Array y(c.x, rows, D), mean(st, 1, rows), rstd(st, 1, rows);
  if (c.op == NormKind::layer_norm)
    layer_norm(x.cmat(), p.w(), p.b(), eps, y.mat(), mean.vec(), rstd.vec());
  else
    rms_norm(x.cmat(), p.w(), eps, y.mat(), rstd.vec(), p.offset);

  const std::vector<double> xv = x.values();
  const Scales s = scales(xv, nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm, c.x);
  EXPECT_TRUE(within_budget(y.values(), ref.y, s.y, c.x, c.x, growth(D), "y"));

  const StatScales ss = stat_scales(xv, rows, D, ref, c.x);
  EXPECT_TRUE(within_budget(rstd.values(), as_stored(ref.rstd, st), ss.rstd, st, c.x, growth(D), "rstd"));
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(mean.values(), ref.mean, ss.mean, st, c.x, growth(D), "mean"));
  }
}

// The backward of case c at x with upstream gradient dy, statistics from the
// kernels' own forward as in training, against the oracle's gradients.
void expect_backward(const Case& c, const Array& x, const Array& dy, const Params& p, double eps) {
  SCOPED_TRACE(name_of(c) + " backward, eps=" + sci(eps));
  const std::int64_t rows = x.rows(), D = x.cols();
  const DType st = stat_dtype(c.x);
  const reference::Forward fwd = reference_forward(c, x.cmat(), p, eps);
  const reference::Backward ref = reference_backward(c, dy.cmat(), x.cmat(), p, eps);
  Array y(c.x, rows, D), mean(st, 1, rows), rstd(st, 1, rows), dx(c.x, rows, D);
  Array dweight(c.w, 1, D), dbias(c.w, 1, D);
  if (c.op == NormKind::layer_norm) {
    layer_norm(x.cmat(), p.w(), p.b(), eps, y.mat(), mean.vec(), rstd.vec());
    layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(),
                        dbias.vec());
  } else {
    rms_norm(x.cmat(), p.w(), eps, y.mat(), rstd.vec(), p.offset);
    rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), p.offset);
  }
  const std::vector<double> xv = x.values(), dyv = dy.values();
  const Scales s = scales(xv, &dyv, rows, D, p.gain_size, p.shift, fwd, c.op == NormKind::layer_norm, c.x);
  EXPECT_TRUE(within_budget(dx.values(), ref.dx, s.dx, c.x, c.x, growth(D), "dx"));
  EXPECT_TRUE(within_budget(dweight.values(), ref.dweight, s.dweight, c.w, c.x, growth(D) + growth(rows),
                            "dweight"));
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(dbias.values(), ref.dbias, s.dbias, c.w, c.x, growth(rows), "dbias"));
  }
}

// Forward and backward of every case of dtype t on the rows gen produces.
void expect_both(DType t, std::int64_t rows, std::int64_t D, const Gen& gen, double eps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Array x = make(t, rows, D, gen);
  Array dy(t, rows, D);
  fill_normal(dy, rng);
  for (const Case& c : cases_for(t)) {
    const Params p = make_params(c, D, rng);
    expect_forward(c, x, p, eps);
    expect_backward(c, x, dy, p, eps);
  }
}

// N(0, 1) values from a generator seeded per test, scaled.
Gen normal(std::uint64_t seed, double scale, double offset = 0.0) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  auto dist = std::make_shared<std::normal_distribution<double>>(0.0, 1.0);
  return [=](std::int64_t, std::int64_t) { return offset + scale * (*dist)(*rng); };
}

// |x| ≈ 1e20: x² ≈ 1e40 overflows f32, and so does every partial sum of
// squares; the statistics must be formed without overflowing. 1e30 and
// 1e35 push further (x² ≈ 1e70), up to a tenth of f32's largest value.
TEST(Extremes, F32SquaresOverflow) {
  for (double scale : {1e20, 1e30, 1e37}) {
    SCOPED_TRACE("scale=" + sci(scale));
    expect_both(DType::f32, 3, 1000, normal(1, scale), 1e-5, 2);
    // One sign throughout, so the mean is as large as the values.
    expect_both(DType::f32, 2, 257, [g = normal(3, 0.25 * scale, scale)](auto r, auto j) { return std::abs(g(r, j)); },
                1e-5, 4);
    // One value throughout: the variance is exactly 0, so LayerNorm's y is
    // the bias and RMSNorm's the gain (x·rstd = 1).
    expect_both(DType::f32, 1, 300, [scale](auto, auto) { return 3 * scale; }, 1e-5, 5);
  }
}

// The 16-bit formats at their largest finite values: f16 65504 (its
// squares fit in f32 easily), bf16 ≈ 3.39e38 (f32's range: its squares, and
// even a sum of a few values, overflow f32).
TEST(Extremes, SixteenBitMaxFinite) {
  const double f16_max = 65504.0;
  const double bf16_max = reference::load(std::array<std::uint16_t, 1>{0x7f7f}.data(), DType::bf16, 0);
  for (const auto& t_max : {std::pair{DType::f16, f16_max}, std::pair{DType::bf16, bf16_max}}) {
    const DType t = t_max.first;
    const double mx = t_max.second;  // a variable, not a binding: lambdas capture it
    SCOPED_TRACE(std::string(dtype_name(t)));
    // Every element ±max.
    expect_both(t, 2, 64, [mx](auto r, auto j) { return (r + j) % 3 == 0 ? -mx : mx; }, 1e-5, 5);
    // All +max: LayerNorm of a constant row, RMSNorm of ones.
    expect_both(t, 1, 4096, [mx](auto, auto) { return mx; }, 1e-5, 6);
    // Values spread over [max/4, max] with random signs.
    auto g = normal(7, 1.0);
    expect_both(t, 3, 777, [g, mx](auto r, auto j) {
      const double v = g(r, j);
      return (v < 0 ? -1 : 1) * mx * (0.25 + 0.75 * std::min(1.0, std::abs(v) / 3));
    }, 1e-5, 8);
  }
}

// Subnormal inputs. With eps = 1e-5 the eps dominates and y is tiny; with
// eps = 0 y is O(1) and the statistic of values whose squares underflow
// (1e-30 in f32, whose square 1e-60 is below f32's range) must be formed
// without underflowing.
TEST(Extremes, SubnormalAndTinyRows) {
  const std::vector<std::pair<DType, double>> subnormal = {
      {DType::f32, 1e-41}, {DType::bf16, 1e-40}, {DType::f16, 1e-6}, {DType::f64, 1e-310}};
  for (auto [t, scale] : subnormal) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " subnormal");
    expect_both(t, 3, 300, normal(9, scale), 1e-5, 10);
  }
  // eps = 0: the exact rstd of a subnormal f32 row (~1e41) is beyond f32, so
  // the stored rstd is Inf; y is still the normalized row. (Forward only:
  // dx ~ rstd·dy is beyond the range of these dtypes.)
  for (auto [t, scale] : {std::pair{DType::f32, 1e-41}, std::pair{DType::bf16, 1e-40}, std::pair{DType::f16, 1e-6}}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " subnormal, eps = 0");
    std::mt19937_64 rng(11);
    const Array x = make(t, 3, 300, normal(12, scale));
    for (const Case& c : cases_for(t)) expect_forward(c, x, make_params(c, 300, rng), 0.0);
  }
  // Tiny normal values, eps = 0: forward and backward (rstd ~1e30 fits).
  expect_both(DType::f32, 3, 300, normal(13, 1e-30), 0.0, 14);
}

// Subnormal gains with large rows and gradients: g = weight·dy is normal,
// but the backward's terms R·g and x̂·mean(g·x̂)·R are near the subnormal
// range and cancel (D = 1 RMSNorm: dx is R·g·eps/(x² + eps), ~0). Where the
// affine form's constants underflow (K1 = −R²·mean(g·x̂) = 0 in f64) they
// no longer cancel: the kernels must fall back to the x̂ form.
TEST(Extremes, SubnormalGainsBackward) {
  for (DType t : {DType::f64, DType::f32}) {
    const double tiny = reference::smallest_subnormal(t);
    for (std::int64_t D : {std::int64_t{1}, std::int64_t{7}, std::int64_t{64}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " D=" + std::to_string(D));
      std::mt19937_64 rng(43);
      const Array x = make(t, 3, D, normal(44, 1e20));
      Array dy = make(t, 3, D, normal(45, 5e19));
      for (const Case& c : {Case{NormKind::rms_norm, t, t, Affine::weight}, Case{NormKind::layer_norm, t, t, Affine::both}}) {
        Params p = make_params(c, D, rng);
        for (std::int64_t j = 0; j < D; ++j) p.weight.set(0, j, static_cast<double>(1 + j % 3) * (j % 2 ? -tiny : tiny));
        p.gain_size = gain_size(p.w(), D, p.offset);
        expect_backward(c, x, dy, p, 2.3e21);
      }
    }
  }
}

// An RMSNorm offset that cancels the weight: gains ~1e-5 from weight ≈ 0.12
// and an offset not representable in f32. The kernels round the offset to
// their arithmetic and form the sum there, so the gain's error is relative to
// |weight| + |offset|, as the bound reads |g| (docs/numerics.md §2).
TEST(Extremes, OffsetCancellingTheWeight) {
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::int64_t rows = 3, D = 59;
    std::mt19937_64 rng(46);
    const Array x = make(t, rows, D, normal(47, 1.0));
    const Array dy = make(t, rows, D, normal(48, 1.0));
    const Case c{NormKind::rms_norm, t, t == DType::f64 ? DType::f64 : DType::f32, Affine::offset};
    Params p = make_params(c, D, rng);
    p.offset = -0.1211406;
    for (std::int64_t j = 0; j < D; ++j) p.weight.set(0, j, 0.1211788 + 1e-6 * static_cast<double>(j - D / 2));
    p.gain_size = gain_size(p.w(), D, p.offset);
    expect_forward(c, x, p, 1e-5);
    expect_backward(c, x, dy, p, 1e-5);
  }
}

// Rows of one repeated value: the variance is exactly 0, so LayerNorm gives
// the bias exactly; a sum of D copies of one value is the case where
// rounding errors of a running sum all have the same sign (the √D growth of
// the budget has to come from the summation order, not from luck).
TEST(Extremes, RepeatedValueRows) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (std::int64_t D : {std::int64_t{3}, std::int64_t{4096}, std::int64_t{65537}, std::int64_t{1} << 20}) {
      // The widest rows only in the two dtypes whose sums are longest in f32.
      if (D > 65537 && (t == DType::f16 || t == DType::f64)) continue;
      for (double v : {1.1, -0.3, 3141.59}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " D=" + std::to_string(D) + " v=" + sci(v));
        expect_both(t, 1, D, [v](auto, auto) { return v; }, 1e-5, 17);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// One huge value in a long row of N(0, 1): a one-pass variance cancels
// catastrophically here, and the small elements' x̂ is all in the digits
// that remain after subtracting the mean.
TEST(Extremes, HugeOutlierInLongRow) {
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    for (double outlier : {1e4, 1e6}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " outlier=" + sci(outlier));
      auto g = normal(18, 1.0);
      expect_both(t, 2, 65537, [g, outlier](auto r, auto j) { return j == 1000 + r ? outlier : g(r, j); }, 1e-5,
                  19);
    }
  }
}

// A large common offset: 1e4 + N(0, 1). E[x²] ≈ 1e8 while the variance is
// 1, so E[x²] − mean² in f32 has no correct digit; a two-pass variance is
// fine. With noise 1e-2 the budget is loose, but the variance must still
// come out non-negative (no NaN).
TEST(Extremes, LargeOffsetSmallNoise) {
  for (DType t : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    expect_both(t, 4, 4096, normal(20, 1.0, 1e4), 1e-5, 21);
    expect_both(t, 4, 4096, normal(22, 1e-2, 1e4), 1e-5, 23);
    expect_both(t, 4, 1000, normal(24, 1.0, -3e5), 0.0, 25);
  }
}

// Rows of N(mu, 1) with mu around std/4, where the kernels switch from the
// one-pass variance Σx² − D·mean² to a centred pass (forward-inl.hpp,
// LayerStats): both sides of the switch meet the same budget. D = 4099 spans
// three statistics chunks and ends in a partial vector.
TEST(Extremes, MeanAroundTheOnePassSwitch) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (double mu : {0.1, 0.24, 0.26, 0.5, 3.0, 30.0}) {
      for (std::int64_t D : {std::int64_t{300}, std::int64_t{4099}}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " mu=" + sci(mu) + " D=" + std::to_string(D));
        expect_both(t, 6, D, normal(41, 1.0, mu), 1e-5, 42);
      }
    }
  }
}

// D = 1: LayerNorm's variance is 0 (y = bias, dx = 0); RMSNorm gives
// x/√(x² + eps).
TEST(Extremes, WidthOne) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    expect_both(t, 50, 1, normal(26, 3.0), 1e-5, 27);
    expect_both(t, 5, 1, [](auto r, auto) { return r == 0 ? 0.0 : 1e-3 * static_cast<double>(r); }, 1e-5, 28);
  }
}

// A LayerNorm row of one value has variance exactly 0, so y is the bias
// whatever eps > 0 is — also when the row is so large or eps so small that
// the kernels rescale it (f64 values of 1e19 with eps = 1e-300: eps·scale²
// underflows).
TEST(Extremes, ZeroVarianceWithTinyEps) {
  for (DType t : {DType::f64, DType::f32}) {
    // f32: 1e-80 puts 1/√eps (1e40) beyond f32, 1e-60 does not.
    const std::vector<double> eps_values = t == DType::f64 ? std::vector<double>{1e-300, 4.9406564584124654e-324}
                                                           : std::vector<double>{1e-60, 1e-80};
    for (double eps : eps_values) {
      for (std::int64_t D : {std::int64_t{1}, std::int64_t{3}}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " eps=" + sci(eps) + " D=" + std::to_string(D));
        Array x = make(t, 2, D, [](auto r, auto) { return r == 0 ? 7.8e19 : -2.5; });
        std::mt19937_64 rng(40);
        const Case c{NormKind::layer_norm, t, t, Affine::both};
        expect_forward(c, x, make_params(c, D, rng), eps);
      }
    }
  }
}

// D = 2^20: one long reduction per row.
TEST(Extremes, WidthTwoToTheTwenty) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    expect_both(t, 1, std::int64_t{1} << 20, normal(29, 2.0, 0.5), 1e-5, 30);
  }
}

// eps = 0 on a zero row: rstd = 1/0 = Inf and y = 0·Inf = NaN (documented,
// as PyTorch); LayerNorm's mean is 0. The backward takes the saved Inf and
// gives NaN in that row. The other rows are exactly what they are alone.
TEST(Extremes, ZeroEpsOnZeroRow) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (const Case& c : cases_for(t)) {
      SCOPED_TRACE(name_of(c));
      const std::int64_t rows = 3, D = 40;
      std::mt19937_64 rng(31);
      Array x(t, rows, D), dy(t, rows, D);
      fill_normal(x, rng);
      fill_normal(dy, rng);
      for (std::int64_t j = 0; j < D; ++j) x.set(1, j, 0.0);
      const Params p = make_params(c, D, rng);
      const DType st = stat_dtype(t);
      Array y(t, rows, D), mean(st, 1, rows), rstd(st, 1, rows), dx(t, rows, D), dw(c.w, 1, D), db(c.w, 1, D);
      if (c.op == NormKind::layer_norm) {
        layer_norm(x.cmat(), p.w(), p.b(), 0.0, y.mat(), mean.vec(), rstd.vec());
        layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), db.vec());
        EXPECT_EQ(mean.get(0, 1), 0.0);
      } else {
        rms_norm(x.cmat(), p.w(), 0.0, y.mat(), rstd.vec(), p.offset);
        rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), p.offset);
      }
      EXPECT_EQ(rstd.get(0, 1), INFINITY);
      for (std::int64_t j = 0; j < D; ++j) {
        EXPECT_TRUE(std::isnan(y.get(1, j))) << "y[1][" << j << "] = " << y.get(1, j);
        EXPECT_TRUE(std::isnan(dx.get(1, j))) << "dx[1][" << j << "] = " << dx.get(1, j);
      }
      // Rows 0 and 2 are the oracle's.
      for (std::int64_t r : {0, 2}) {
        Array xr(t, 1, D), dyr(t, 1, D);
        for (std::int64_t j = 0; j < D; ++j) {
          xr.set(0, j, x.get(r, j));
          dyr.set(0, j, dy.get(r, j));
        }
        const reference::Forward ref = reference_forward(c, xr.cmat(), p, 0.0);
        const Scales s = scales(xr.values(), nullptr, 1, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm, c.x);
        std::vector<double> got(D);
        for (std::int64_t j = 0; j < D; ++j) got[j] = y.get(r, j);
        EXPECT_TRUE(within_budget(got, ref.y, s.y, t, t, growth(D), "y row " + std::to_string(r)));
      }
    }
  }
}

}  // namespace
}  // namespace normkit::test
