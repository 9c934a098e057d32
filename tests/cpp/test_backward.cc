// Backward of LayerNorm and RMSNorm through the public API: against the
// oracle's analytic gradients for every dtype and option, and the oracle
// itself against central finite differences in f64.
#include <gtest/gtest.h>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

class Backward : public ::testing::TestWithParam<Case> {};

void run_backward(const Case& c, std::int64_t rows, std::int64_t D, bool strided, bool in_place,
                  std::mt19937_64& rng) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + (strided ? " strided" : "") +
               (in_place ? " in-place" : ""));
  const double eps = 1e-5;
  const std::int64_t stride = strided ? D + 3 : D;
  Array x(c.x, rows, D, stride), dy(c.x, rows, D, stride);
  fill_normal(x, rng, 0.5, 2.0);
  fill_normal(dy, rng, 0.0, 1.0);
  const Params p = make_params(c, D, rng);
  const std::vector<double> xv = x.values(), dyv = dy.values();
  const reference::Forward fwd = reference_forward(c, x.cmat(), p, eps);
  const reference::Backward ref = reference_backward(c, dy.cmat(), x.cmat(), p, eps);

  // Saved statistics come from the kernel's own forward, as in training.
  Array y(c.x, rows, D, stride), mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
  Array dx_separate(c.x, rows, D, stride);
  Array& dx = in_place ? dy : dx_separate;
  Array dweight(c.w, 1, D), dbias(c.w, 1, D);
  if (c.op == NormKind::layer_norm) {
    layer_norm(x.cmat(), p.w(), p.b(), eps, y.mat(), mean.vec(), rstd.vec());
    layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(),
                        dbias.vec());
  } else {
    rms_norm(x.cmat(), p.w(), eps, y.mat(), rstd.vec(), p.offset);
    rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), p.offset);
  }

  const Scales s = scales(xv, &dyv, rows, D, p.gain_size, p.shift, fwd, c.op == NormKind::layer_norm);
  EXPECT_TRUE(within_budget(dx.values(), ref.dx, s.dx, c.x, c.x, growth(D), "dx"));
  EXPECT_TRUE(dx.padding_intact());
  // dweight sums over rows as well as carrying x̂'s error.
  const double g_rows = growth(D) + growth(rows);
  EXPECT_TRUE(within_budget(dweight.values(), ref.dweight, s.dweight, c.w, c.x, g_rows, "dweight"));
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(dbias.values(), ref.dbias, s.dbias, c.w, c.x, growth(rows), "dbias"));
  }
}

TEST_P(Backward, MatchesOracle) {
  const Case c = GetParam();
  std::mt19937_64 rng(7);
  for (std::int64_t rows : kRows)
    for (std::int64_t D : kWidths) {
      if (rows * D > kMaxElements) continue;
      for (auto [strided, in_place] : {std::pair{false, false}, {true, false}, {true, true}}) {
        run_backward(c, rows, D, strided, in_place, rng);
        if (::testing::Test::HasFailure()) return;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, Backward, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& tp) { return name_of(tp.param); });

// The oracle's analytic backward against central differences of the
// oracle's own forward, in f64. The loss is L = Σ y·c for a fixed random c,
// so dL/dx = backward(dy = c). Step h = 1e-5 balances truncation (O(h²)·f''')
// against rounding (O(u/h)): both are ~1e-10 relative here, far inside 1e-6.
TEST(BackwardOracle, MatchesFiniteDifferences) {
  std::mt19937_64 rng(3);
  for (NormKind op : kNormKinds) {
    for (std::int64_t D : {1, 2, 3, 8, 17}) {
      if (op == NormKind::layer_norm && D == 1) continue;  // LayerNorm of one feature is constant
      const Case c{op, DType::f64, DType::f64, op == NormKind::layer_norm ? Affine::both : Affine::offset};
      Array x(DType::f64, 2, D), dy(DType::f64, 2, D);
      fill_normal(x, rng, 0.3, 1.0);
      fill_normal(dy, rng);
      const Params p = make_params(c, D, rng);
      const double eps = 1e-3;
      const reference::Backward an = reference_backward(c, dy.cmat(), x.cmat(), p, eps);
      auto loss = [&](const Array& xx) {
        const reference::Forward f = reference_forward(c, xx.cmat(), p, eps);
        const std::vector<double> dyv = dy.values();
        double l = 0;
        for (std::size_t i = 0; i < f.y.size(); ++i) l += f.y[i] * dyv[i];
        return l;
      };
      const double h = 1e-5;
      for (std::int64_t r = 0; r < 2; ++r)
        for (std::int64_t j = 0; j < D; ++j) {
          Array plus = x, minus = x;
          plus.set(r, j, x.get(r, j) + h);
          minus.set(r, j, x.get(r, j) - h);
          const double fd = (loss(plus) - loss(minus)) / (2 * h);
          const double a = an.dx[r * D + j];
          EXPECT_LE(std::abs(fd - a), 1e-6 * std::max(1.0, std::abs(a)))
              << (op == NormKind::layer_norm ? "layer" : "rms") << " D=" << D << " r=" << r << " j=" << j;
        }
      // dweight: perturb the gain.
      for (std::int64_t j = 0; j < D; ++j) {
        Params pp = p, pm = p;
        pp.weight.set(0, j, p.weight.get(0, j) + h);
        pm.weight.set(0, j, p.weight.get(0, j) - h);
        auto loss_p = [&](const Params& q) {
          const reference::Forward f = reference_forward(c, x.cmat(), q, eps);
          const std::vector<double> dyv = dy.values();
          double l = 0;
          for (std::size_t i = 0; i < f.y.size(); ++i) l += f.y[i] * dyv[i];
          return l;
        };
        const double fd = (loss_p(pp) - loss_p(pm)) / (2 * h);
        EXPECT_LE(std::abs(fd - an.dweight[j]), 1e-6 * std::max(1.0, std::abs(an.dweight[j])));
      }
    }
  }
}

}  // namespace
}  // namespace normkit::test
