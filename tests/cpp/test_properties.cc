// Properties of the norms that hold for any correct implementation, and the
// worked examples of the source texts, checked through the public API.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "buffers.hpp"
#include "normkit/ops.hpp"

namespace normkit::test {
namespace {

std::vector<double> layer(const std::vector<double>& x, double eps = 1e-12) {
  Array b(DType::f64, 1, static_cast<std::int64_t>(x.size())), y(DType::f64, 1, b.cols());
  for (std::size_t j = 0; j < x.size(); ++j) b.set(0, static_cast<std::int64_t>(j), x[j]);
  layer_norm(b.cmat(), {}, {}, eps, y.mat());
  return y.values();
}

std::vector<double> rms(const std::vector<double>& x, double eps = 1e-12) {
  Array b(DType::f64, 1, static_cast<std::int64_t>(x.size())), y(DType::f64, 1, b.cols());
  for (std::size_t j = 0; j < x.size(); ++j) b.set(0, static_cast<std::int64_t>(j), x[j]);
  rms_norm(b.cmat(), {}, eps, y.mat());
  return y.values();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], tol) << "element " << j;
}

// The texts' hand-worked vectors, printed to 3 decimals there.
TEST(WorkedExamples, FromTheTexts) {
  expect_near(layer({1, 2, 3, 4}), {-1.342, -0.447, 0.447, 1.342}, 5e-4);
  expect_near(rms({1, 2, 3, 4}), {0.365, 0.730, 1.095, 1.461}, 5e-4);
  // (1,2,3): mean 2, var 2/3 → ±√1.5; rms √(14/3).
  expect_near(layer({1, 2, 3}), {-std::sqrt(1.5), 0.0, std::sqrt(1.5)}, 1e-9);
  expect_near(rms({1, 2, 3}), {1 / std::sqrt(14.0 / 3), 2 / std::sqrt(14.0 / 3), 3 / std::sqrt(14.0 / 3)}, 1e-9);
  // (2,2,4,4): mean 3, var 1 → ±1; rms √10.
  expect_near(layer({2, 2, 4, 4}), {-1, -1, 1, 1}, 1e-9);
  expect_near(rms({2, 2, 4, 4}), {2 / std::sqrt(10.0), 2 / std::sqrt(10.0), 4 / std::sqrt(10.0), 4 / std::sqrt(10.0)},
              1e-9);
  // [1,3] and [101,103] both normalize to [−1, 1]: the offset is gone.
  expect_near(layer({1, 3}), {-1, 1}, 1e-9);
  expect_near(layer({101, 103}), {-1, 1}, 1e-9);
  // Post-norm with a zero sublayer on [1,2,3,4], eps 1e-5 as in the texts.
  expect_near(layer({1, 2, 3, 4}, 1e-5), {-1.34164, -0.44721, 0.44721, 1.34164}, 5e-5);
}

TEST(Properties, LayerNormShiftInvariantRmsNormNot) {
  const std::vector<double> x = {0.3, -1.2, 2.5, 0.7, -0.4};
  std::vector<double> shifted = x;
  for (double& v : shifted) v += 5.0;
  expect_near(layer(shifted), layer(x), 1e-12);
  const auto a = rms(x), b = rms(shifted);
  double diff = 0;
  for (std::size_t j = 0; j < a.size(); ++j) diff = std::max(diff, std::abs(a[j] - b[j]));
  EXPECT_GT(diff, 0.1) << "RMSNorm does not remove a common shift";
}

TEST(Properties, PositiveScaleInvariantUpToEpsAndSignFlip) {
  const std::vector<double> x = {0.3, -1.2, 2.5, 0.7, -0.4};
  for (double c : {1e-2, 3.0, 1e3}) {
    std::vector<double> scaled = x, flipped = x;
    for (double& v : scaled) v *= c;
    for (double& v : flipped) v *= -c;
    // With eps = 0 the invariance is exact up to rounding.
    expect_near(layer(scaled, 0.0), layer(x, 0.0), 1e-12);
    expect_near(rms(scaled, 0.0), rms(x, 0.0), 1e-12);
    auto neg = layer(x, 0.0);
    for (double& v : neg) v = -v;
    expect_near(layer(flipped, 0.0), neg, 1e-12);
    auto rneg = rms(x, 0.0);
    for (double& v : rneg) v = -v;
    expect_near(rms(flipped, 0.0), rneg, 1e-12);
  }
  // With eps > 0 a small input is shrunk: the effect is eps/(2·var) to first order.
  std::vector<double> tiny = x;
  for (double& v : tiny) v *= 1e-3;
  const auto big = rms(x, 1e-5), small = rms(tiny, 1e-5);
  double ms = 0;
  for (double v : tiny) ms += v * v;
  ms /= static_cast<double>(tiny.size());
  EXPECT_NEAR(small[0] / big[0], 1.0 / std::sqrt(1.0 + 1e-5 / ms) * std::sqrt(1.0 + 1e-5 / (ms * 1e6)), 1e-9);
}

TEST(Properties, ConstantRowGivesBiasZeroRowGivesZero) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const std::int64_t D = 37;
    Array x(t, 2, D), y(t, 2, D), w(t, 1, D), b(t, 1, D);
    std::mt19937_64 rng(2);
    fill_normal(w, rng);
    fill_normal(b, rng);
    for (std::int64_t j = 0; j < D; ++j) {
      x.set(0, j, 3.25);
      x.set(1, j, 0.0);
    }
    layer_norm(x.cmat(), w.cvec(), b.cvec(), 1e-5, y.mat());
    for (std::int64_t j = 0; j < D; ++j) EXPECT_EQ(y.get(0, j), b.get(0, j)) << dtype_name(t);
    rms_norm(x.cmat(), w.cvec(), 1e-5, y.mat());
    for (std::int64_t j = 0; j < D; ++j) EXPECT_EQ(y.get(1, j), 0.0) << dtype_name(t);
  }
}

// fp16's largest squares fit in the f32 statistic: the texts' overflow trap.
TEST(Properties, Fp16LargeValuesDoNotOverflowTheStatistic) {
  Array x(DType::f16, 2, 4), y(DType::f16, 2, 4);
  const double v[4] = {1000, 2000, 3000, 4000};
  for (std::int64_t j = 0; j < 4; ++j) {
    x.set(0, j, v[j]);
    x.set(1, j, 65504.0 * (j % 2 ? 1 : -1));
  }
  rms_norm(x.cmat(), {}, 1e-5, y.mat());
  const double want[4] = {0.365148, 0.730297, 1.095445, 1.460593};
  for (std::int64_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(y.get(0, j), want[j], 2e-3);  // f16 rounding: 2⁻¹¹·1.46 ≈ 7e-4
    EXPECT_EQ(std::abs(y.get(1, j)), 1.0);
  }
}

// A non-finite value poisons its own row and nothing else: the other rows
// are bitwise what they are without it. In its own row IEEE arithmetic
// decides (LayerNorm: NaN throughout; RMSNorm with an Inf: rstd = 0, so NaN
// at the Inf and 0 elsewhere — as in PyTorch).
TEST(Properties, NonFiniteStaysInItsRow) {
  for (double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}}) {
    for (bool layer_op : {true, false}) {
      Array x(DType::f32, 3, 9), y(DType::f32, 3, 9), clean_y(DType::f32, 3, 9);
      std::mt19937_64 rng(4);
      fill_normal(x, rng);
      Array clean = x;
      x.set(1, 4, bad);
      auto run = [&](const Array& in, Array& out) {
        if (layer_op)
          layer_norm(in.cmat(), {}, {}, 1e-5, out.mat());
        else
          rms_norm(in.cmat(), {}, 1e-5, out.mat());
      };
      run(x, y);
      run(clean, clean_y);
      for (std::int64_t r : {0, 2})
        for (std::int64_t j = 0; j < 9; ++j) EXPECT_EQ(y.get(r, j), clean_y.get(r, j));
      EXPECT_TRUE(std::isnan(y.get(1, 4)));
      if (layer_op || std::isnan(bad)) {
        for (std::int64_t j = 0; j < 9; ++j) EXPECT_TRUE(std::isnan(y.get(1, j)));
      }
    }
  }
}

// eps = 0 on a zero row: rstd = 1/0 = Inf and y = 0·Inf = NaN, as PyTorch.
TEST(Properties, ZeroEpsOnZeroRowIsNaN) {
  Array x(DType::f32, 1, 8), y(DType::f32, 1, 8), rstd(DType::f32, 1, 1);
  for (std::int64_t j = 0; j < 8; ++j) x.set(0, j, 0.0);
  rms_norm(x.cmat(), {}, 0.0, y.mat(), rstd.vec());
  EXPECT_EQ(rstd.get(0, 0), INFINITY);
  for (std::int64_t j = 0; j < 8; ++j) EXPECT_TRUE(std::isnan(y.get(0, j)));
}

}  // namespace
}  // namespace normkit::test
