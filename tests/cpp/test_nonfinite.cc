// NaN and Inf through every op (forward, backward, fused): a non-finite
// value affects its own row only — every other row of every per-row output
// is bitwise what it is without it — and within its row the result follows
// IEEE arithmetic as the fp64 oracle does (ops.hpp, "Edge cases"). The
// parameter gradients sum over rows, so a column that receives a non-finite
// term becomes non-finite; the other columns stay finite and correct.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

enum class Fn { forward, backward, fused_forward, fused_backward };

const char* fn_name(Fn f) {
  switch (f) {
    case Fn::forward: return "forward";
    case Fn::backward: return "backward";
    case Fn::fused_forward: return "fused_forward";
    case Fn::fused_backward: return "fused_backward";
  }
  return "?";
}

bool fused(Fn f) { return f == Fn::fused_forward || f == Fn::fused_backward; }
bool backward(Fn f) { return f == Fn::backward || f == Fn::fused_backward; }

// The inputs of one call; residual and dh_out are used by the fused ops.
struct Inputs {
  Array x, residual, dy, dh_out;
};

// One output with its oracle value and budget scale, dense (n) doubles.
struct Output {
  std::string name;
  Array got;
  std::vector<double> ref, scale;
  DType acc;
  double growth_factor;
  enum Kind { per_row_matrix, per_row_stat, per_column } kind;
};

// Runs fn for case c (residual stream in dtype res) and returns every output
// it writes, with the oracle's values for them. A backward takes its saved
// statistics (and h) from the kernels' own forward, as in training.
std::vector<Output> run(Fn fn, const Case& c, DType res, const Inputs& in, const Params& p, double eps) {
  const std::int64_t rows = in.x.rows(), D = in.x.cols();
  const DType st = stat_dtype(c.x);
  const bool layer = c.op == NormKind::layer_norm;
  Array y(c.x, rows, D), h(res, rows, D), mean(st, 1, rows), rstd(st, 1, rows);
  if (fused(fn)) {
    if (layer)
      add_layer_norm(in.x.cmat(), in.residual.cmat(), p.w(), p.b(), eps, h.mat(), y.mat(), mean.vec(), rstd.vec());
    else
      add_rms_norm(in.x.cmat(), in.residual.cmat(), p.w(), eps, h.mat(), y.mat(), rstd.vec(), p.offset);
  } else if (layer) {
    layer_norm(in.x.cmat(), p.w(), p.b(), eps, y.mat(), mean.vec(), rstd.vec());
  } else {
    rms_norm(in.x.cmat(), p.w(), eps, y.mat(), rstd.vec(), p.offset);
  }
  // The norm's input as stored: x, or h for the fused ops.
  const Array& xin = fused(fn) ? h : in.x;
  const std::vector<double> xv = xin.values();
  const reference::Forward fref = reference_forward(c, xin.cmat(), p, eps);
  std::vector<Output> out;
  if (!backward(fn)) {
    const Scales s = scales(xv, nullptr, rows, D, p.gain_size, p.shift, fref, layer, c.x);
    out.push_back({"y", y, fref.y, s.y, c.x, growth(D), Output::per_row_matrix});
    const StatScales ss = stat_scales(xv, rows, D, fref, c.x);
    out.push_back({"rstd", rstd, fref.rstd, ss.rstd, c.x, growth(D), Output::per_row_stat});
    if (layer) out.push_back({"mean", mean, fref.mean, ss.mean, c.x, growth(D), Output::per_row_stat});
    if (fused(fn)) {
      const std::vector<double> a = in.x.values(), b = in.residual.values();
      std::vector<double> href(a.size()), hscale(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        href[i] = a[i] + b[i];
        hscale[i] = std::abs(href[i]);
      }
      out.push_back({"h", h, href, hscale, c.x, 0.25, Output::per_row_matrix});
    }
    return out;
  }

  Array dx(fused(fn) ? res : c.x, rows, D), dweight(c.w, 1, D), dbias(c.w, 1, D);
  const ConstMatrix dh_out = fused(fn) ? in.dh_out.cmat() : ConstMatrix{};
  if (fn == Fn::backward && layer)
    layer_norm_backward(in.dy.cmat(), xin.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(),
                        dbias.vec());
  else if (fn == Fn::backward)
    rms_norm_backward(in.dy.cmat(), xin.cmat(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), p.offset);
  else if (layer)
    add_layer_norm_backward(in.dy.cmat(), dh_out, xin.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(),
                            dweight.vec(), dbias.vec());
  else
    add_rms_norm_backward(in.dy.cmat(), dh_out, xin.cmat(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), p.offset);

  const std::vector<double> dyv = in.dy.values();
  reference::Backward bref = reference_backward(c, in.dy.cmat(), xin.cmat(), p, eps);
  const Scales s = scales(xv, &dyv, rows, D, p.gain_size, p.shift, fref, layer, c.x);
  std::vector<double> dx_scale = s.dx;
  if (fused(fn)) {
    const std::vector<double> dov = in.dh_out.values();
    for (std::size_t i = 0; i < dov.size(); ++i) {
      bref.dx[i] += dov[i];
      dx_scale[i] += std::abs(dov[i]);
    }
  }
  out.push_back({fused(fn) ? "dh" : "dx", dx, bref.dx, dx_scale, c.x, growth(D), Output::per_row_matrix});
  out.push_back({"dweight", dweight, bref.dweight, s.dweight, c.x, growth(D) + growth(rows), Output::per_column});
  if (layer) out.push_back({"dbias", dbias, bref.dbias, s.dbias, c.x, growth(rows), Output::per_column});
  return out;
}

// Row r of a per-row output, as raw bytes.
bool row_bitwise_equal(const Array& a, const Array& b, Output::Kind kind, std::int64_t r) {
  const std::size_t es = dtype_size(a.dtype());
  if (kind == Output::per_row_stat)
    return std::memcmp(static_cast<const char*>(a.data()) + r * es, static_cast<const char*>(b.data()) + r * es,
                       es) == 0;
  const std::size_t off = static_cast<std::size_t>(r * a.stride()) * es;
  return std::memcmp(static_cast<const char*>(a.data()) + off, static_cast<const char*>(b.data()) + off,
                     static_cast<std::size_t>(a.cols()) * es) == 0;
}

std::int64_t row_of(const Output& o, std::size_t i) {
  return o.kind == Output::per_row_matrix ? static_cast<std::int64_t>(i) / o.got.cols()
                                          : static_cast<std::int64_t>(i);
}

// Checks one call with a non-finite value against the same call without it.
void check(const std::vector<Output>& bad, const std::vector<Output>& clean, std::int64_t bad_row) {
  ASSERT_EQ(bad.size(), clean.size());
  for (std::size_t k = 0; k < bad.size(); ++k) {
    const Output& o = bad[k];
    SCOPED_TRACE(o.name);
    // Other rows: bitwise unaffected.
    if (o.kind != Output::per_column) {
      const std::int64_t rows = o.kind == Output::per_row_stat ? o.got.cols() : o.got.rows();
      for (std::int64_t r = 0; r < rows; ++r)
        if (r != bad_row) {
          EXPECT_TRUE(row_bitwise_equal(o.got, clean[k].got, o.kind, r)) << "row " << r << " changed";
        }
    }
    // Everything, the bad row included: what the oracle gives. A non-finite
    // reference must be matched (NaN by NaN, ±Inf by the same Inf; for a
    // statistic, by any non-finite value); a finite one by a finite value
    // within the budget (where the budget's scale is itself finite).
    const std::vector<double> got = o.got.values();
    // A statistic's non-finite value is not specified beyond being
    // non-finite (the mean of a row with an Inf may be Inf or NaN), so only
    // its finite references go through the budget.
    std::vector<double> expect = o.ref;
    if (o.kind == Output::per_row_stat)
      for (std::size_t i = 0; i < expect.size(); ++i)
        if (!std::isfinite(expect[i]) && !std::isfinite(got[i])) expect[i] = got[i];
    EXPECT_TRUE(within_budget(got, expect, o.scale, o.got.dtype(), o.acc, o.growth_factor, o.name));
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double g = got[i], ref = o.ref[i];
      if (std::isfinite(ref)) {
        EXPECT_TRUE(std::isfinite(g)) << o.name << "[" << i << "] (row " << row_of(o, i) << ") = " << g
                                      << ", reference " << ref;
        if (ref == 0.0) {
          EXPECT_EQ(g, 0.0) << o.name << "[" << i << "]";  // 0·finite stays exactly 0
        }
      } else if (o.kind == Output::per_row_stat) {
        EXPECT_FALSE(std::isfinite(g)) << o.name << "[" << i << "] = " << g << ", reference " << ref;
      } else if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(g)) << o.name << "[" << i << "] (row " << row_of(o, i) << ") = " << g;
      } else {
        EXPECT_EQ(g, ref) << o.name << "[" << i << "]";
      }
    }
  }
}

struct Where {
  const char* input;  // "x", "residual", "dy", "dh_out"
  Fn fn;
};

// Every op, every input a non-finite value can arrive through.
const std::vector<Where> kWhere = {
    {"x", Fn::forward},          {"x", Fn::backward},          {"dy", Fn::backward},
    {"x", Fn::fused_forward},    {"residual", Fn::fused_forward}, {"residual", Fn::fused_backward},
    {"dy", Fn::fused_backward},  {"dh_out", Fn::fused_backward}};

Array& pick(Inputs& in, const std::string& name) {
  if (name == "x") return in.x;
  if (name == "residual") return in.residual;
  if (name == "dy") return in.dy;
  return in.dh_out;
}

struct Shape {
  std::int64_t rows, D, bad_row, bad_col;
};

void run_all(const Case& c, DType res) {
  // A short row with the value mid-row; a long one with it in the vector
  // tail (D − 1) and enough rows that several threads share the work.
  for (const Shape& sh : {Shape{3, 37, 1, 4}, Shape{64, 1003, 40, 1002}}) {
    std::mt19937_64 rng(77);
    Inputs clean{Array(c.x, sh.rows, sh.D, sh.D + 2), Array(res, sh.rows, sh.D), Array(c.x, sh.rows, sh.D),
                 Array(res, sh.rows, sh.D)};
    fill_normal(clean.x, rng, 0.5, 1.0);
    fill_normal(clean.residual, rng, 0.0, 2.0);
    fill_normal(clean.dy, rng);
    fill_normal(clean.dh_out, rng, 0.0, 0.5);
    const Params p = make_params(c, sh.D, rng);
    for (const Where& w : kWhere) {
      if (!fused(w.fn) && res != c.x) continue;  // the plain ops have no residual stream
      const std::vector<Output> ref_run = run(w.fn, c, res, clean, p, 1e-5);
      for (double bad : {std::numeric_limits<double>::quiet_NaN(), double{INFINITY}, -double{INFINITY}}) {
        SCOPED_TRACE(name_of(c) + " res=" + std::string(dtype_name(res)) + " " + fn_name(w.fn) + " with " +
                     std::to_string(bad) + " in " + w.input + "[" + std::to_string(sh.bad_row) + "][" +
                     std::to_string(sh.bad_col) + "] D=" + std::to_string(sh.D));
        Inputs in = clean;
        pick(in, w.input).set(sh.bad_row, sh.bad_col, bad);
        check(run(w.fn, c, res, in, p, 1e-5), ref_run, sh.bad_row);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

class NonFinite : public ::testing::TestWithParam<DType> {};

TEST_P(NonFinite, StaysInItsRowEveryOp) {
  const DType t = GetParam();
  for (const Case& c : {Case{NormKind::layer_norm, t, t, Affine::both}, Case{NormKind::rms_norm, t, t, Affine::offset}}) {
    run_all(c, t);
    // 16-bit activations with an f32 residual stream and f32 parameters.
    if (t == DType::f16 || t == DType::bf16) run_all({c.op, t, DType::f32, c.affine}, DType::f32);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NonFinite, ::testing::Values(DType::f32, DType::f64, DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& tp) { return std::string(dtype_name(tp.param)); });

// The documented pattern within the row, spelled out (forward): LayerNorm
// gives NaN throughout; RMSNorm gives NaN throughout for a NaN, and for an
// Inf rstd = 0, so NaN at the Inf and (signed) 0 elsewhere.
TEST(NonFinite, DocumentedPatternInTheRow) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), double{INFINITY}, -double{INFINITY}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + std::to_string(bad));
      const std::int64_t D = 19;
      Array x(t, 2, D), y(t, 2, D), rstd(stat_dtype(t), 1, 2), mean(stat_dtype(t), 1, 2);
      std::mt19937_64 rng(5);
      fill_normal(x, rng);
      x.set(0, 7, bad);
      layer_norm(x.cmat(), {}, {}, 1e-5, y.mat(), mean.vec(), rstd.vec());
      for (std::int64_t j = 0; j < D; ++j) EXPECT_TRUE(std::isnan(y.get(0, j))) << "layer y[0][" << j << "]";
      EXPECT_FALSE(std::isfinite(rstd.get(0, 0)));
      rms_norm(x.cmat(), {}, 1e-5, y.mat(), rstd.vec());
      if (std::isnan(bad)) {
        for (std::int64_t j = 0; j < D; ++j) EXPECT_TRUE(std::isnan(y.get(0, j))) << "rms y[0][" << j << "]";
        EXPECT_TRUE(std::isnan(rstd.get(0, 0)));
      } else {
        EXPECT_EQ(rstd.get(0, 0), 0.0);
        for (std::int64_t j = 0; j < D; ++j) {
          if (j == 7) {
            EXPECT_TRUE(std::isnan(y.get(0, j)));
          } else {
            EXPECT_EQ(y.get(0, j), 0.0) << "rms y[0][" << j << "]";
          }
        }
      }
      for (std::int64_t j = 0; j < D; ++j) EXPECT_TRUE(std::isfinite(y.get(1, j)));
    }
  }
}

// A non-finite weight or bias element is shared by every row: in the
// forward it reaches its own column of y and no other column.
TEST(NonFinite, ParameterStaysInItsColumn) {
  for (DType t : {DType::f32, DType::bf16}) {
    for (bool layer : {true, false}) {
      for (bool in_bias : {false, true}) {
        if (in_bias && !layer) continue;
        SCOPED_TRACE(std::string(dtype_name(t)) + (layer ? " layer" : " rms") + (in_bias ? " bias" : " weight"));
        const std::int64_t rows = 4, D = 23, col = 9;
        std::mt19937_64 rng(8);
        Array x(t, rows, D), w(t, 1, D), b(t, 1, D), y(t, rows, D), y_clean(t, rows, D);
        fill_normal(x, rng);
        fill_normal(w, rng, 1.0, 0.5);
        fill_normal(b, rng);
        auto run = [&](Array& out) {
          if (layer)
            layer_norm(x.cmat(), w.cvec(), b.cvec(), 1e-5, out.mat());
          else
            rms_norm(x.cmat(), w.cvec(), 1e-5, out.mat());
        };
        run(y_clean);
        (in_bias ? b : w).set(0, col, std::numeric_limits<double>::quiet_NaN());
        run(y);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < D; ++j) {
            if (j == col) {
              EXPECT_TRUE(std::isnan(y.get(r, j))) << r;
            } else {
              EXPECT_EQ(y.get(r, j), y_clean.get(r, j)) << r << "," << j;
            }
          }
      }
    }
  }
}

}  // namespace
}  // namespace normkit::test
