// Forward of LayerNorm and RMSNorm through the public API, every dtype and
// option, against the fp64 oracle with the budget of tolerance.hpp.
#include <gtest/gtest.h>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

enum class Layout { contiguous, strided, in_place };

class Forward : public ::testing::TestWithParam<Case> {};

void run_forward(const Case& c, std::int64_t rows, std::int64_t D, Layout layout, std::mt19937_64& rng) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) +
               " layout=" + std::to_string(static_cast<int>(layout)));
  const double eps = 1e-5;
  const std::int64_t stride = layout == Layout::contiguous ? D : D + 5;
  Array x(c.x, rows, D, stride);
  // A non-zero mean exercises LayerNorm's centring and RMSNorm's lack of it.
  fill_normal(x, rng, 0.5, 2.0);
  const Params p = make_params(c, D, rng);
  const std::vector<double> xv = x.values();
  const reference::Forward ref = reference_forward(c, x.cmat(), p, eps);

  Array y_separate(c.x, rows, D, stride);
  Array& y = layout == Layout::in_place ? x : y_separate;
  Array mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
  if (c.op == NormKind::layer_norm)
    layer_norm(x.cmat(), p.w(), p.b(), eps, y.mat(), mean.vec(), rstd.vec());
  else
    rms_norm(x.cmat(), p.w(), eps, y.mat(), rstd.vec(), p.offset);

  const Scales s = scales(xv, nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm);
  EXPECT_TRUE(within_budget(y.values(), ref.y, s.y, c.x, c.x, growth(D), "y"));
  EXPECT_TRUE(y.padding_intact()) << "y was written outside its rows";
  if (rows == 0) return;
  // Statistics are stored in f32 (f64); their budget is the accumulation's.
  const std::vector<double> rstd_scale = ref.rstd;
  EXPECT_TRUE(within_budget(rstd.values(), ref.rstd, rstd_scale, stat_dtype(c.x), c.x, growth(D), "rstd"));
  if (c.op == NormKind::layer_norm) {
    std::vector<double> mean_scale(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      double a = 0;
      for (std::int64_t j = 0; j < D; ++j) a += std::abs(xv[r * D + j]);
      mean_scale[r] = a / static_cast<double>(D);
    }
    EXPECT_TRUE(within_budget(mean.values(), ref.mean, mean_scale, stat_dtype(c.x), c.x, growth(D), "mean"));
  }
}

TEST_P(Forward, MatchesOracle) {
  const Case c = GetParam();
  std::mt19937_64 rng(42);
  for (std::int64_t rows : kRows)
    for (std::int64_t D : kWidths) {
      if (rows * D > kMaxElements) continue;
      for (Layout layout : {Layout::contiguous, Layout::strided, Layout::in_place}) {
        run_forward(c, rows, D, layout, rng);
        if (::testing::Test::HasFailure()) return;  // one failing shape is enough to read
      }
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, Forward, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& tp) { return name_of(tp.param); });

// Statistics are optional outputs: not asking for them changes nothing.
TEST(Forward, StatisticsAreOptional) {
  std::mt19937_64 rng(1);
  Array x(DType::f32, 5, 33);
  fill_normal(x, rng);
  Array y1(DType::f32, 5, 33), y2(DType::f32, 5, 33), mean(DType::f32, 1, 5), rstd(DType::f32, 1, 5);
  layer_norm(x.cmat(), {}, {}, 1e-5, y1.mat(), mean.vec(), rstd.vec());
  layer_norm(x.cmat(), {}, {}, 1e-5, y2.mat());
  EXPECT_EQ(y1.bytes(), y2.bytes());
  rms_norm(x.cmat(), {}, 1e-5, y1.mat(), rstd.vec());
  rms_norm(x.cmat(), {}, 1e-5, y2.mat());
  EXPECT_EQ(y1.bytes(), y2.bytes());
}

}  // namespace
}  // namespace normkit::test

// The statistics dtype rule is public: callers allocate mean and rstd in it.
TEST(StatDtype, IsF64ForF64AndF32Otherwise) {
  static_assert(normkit::stat_dtype(normkit::DType::f64) == normkit::DType::f64);
  for (const normkit::DType t : {normkit::DType::f32, normkit::DType::f16, normkit::DType::bf16})
    EXPECT_EQ(normkit::stat_dtype(t), normkit::DType::f32);
}
