#include "lab/numerics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace normkit::lab {

std::string kind_tag(NormKind k) { return k == NormKind::layer_norm ? "ln" : "rms"; }

namespace {

ConstVector view_or_absent(const Array* a) { return a ? a->vec() : ConstVector{}; }

// x̂ of the oracle and μ_|x| per row.
void normalized(NormKind kind, const Array& x, const reference::Forward& ref, std::vector<double>& xhat,
                std::vector<double>& mean_abs) {
  const std::int64_t rows = x.rows(), D = x.cols();
  xhat.assign(static_cast<std::size_t>(rows * D), 0.0);
  mean_abs.assign(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double mu = kind == NormKind::layer_norm ? ref.mean[r] : 0.0;
    for (std::int64_t j = 0; j < D; ++j) {
      xhat[r * D + j] = (x.get(r, j) - mu) * ref.rstd[r];
      mean_abs[r] += std::fabs(x.get(r, j));
    }
    mean_abs[r] /= static_cast<double>(D);
  }
}

reference::Forward oracle_forward(NormKind kind, const Array& x, const Array* weight, const Array* bias,
                                  double eps) {
  return kind == NormKind::layer_norm
             ? reference::layer_norm(x.mat(), view_or_absent(weight), view_or_absent(bias), eps)
             : reference::rms_norm(x.mat(), view_or_absent(weight), eps);
}

}  // namespace

std::vector<double> forward_bound(NormKind kind, DType out, const Array& x, const std::vector<double>& w,
                                  const std::vector<double>& b, const reference::Forward& ref) {
  const std::int64_t rows = x.rows(), D = x.cols();
  std::vector<double> xhat, mean_abs;
  normalized(kind, x, ref, xhat, mean_abs);
  const double u_out = unit_roundoff(out), u_acc = accum_roundoff(x.dtype());
  const double grow = growth(D);
  std::vector<double> bound(static_cast<std::size_t>(rows * D));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < D; ++j) {
      const std::int64_t i = r * D + j;
      const double bias = kind == NormKind::layer_norm ? std::fabs(b[j]) : 0.0;
      bound[i] = u_out * std::fabs(ref.y[i]) +
                 grow * u_acc * (std::fabs(w[j]) * (std::fabs(xhat[i]) + ref.rstd[r] * mean_abs[r]) + bias) +
                 smallest_subnormal(out);
    }
  return bound;
}

double ForwardRun::worst_ratio() const {
  double worst = 0;
  for (std::int64_t i = 0; i < y.size(); ++i) {
    const double ratio = std::fabs(y.get(i) - ref.y[i]) / bound[i];
    if (!(ratio <= worst)) worst = ratio;  // NaN propagates as a failure
  }
  return worst;
}

ForwardRun forward(const Norms& norms, NormKind kind, const Array& x, const Array* weight,
                   const Array* bias, double eps) {
  ForwardRun run;
  const DType st = stat_dtype(x.dtype());
  run.y = Array(x.dtype(), x.rows(), x.cols());
  run.rstd = Array(st, 1, x.rows());
  if (kind == NormKind::layer_norm) {
    run.mean = Array(st, 1, x.rows());
    norms.layer_norm(x.mat(), view_or_absent(weight), view_or_absent(bias), eps, run.y.mat(),
                     run.mean.vec(), run.rstd.vec());
  } else {
    norms.rms_norm(x.mat(), view_or_absent(weight), eps, run.y.mat(), run.rstd.vec());
  }
  run.ref = oracle_forward(kind, x, weight, bias, eps);
  const std::vector<double> w = reference::to_double(view_or_absent(weight), x.cols(), 1.0);
  const std::vector<double> b = reference::to_double(view_or_absent(bias), x.cols(), 0.0);
  run.bound = forward_bound(kind, x.dtype(), x, w, b, run.ref);
  std::vector<double> mean_abs;
  normalized(kind, x, run.ref, run.xhat, mean_abs);
  return run;
}

BackwardRun backward(const Norms& norms, NormKind kind, const Array& dy, const Array& x,
                     const Array* weight, const Array* bias, double eps) {
  const ForwardRun f = forward(norms, kind, x, weight, bias, eps);
  const std::int64_t rows = x.rows(), D = x.cols();
  const DType wt = weight ? weight->dtype() : x.dtype();
  BackwardRun run;
  run.dx = Array(x.dtype(), rows, D);
  run.dweight = Array(wt, 1, D);
  if (kind == NormKind::layer_norm) {
    run.dbias = Array(wt, 1, D);
    norms.layer_norm_backward(dy.mat(), x.mat(), f.mean.vec(), f.rstd.vec(), view_or_absent(weight),
                              run.dx.mat(), run.dweight.vec(), run.dbias.vec());
    run.ref = reference::layer_norm_backward(dy.mat(), x.mat(), view_or_absent(weight), eps);
  } else {
    norms.rms_norm_backward(dy.mat(), x.mat(), f.rstd.vec(), view_or_absent(weight), run.dx.mat(),
                            run.dweight.vec());
    run.ref = reference::rms_norm_backward(dy.mat(), x.mat(), view_or_absent(weight), eps);
  }

  std::vector<double> xhat, mean_abs;
  normalized(kind, x, f.ref, xhat, mean_abs);
  const std::vector<double> w = reference::to_double(view_or_absent(weight), D, 1.0);
  const double u_out = unit_roundoff(x.dtype()), u_w = unit_roundoff(wt);
  const double u_acc = accum_roundoff(x.dtype());
  const double sqrt_d = std::sqrt(static_cast<double>(D));
  run.dx_bound.assign(static_cast<std::size_t>(rows * D), 0.0);
  run.dw_bound.assign(static_cast<std::size_t>(D), 0.0);
  run.db_bound.assign(static_cast<std::size_t>(D), 0.0);
  std::vector<double> a(static_cast<std::size_t>(D)), g(static_cast<std::size_t>(D));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double rstd = f.ref.rstd[r];
    double mean_g = 0, mean_ga = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      a[j] = std::fabs(xhat[r * D + j]) + rstd * mean_abs[r];
      g[j] = std::fabs(w[j] * dy.get(r, j));
      mean_g += g[j] / static_cast<double>(D);
      mean_ga += g[j] * a[j] / static_cast<double>(D);
      run.dw_bound[j] += std::fabs(dy.get(r, j)) * a[j];
      run.db_bound[j] += std::fabs(dy.get(r, j));
    }
    for (std::int64_t j = 0; j < D; ++j) {
      const std::int64_t i = r * D + j;
      run.dx_bound[i] = u_out * std::fabs(run.ref.dx[i]) +
                        growth(D) * u_acc * rstd * (g[j] + mean_g + a[j] * mean_ga) +
                        smallest_subnormal(x.dtype());
    }
  }
  const double rows_d = static_cast<double>(rows);
  for (std::int64_t j = 0; j < D; ++j) {
    run.dw_bound[j] = u_w * std::fabs(run.ref.dweight[j]) +
                      4.0 * (sqrt_d + rows_d + 2.0) * u_acc * run.dw_bound[j] + smallest_subnormal(wt);
    const double db = kind == NormKind::layer_norm ? run.ref.dbias[j] : 0.0;
    run.db_bound[j] =
        u_w * std::fabs(db) + (rows_d + 2.0) * u_acc * run.db_bound[j] + smallest_subnormal(wt);
  }
  return run;
}

Vec mat_vec(const Mat& m, const Vec& v) {
  Vec out(static_cast<std::size_t>(m.n), 0.0);
  for (std::int64_t i = 0; i < m.n; ++i)
    for (std::int64_t j = 0; j < m.n; ++j) out[i] += m(i, j) * v[j];
  return out;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm2(const Vec& v) { return std::sqrt(dot(v, v)); }

Mat jacobian_from_backward(const Norms& norms, NormKind kind, const Array& x, double eps, Mat* bound) {
  const std::int64_t D = x.cols();
  Array xs(x.dtype(), D, D), dy(x.dtype(), D, D);
  for (std::int64_t i = 0; i < D; ++i)
    for (std::int64_t j = 0; j < D; ++j) {
      xs.set(i, j, x.get(0, j));
      dy.set(i, j, i == j ? 1.0 : 0.0);
    }
  const BackwardRun b = backward(norms, kind, dy, xs, nullptr, nullptr, eps);
  Mat J{D, b.dx.values()};
  if (bound) *bound = Mat{D, b.dx_bound};
  return J;
}

Vec singular_values(const Mat& m) {
  const std::int64_t n = m.n;
  Mat u = m;  // columns are rotated until mutually orthogonal
  for (int sweep = 0; sweep < 60; ++sweep) {
    bool rotated = false;
    for (std::int64_t p = 0; p < n - 1; ++p)
      for (std::int64_t q = p + 1; q < n; ++q) {
        double alpha = 0, beta = 0, gamma = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          alpha += u(i, p) * u(i, p);
          beta += u(i, q) * u(i, q);
          gamma += u(i, p) * u(i, q);
        }
        if (gamma == 0.0 || std::fabs(gamma) <= 1e-15 * std::sqrt(alpha * beta)) continue;
        rotated = true;
        const double zeta = (beta - alpha) / (2.0 * gamma);
        const double t = std::copysign(1.0, zeta) / (std::fabs(zeta) + std::sqrt(1.0 + zeta * zeta));
        const double c = 1.0 / std::sqrt(1.0 + t * t), s = c * t;
        for (std::int64_t i = 0; i < n; ++i) {
          const double up = u(i, p), uq = u(i, q);
          u(i, p) = c * up - s * uq;
          u(i, q) = s * up + c * uq;
        }
      }
    if (!rotated) break;
  }
  Vec sv(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += u(i, j) * u(i, j);
    sv[j] = std::sqrt(s);
  }
  std::sort(sv.begin(), sv.end(), std::greater<>());
  return sv;
}

}  // namespace normkit::lab

namespace normkit::lab {

bool near_vec(Recorder& rec, const std::string& name, const std::string& what, const Vec& measured,
              const Vec& expected, const Vec& tol) {
  bool ok = true;
  double max_tol = 0;
  for (std::size_t j = 0; j < measured.size(); ++j) {
    rec.value(name + "_" + std::to_string(j), measured[j]);
    ok = ok && std::fabs(measured[j] - expected[j]) <= tol[j];
    max_tol = std::max(max_tol, tol[j]);
  }
  rec.row(what, fmt_vec(measured), fmt_vec(expected) + " ± " + fmt(max_tol, 2), ok);
  return ok;
}

namespace {

// max |a − b| and the largest |a_j − b_j| / budget_j.
std::pair<double, double> worst(const Vec& a, const Vec& b, const Vec& budget) {
  double max_diff = 0, max_ratio = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const double d = std::fabs(a[j] - b[j]);
    if (!(d <= max_diff)) max_diff = d;
    const double ratio = d / budget[j];
    if (!(ratio <= max_ratio)) max_ratio = ratio;
  }
  return {max_diff, max_ratio};
}

}  // namespace

bool agree(Recorder& rec, const std::string& name, const std::string& what, const Vec& a,
           const Vec& b, const Vec& budget) {
  const auto [diff, ratio] = worst(a, b, budget);
  rec.value(name, diff);
  const bool ok = ratio <= 1.0;
  rec.row(what, "max |Δ| " + fmt(diff, 3) + " (" + fmt(ratio, 2) + "× its budget)",
          "every |Δ_j| ≤ its budget (largest " + fmt(*std::max_element(budget.begin(), budget.end()), 2) +
              ")",
          ok);
  return ok;
}

bool differ(Recorder& rec, const std::string& name, const std::string& what, const Vec& a,
            const Vec& b, const Vec& budget) {
  const auto [diff, ratio] = worst(a, b, budget);
  rec.value(name, diff);
  const bool ok = ratio > 1.0;
  rec.row(what, "max |Δ| " + fmt(diff, 3) + " (" + fmt(ratio, 3) + "× its budget)",
          "some |Δ_j| > its budget: a real difference, not rounding", ok);
  return ok;
}

Vec add(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (std::size_t j = 0; j < a.size(); ++j) out[j] = a[j] + b[j];
  return out;
}

Vec sub(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (std::size_t j = 0; j < a.size(); ++j) out[j] = a[j] - b[j];
  return out;
}

Vec absdiff(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (std::size_t j = 0; j < a.size(); ++j) out[j] = std::fabs(a[j] - b[j]);
  return out;
}

std::string dname(DType t) { return std::string(dtype_name(t)); }

}  // namespace normkit::lab
