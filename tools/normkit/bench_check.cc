#include "bench_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bench_impls.hpp"
#include "bounds.hpp"
#include "reference.hpp"

namespace normkit::bench {
namespace {

std::int64_t checked_rows(const Shape& s) { return std::min(s.rows, kCheckedRows); }

// The first `rows` rows of array a of set t (the checked rows unless said).
ConstMatrix rows_of(const Tensors& t, Array a, const Shape& s, std::int64_t rows) {
  return {t[a], s.act, rows, s.D, s.D, Device::cpu};
}
ConstMatrix rows_of(const Tensors& t, Array a, const Shape& s) { return rows_of(t, a, s, checked_rows(s)); }

ConstVector param_of(const Tensors& t, Array a, const Shape& s) {
  if (!t[a]) return {};
  return {t[a], s.param, s.D, Device::cpu};
}

reference::Forward oracle_forward(const Op& op, ConstMatrix x, ConstVector w, ConstVector b) {
  return op.norm == NormKind::layer_norm ? reference::layer_norm(x, w, b, kEps)
                                : reference::rms_norm(x, w, kEps);
}

// "" when every |got − ref| is within u_out·|ref| + growth·u_f32·scale;
// else the first element that is not, as [row, col] of (·, D) or [i] of a
// parameter gradient (D = 0).
std::string compare(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
                    const std::vector<double>& scale, DType out, double growth, std::int64_t D) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = reference::unit_roundoff(out) * std::abs(ref[i]) + growth * 0x1p-24 * scale[i];
    if (std::abs(got[i] - ref[i]) <= bound) continue;  // false for NaN too
    const auto n = static_cast<long long>(i);
    char where[64];
    if (D > 0) std::snprintf(where, sizeof where, "[row %lld, col %lld]", n / D, n % D);
    else std::snprintf(where, sizeof where, "[%lld]", n);
    char msg[256];
    std::snprintf(msg, sizeof msg, "%s%s = %.9g, fp64 oracle %.9g, bound %.3g", what, where, got[i], ref[i], bound);
    return msg;
  }
  return "";
}

// The activations' bound: 2(D + 4) for a row's outputs (bench_check.hpp).
std::string compare(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
                    const std::vector<double>& scale, const Shape& s) {
  return compare(what, got, ref, scale, s.act, 2.0 * (static_cast<double>(s.D) + 4.0), s.D);
}

// mean|x| per checked row: the statistics' absolute error in x̂ scales with
// rstd·mean|x| (see the bound in bench_check.hpp).
std::vector<double> mean_abs(const std::vector<double>& x, std::int64_t rows, std::int64_t D) {
  std::vector<double> m(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < D; ++j) m[r] += std::abs(x[r * D + j]);
    m[r] /= static_cast<double>(D);
  }
  return m;
}

// dweight = Σ_rows dy·x̂ and dbias = Σ_rows dy, against the oracle's over
// every row of the set (write_oracle_stats gave the call the oracle's
// statistics). Each term carries a few roundings (the statistics as stored,
// x̂, the product: fewer than the 9 allowed, oneDNN's variance included) and
// a float sum of `rows` terms, in any order, at most rows − 1 more:
//   |got − ref| ≤ u_param·|ref| + (rows + 8)·u_f32·Σ_rows |dy|·(|x̂| + rstd·|mean|)
// (dbias: Σ_rows |dy|).
std::string check_gradients(const Op& op, const Shape& s, const Tensors& t) {
  const std::int64_t D = s.D;
  const ConstMatrix x = rows_of(t, Array::x, s, s.rows), dy = rows_of(t, Array::dy, s, s.rows);
  const ConstVector w = param_of(t, Array::weight, s);
  const bool ln = op.norm == NormKind::layer_norm;
  const reference::Backward ref = ln ? reference::layer_norm_backward(dy, x, w, kEps)
                                     : reference::rms_norm_backward(dy, x, w, kEps);
  const reference::Forward f = oracle_forward(op, x, {}, {});
  const std::vector<double> xd = reference::to_double(x), dyd = reference::to_double(dy);
  std::vector<double> scale_w(static_cast<std::size_t>(D), 0.0), scale_b(scale_w);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const double rstd = f.rstd[r], mu = ln ? f.mean[r] : 0.0, shift = rstd * std::abs(mu);
    for (std::int64_t j = 0; j < D; ++j) {
      const double d = std::abs(dyd[r * D + j]);
      scale_w[j] += d * (std::abs((xd[r * D + j] - mu) * rstd) + shift);
      scale_b[j] += d;
    }
  }
  const double growth = static_cast<double>(s.rows) + 8.0;
  const auto got = [&](Array a) { return reference::to_double(param_of(t, a, s), D, 0.0); };
  if (auto e = compare("dweight", got(Array::dweight), ref.dweight, scale_w, s.param, growth, 0); !e.empty())
    return e;
  if (!op.writes.has(Array::dbias)) return "";
  return compare("dbias", got(Array::dbias), ref.dbias, scale_b, s.param, growth, 0);
}

// dx (dh for the fused backward and the add after the backward) of the
// checked rows.
std::string check_dx(const Op& op, const Shape& s, const Tensors& t) {
  const std::int64_t rows = checked_rows(s), D = s.D;
  const ConstMatrix x = rows_of(t, Array::x, s), dy = rows_of(t, Array::dy, s);
  const ConstVector w = param_of(t, Array::weight, s);
  const reference::Backward ref = op.norm == NormKind::layer_norm
                                      ? reference::layer_norm_backward(dy, x, w, kEps)
                                      : reference::rms_norm_backward(dy, x, w, kEps);
  const reference::Forward f = oracle_forward(op, x, w, {});
  const std::vector<double> xd = reference::to_double(x), dyd = reference::to_double(dy);
  const std::vector<double> g = reference::to_double(w, D, 1.0);
  const std::vector<double> mabs = mean_abs(xd, rows, D);

  std::vector<double> scale(xd.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double rstd = f.rstd[r], mu = op.norm == NormKind::layer_norm ? f.mean[r] : 0.0;
    const double shift = rstd * mabs[r];
    double mean_g = 0, mean_gx = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      const double gj = std::abs(g[j] * dyd[r * D + j]);
      mean_g += gj;
      mean_gx += gj * (std::abs((xd[r * D + j] - mu) * rstd) + shift);
    }
    mean_g /= static_cast<double>(D);
    mean_gx /= static_cast<double>(D);
    for (std::int64_t j = 0; j < D; ++j) {
      const double xh = std::abs((xd[r * D + j] - mu) * rstd) + shift;
      scale[r * D + j] = rstd * (std::abs(g[j] * dyd[r * D + j]) + mean_g + xh * mean_gx);
    }
  }
  if (op.pass == Pass::fused_backward) {  // dh = dx + dh_out, rounded once
    std::vector<double> want = reference::to_double(rows_of(t, Array::dh_out, s));
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += ref.dx[i];
    return compare("dh", reference::to_double(rows_of(t, Array::dh, s)), want, scale, s);
  }
  const std::vector<double> dx = reference::to_double(rows_of(t, Array::dx, s));
  if (auto e = compare("dx", dx, ref.dx, scale, s); !e.empty() || !is_two_calls(op.pass)) return e;
  // backward_then_add: the add's own contract, dh = dx + dh_out of the stored
  // dx rounded once to dh's dtype.
  std::vector<double> sum = reference::to_double(rows_of(t, Array::dh_out, s)), zero(sum.size(), 0.0);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += dx[i];
  return compare("dh", reference::to_double(rows_of(t, Array::dh, s)), sum, zero, s);
}

std::string check_backward(const Op& op, const Shape& s, const Tensors& t) {
  if (auto e = check_dx(op, s, t); !e.empty()) return e;
  return op.writes.has(Array::dweight) ? check_gradients(op, s, t) : "";
}

std::string check_forward(const Op& op, const Shape& s, const Tensors& t) {
  const std::int64_t rows = checked_rows(s), D = s.D;
  ConstMatrix in = rows_of(t, Array::x, s);
  if (op.pass == Pass::fused || op.pass == Pass::add_then_norm) {
    // h = x + residual, rounded once to h's dtype.
    const std::vector<double> x = reference::to_double(in);
    const std::vector<double> res = reference::to_double(rows_of(t, Array::residual, s));
    std::vector<double> sum(x.size()), zero(x.size(), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + res[i];
    in = rows_of(t, Array::h, s);
    if (auto e = compare("h", reference::to_double(in), sum, zero, s); !e.empty()) return e;
  }
  const ConstVector w = param_of(t, Array::weight, s), b = param_of(t, Array::bias, s);
  const reference::Forward f = oracle_forward(op, in, w, b);
  const std::vector<double> xd = reference::to_double(in);
  const std::vector<double> g = reference::to_double(w, D, 1.0), bias = reference::to_double(b, D, 0.0);
  const std::vector<double> mabs = mean_abs(xd, rows, D);
  std::vector<double> scale(xd.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double rstd = f.rstd[r], mu = op.norm == NormKind::layer_norm ? f.mean[r] : 0.0;
    for (std::int64_t j = 0; j < D; ++j)
      scale[r * D + j] = std::abs(g[j]) * (std::abs((xd[r * D + j] - mu) * rstd) + rstd * mabs[r]) +
                         std::abs(bias[j]);
  }
  return compare("y", reference::to_double(rows_of(t, Array::y, s)), f.y, scale, s);
}

}  // namespace

void write_oracle_stats(const Op& op, const Shape& s, const Tensors& t, bool variance) {
  if (!is_backward(op.pass)) return;
  const reference::Forward f = oracle_forward(op, rows_of(t, Array::x, s, s.rows), {}, {});
  auto* mean = reinterpret_cast<float*>(t[Array::mean]);
  auto* rstd = reinterpret_cast<float*>(t[Array::rstd]);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    if (mean) mean[r] = static_cast<float>(f.mean[r]);
    rstd[r] = static_cast<float>(variance ? 1.0 / (f.rstd[r] * f.rstd[r]) - kEps : f.rstd[r]);
  }
}

std::string check_outputs(const Op& op, const Shape& s, const Tensors& t) {
  return is_backward(op.pass) ? check_backward(op, s, t) : check_forward(op, s, t);
}

}  // namespace normkit::bench
