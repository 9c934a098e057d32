// Fused residual add + norm (the pre-norm step) and its backward, including
// the f32 residual stream with 16-bit activations.
#include <gtest/gtest.h>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

struct FusedCase {
  NormKind op;
  DType x, res, w;
};

std::string fused_name(const FusedCase& c) {
  return std::string(c.op == NormKind::layer_norm ? "layer" : "rms") + "_x" + std::string(dtype_name(c.x)) + "_res" +
         std::string(dtype_name(c.res)) + "_w" + std::string(dtype_name(c.w));
}

std::vector<FusedCase> fused_cases() {
  const std::vector<std::array<DType, 3>> dtypes = {
      {DType::f32, DType::f32, DType::f32},   {DType::f64, DType::f64, DType::f64},
      {DType::f16, DType::f16, DType::f16},   {DType::f16, DType::f32, DType::f32},
      {DType::bf16, DType::bf16, DType::bf16}, {DType::bf16, DType::f32, DType::f32},
      {DType::bf16, DType::f32, DType::bf16}};
  std::vector<FusedCase> out;
  for (NormKind op : kNormKinds)
    for (auto [x, r, w] : dtypes) out.push_back({op, x, r, w});
  return out;
}

void PrintTo(const FusedCase& c, std::ostream* os) { *os << fused_name(c); }

class Fused : public ::testing::TestWithParam<FusedCase> {};

void run_fused(const FusedCase& fc, std::int64_t rows, std::int64_t D, bool in_place, bool with_dh_out,
               std::mt19937_64& rng) {
  SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + (in_place ? " in-place" : "") +
               (with_dh_out ? " dh_out" : ""));
  const double eps = 1e-6;
  const Case c{fc.op, fc.x, fc.w, fc.op == NormKind::layer_norm ? Affine::both : Affine::weight};
  const std::int64_t stride = D + 1;
  Array x(fc.x, rows, D, stride), residual(fc.res, rows, D, stride);
  fill_normal(x, rng, 0.0, 1.0);
  fill_normal(residual, rng, 0.5, 3.0);
  const Params p = make_params(c, D, rng);
  const std::vector<double> xv = x.values(), rv = residual.values();

  Array h_separate(fc.res, rows, D, stride);
  Array& h = in_place ? residual : h_separate;  // the residual stream updated in place
  Array y(fc.x, rows, D, stride), mean(stat_dtype(fc.x), 1, rows), rstd(stat_dtype(fc.x), 1, rows);
  if (fc.op == NormKind::layer_norm)
    add_layer_norm(x.cmat(), residual.cmat(), p.w(), p.b(), eps, h.mat(), y.mat(), mean.vec(), rstd.vec());
  else
    add_rms_norm(x.cmat(), residual.cmat(), p.w(), eps, h.mat(), y.mat(), rstd.vec());

  // h: one f32 addition (exact inputs), then rounding to h's dtype — at most
  // one f32 rounding plus one rounding to the stream dtype.
  std::vector<double> h_ref(xv.size()), h_scale(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    h_ref[i] = xv[i] + rv[i];
    h_scale[i] = std::abs(h_ref[i]);
  }
  EXPECT_TRUE(within_budget(h.values(), h_ref, h_scale, fc.res, fc.x, 0.25, "h"));
  // y is the norm of h as stored.
  const std::vector<double> hv = h.values();
  const reference::Forward ref = reference_forward(c, h.cmat(), p, eps);
  const Scales s = scales(hv, nullptr, rows, D, p.gain_size, p.shift, ref, fc.op == NormKind::layer_norm);
  EXPECT_TRUE(within_budget(y.values(), ref.y, s.y, fc.x, fc.x, growth(D), "y"));
  EXPECT_TRUE(h.padding_intact() && y.padding_intact());

  // Backward: dh = norm_backward(dy) + dh_out.
  Array dy(fc.x, rows, D, stride), dh_out(fc.res, rows, D, stride), dh_separate(fc.res, rows, D, stride);
  fill_normal(dy, rng);
  fill_normal(dh_out, rng, 0.0, 0.5);
  const std::vector<double> dyv = dy.values(), dov = dh_out.values();
  Array& dh = in_place && with_dh_out ? dh_out : dh_separate;
  Array dweight(fc.w, 1, D), dbias(fc.w, 1, D);
  const ConstMatrix dout = with_dh_out ? dh_out.cmat() : ConstMatrix{};
  if (fc.op == NormKind::layer_norm)
    add_layer_norm_backward(dy.cmat(), dout, h.cmat(), mean.cvec(), rstd.cvec(), p.w(), dh.mat(), dweight.vec(),
                            dbias.vec());
  else
    add_rms_norm_backward(dy.cmat(), dout, h.cmat(), rstd.cvec(), p.w(), dh.mat(), dweight.vec());

  reference::Backward bref = reference_backward(c, dy.cmat(), h.cmat(), p, eps);
  const Scales sb = scales(hv, &dyv, rows, D, p.gain_size, p.shift, ref, fc.op == NormKind::layer_norm);
  std::vector<double> dh_scale = sb.dx;
  if (with_dh_out)
    for (std::size_t i = 0; i < dov.size(); ++i) {
      bref.dx[i] += dov[i];
      dh_scale[i] += std::abs(dov[i]);
    }
  EXPECT_TRUE(within_budget(dh.values(), bref.dx, dh_scale, fc.res, fc.x, growth(D), "dh"));
  EXPECT_TRUE(within_budget(dweight.values(), bref.dweight, sb.dweight, fc.w, fc.x, growth(D) + growth(rows),
                            "dweight"));
  if (fc.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(dbias.values(), bref.dbias, sb.dbias, fc.w, fc.x, growth(rows), "dbias"));
  }
}

TEST_P(Fused, MatchesOracle) {
  std::mt19937_64 rng(11);
  for (std::int64_t rows : kRows)
    for (std::int64_t D : kWidths) {
      if (rows * D > kMaxElements) continue;
      for (auto [in_place, with_dh_out] : {std::pair{false, true}, {false, false}, {true, true}}) {
        run_fused(GetParam(), rows, D, in_place, with_dh_out, rng);
        if (::testing::Test::HasFailure()) return;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, Fused, ::testing::ValuesIn(fused_cases()),
                         [](const ::testing::TestParamInfo<FusedCase>& tp) { return fused_name(tp.param); });

// The fused op is exactly "add, then norm": same bits as the two calls when
// the sum is stored in the same dtype. The residual rows' offsets put h's
// mean on both sides of the LayerNorm one-pass variance's limit (|mean| ≤
// std/4; h's std is √2): rows 0 and 3 take the one-pass statistics, rows 1
// and 2 the centred pass. D = 4099 spans three chunks and a partial vector.
TEST(Fused, EqualsAddThenNorm) {
  std::mt19937_64 rng(5);
  const double offsets[] = {0.0, 1.0, 100.0, 0.1};
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (std::int64_t D : {std::int64_t{300}, std::int64_t{4099}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " D=" + std::to_string(D));
      Array x(t, 4, D), r(t, 4, D), h(t, 4, D), y1(t, 4, D), y2(t, 4, D);
      fill_normal(x, rng);
      fill_normal(r, rng);
      for (std::int64_t row = 0; row < 4; ++row)
        for (std::int64_t j = 0; j < D; ++j) r.set(row, j, r.get(row, j) + offsets[row]);
      add_rms_norm(x.cmat(), r.cmat(), {}, 1e-6, h.mat(), y1.mat());
      rms_norm(h.cmat(), {}, 1e-6, y2.mat());
      EXPECT_EQ(y1.bytes(), y2.bytes());
      add_layer_norm(x.cmat(), r.cmat(), {}, {}, 1e-6, h.mat(), y1.mat());
      layer_norm(h.cmat(), {}, {}, 1e-6, y2.mat());
      EXPECT_EQ(y1.bytes(), y2.bytes());
    }
  }
}

}  // namespace
}  // namespace normkit::test
