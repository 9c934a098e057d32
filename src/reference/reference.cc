#include "reference.hpp"

#include <cmath>

#include "normkit/half.hpp"

namespace normkit::reference {

double load(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return to_float(static_cast<const half_t*>(p)[i]);
    case DType::bf16: return to_float(static_cast<const bfloat16_t*>(p)[i]);
  }
  return std::nan("");
}

std::vector<double> to_double(ConstMatrix m) {
  std::vector<double> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t j = 0; j < m.cols; ++j)
      out[r * m.cols + j] = load(m.data, m.dtype, r * m.row_stride + j);
  return out;
}

std::vector<double> to_double(ConstVector v, std::int64_t n, double fill) {
  std::vector<double> out(static_cast<std::size_t>(n), fill);
  if (v.present())
    for (std::int64_t j = 0; j < n; ++j) out[j] = load(v.data, v.dtype, j);
  return out;
}

namespace {

// A compensated (Neumaier) running sum: the rounding error of each addition
// is recovered exactly and added back at the end, so the result is within a
// few ulps of the exact sum for any number of terms. A plain double sum is
// not enough once the inputs are f64 themselves: its error grows with D
// (D copies of -0.3, D = 4096: 7.7e-14 relative, ~700 ulps), more than an
// f64 kernel with several accumulators makes — the oracle must stay the
// more accurate of the two.
class Sum {
 public:
  void add(double v) {
    const double t = s_ + v;
    c_ += std::abs(s_) >= std::abs(v) ? (s_ - t) + v : (v - t) + s_;
    s_ = t;
  }
  // A non-finite plain sum is the IEEE answer (Inf, or NaN); the correction
  // term is meaningless then (Inf − Inf).
  double value() const { return std::isfinite(s_) ? s_ + c_ : s_; }

 private:
  double s_ = 0, c_ = 0;
};

// mean, then the centred second moment: the textbook two-pass variance.
void row_moments(const double* x, std::int64_t D, double& mean, double& var) {
  Sum s;
  for (std::int64_t j = 0; j < D; ++j) s.add(x[j]);
  mean = s.value() / static_cast<double>(D);
  Sum q;
  for (std::int64_t j = 0; j < D; ++j) q.add((x[j] - mean) * (x[j] - mean));
  var = q.value() / static_cast<double>(D);
}

double mean_square(const double* x, std::int64_t D) {
  Sum q;
  for (std::int64_t j = 0; j < D; ++j) q.add(x[j] * x[j]);
  return q.value() / static_cast<double>(D);
}

}  // namespace

Forward layer_norm(ConstMatrix xm, ConstVector weight, ConstVector bias, double eps) {
  const std::int64_t rows = xm.rows, D = xm.cols;
  const std::vector<double> x = to_double(xm);
  const std::vector<double> w = to_double(weight, D, 1.0), b = to_double(bias, D, 0.0);
  Forward f{std::vector<double>(x.size()), std::vector<double>(rows), std::vector<double>(rows)};
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * D];
    double mean = 0, var = 0;
    row_moments(xr, D, mean, var);
    const double rstd = 1.0 / std::sqrt(var + eps);
    f.mean[r] = mean;
    f.rstd[r] = rstd;
    for (std::int64_t j = 0; j < D; ++j) f.y[r * D + j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
  return f;
}

Forward rms_norm(ConstMatrix xm, ConstVector weight, double eps, double weight_offset) {
  const std::int64_t rows = xm.rows, D = xm.cols;
  const std::vector<double> x = to_double(xm);
  std::vector<double> g = to_double(weight, D, 1.0);
  if (weight.present())
    for (double& gj : g) gj += weight_offset;
  Forward f{std::vector<double>(x.size()), {}, std::vector<double>(rows)};
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * D];
    const double rstd = 1.0 / std::sqrt(mean_square(xr, D) + eps);
    f.rstd[r] = rstd;
    for (std::int64_t j = 0; j < D; ++j) f.y[r * D + j] = xr[j] * rstd * g[j];
  }
  return f;
}

// LayerNorm: y = x̂·w + b, x̂ = (x − μ)·r. With g = w·dy, the chain rule
// through μ and r gives dx = r·(g − mean(g) − x̂·mean(g·x̂)).
Backward layer_norm_backward(ConstMatrix dym, ConstMatrix xm, ConstVector weight, double eps) {
  const std::int64_t rows = xm.rows, D = xm.cols;
  const std::vector<double> x = to_double(xm), dy = to_double(dym);
  const std::vector<double> w = to_double(weight, D, 1.0);
  Backward b{std::vector<double>(x.size()), std::vector<double>(D, 0.0), std::vector<double>(D, 0.0)};
  std::vector<double> xhat(D), g(D);
  std::vector<Sum> dweight(D), dbias(D);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * D];
    const double* dyr = &dy[r * D];
    double mean = 0, var = 0;
    row_moments(xr, D, mean, var);
    const double rstd = 1.0 / std::sqrt(var + eps);
    Sum sum_g, sum_gx;
    for (std::int64_t j = 0; j < D; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      g[j] = w[j] * dyr[j];
      sum_g.add(g[j]);
      sum_gx.add(g[j] * xhat[j]);
      dweight[j].add(dyr[j] * xhat[j]);
      dbias[j].add(dyr[j]);
    }
    const double mean_g = sum_g.value() / static_cast<double>(D);
    const double mean_gx = sum_gx.value() / static_cast<double>(D);
    for (std::int64_t j = 0; j < D; ++j) b.dx[r * D + j] = rstd * (g[j] - mean_g - xhat[j] * mean_gx);
  }
  for (std::int64_t j = 0; j < D; ++j) {
    b.dweight[j] = dweight[j].value();
    b.dbias[j] = dbias[j].value();
  }
  return b;
}

// RMSNorm: y = x̂·g, x̂ = x·r. With g' = gain·dy: dx = r·(g' − x̂·mean(g'·x̂)).
Backward rms_norm_backward(ConstMatrix dym, ConstMatrix xm, ConstVector weight, double eps,
                           double weight_offset) {
  const std::int64_t rows = xm.rows, D = xm.cols;
  const std::vector<double> x = to_double(xm), dy = to_double(dym);
  std::vector<double> gain = to_double(weight, D, 1.0);
  if (weight.present())
    for (double& gj : gain) gj += weight_offset;
  Backward b{std::vector<double>(x.size()), std::vector<double>(D, 0.0), {}};
  std::vector<double> xhat(D), g(D);
  std::vector<Sum> dweight(D);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * D];
    const double* dyr = &dy[r * D];
    const double rstd = 1.0 / std::sqrt(mean_square(xr, D) + eps);
    Sum sum_gx;
    for (std::int64_t j = 0; j < D; ++j) {
      xhat[j] = xr[j] * rstd;
      g[j] = gain[j] * dyr[j];
      sum_gx.add(g[j] * xhat[j]);
      dweight[j].add(dyr[j] * xhat[j]);
    }
    const double mean_gx = sum_gx.value() / static_cast<double>(D);
    for (std::int64_t j = 0; j < D; ++j) b.dx[r * D + j] = rstd * (g[j] - xhat[j] * mean_gx);
  }
  for (std::int64_t j = 0; j < D; ++j) b.dweight[j] = dweight[j].value();
  return b;
}

}  // namespace normkit::reference
