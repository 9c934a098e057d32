#include "lab/norms.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "support/array.hpp"
#include "normkit/half.hpp"
#include "normkit/ops.hpp"
#include "reference.hpp"

namespace normkit::lab {

using support::store;

Norms library_norms() {
  Norms n;
  n.name = "normkit";
  n.layer_norm = [](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y, Vector mean,
                    Vector rstd) { normkit::layer_norm(x, w, b, eps, y, mean, rstd); };
  n.rms_norm = [](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd) {
    normkit::rms_norm(x, w, eps, y, rstd);
  };
  n.layer_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd,
                             ConstVector w, Matrix dx, Vector dw, Vector db) {
    normkit::layer_norm_backward(dy, x, mean, rstd, w, dx, dw, db);
  };
  n.rms_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector w, Matrix dx,
                           Vector dw) { normkit::rms_norm_backward(dy, x, rstd, w, dx, dw); };
  n.add_layer_norm = [](ConstMatrix x, ConstMatrix residual, ConstVector w, ConstVector b, double eps,
                        Matrix h, Matrix y, Vector mean, Vector rstd) {
    normkit::add_layer_norm(x, residual, w, b, eps, h, y, mean, rstd);
  };
  return n;
}

namespace {

// One forward over groups of `group` rows: the statistics of each group are
// taken over all of its group·D elements (fp64), and every row of the group
// is normalized with them. group == 1 would be the correct token-wise norm.
void grouped_forward(bool layer, std::int64_t group, ConstMatrix x, ConstVector weight,
                     ConstVector bias, double eps, Matrix y, Vector mean_out, Vector rstd_out) {
  const std::int64_t D = x.cols;
  const std::vector<double> xs = reference::to_double(x);
  const std::vector<double> w = reference::to_double(weight, D, 1.0);
  const std::vector<double> b = reference::to_double(bias, D, 0.0);
  for (std::int64_t r0 = 0; r0 < x.rows; r0 += group) {
    const std::int64_t r1 = std::min(x.rows, r0 + group);
    const double n = static_cast<double>((r1 - r0) * D);
    double mean = 0;
    if (layer) {
      for (std::int64_t i = r0 * D; i < r1 * D; ++i) mean += xs[i];
      mean /= n;
    }
    double q = 0;
    for (std::int64_t i = r0 * D; i < r1 * D; ++i) q += (xs[i] - mean) * (xs[i] - mean);
    const double rstd = 1.0 / std::sqrt(q / n + eps);
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t j = 0; j < D; ++j)
        store(y.data, y.dtype, r * y.row_stride + j, (xs[r * D + j] - mean) * rstd * w[j] + b[j]);
      if (mean_out.present()) store(mean_out.data, mean_out.dtype, r, mean);
      if (rstd_out.present()) store(rstd_out.data, rstd_out.dtype, r, rstd);
    }
  }
}

// Rounds every intermediate to f16, as f16 arithmetic would.
float f16_round(float v) { return to_float(to_f16(v)); }

// A forward computed entirely in f16 arithmetic: the sum of squares (of x for
// RMSNorm, of x − mean for LayerNorm) is accumulated in f16.
void f16_forward(bool layer, ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y,
                 Vector mean_out, Vector rstd_out) {
  const std::int64_t D = x.cols;
  const std::vector<double> w = reference::to_double(weight, D, 1.0);
  const std::vector<double> b = reference::to_double(bias, D, 0.0);
  const auto* xs = static_cast<const half_t*>(x.data);
  const float d = static_cast<float>(D);
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const half_t* xr = xs + r * x.row_stride;
    float mean = 0;
    if (layer) {
      for (std::int64_t j = 0; j < D; ++j) mean = f16_round(mean + to_float(xr[j]));
      mean = f16_round(mean / d);
    }
    float q = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      const float c = f16_round(to_float(xr[j]) - mean);
      q = f16_round(q + f16_round(c * c));
    }
    const float ms = f16_round(q / d);
    const float rstd = f16_round(1.0f / std::sqrt(f16_round(ms + f16_round(static_cast<float>(eps)))));
    for (std::int64_t j = 0; j < D; ++j) {
      const float xhat = f16_round(f16_round(to_float(xr[j]) - mean) * rstd);
      const float v = f16_round(f16_round(xhat * static_cast<float>(w[j])) + static_cast<float>(b[j]));
      store(y.data, y.dtype, r * y.row_stride + j, v);
    }
    if (mean_out.present()) store(mean_out.data, mean_out.dtype, r, mean);
    if (rstd_out.present()) store(rstd_out.data, rstd_out.dtype, r, rstd);
  }
}

// A forward or backward with one deliberate change of the formula, in fp64:
// `centre` subtracts the row mean (LayerNorm) or not; `eps_outside_root`
// takes rstd = 1/(√m2 + eps) instead of 1/√(m2 + eps), m2 the mean square of
// the (centred) row.
struct Variant {
  bool centre;
  bool eps_outside_root;
};

void variant_forward(Variant v, ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y,
                     Vector mean_out, Vector rstd_out) {
  const std::int64_t D = x.cols;
  const std::vector<double> xs = reference::to_double(x);
  const std::vector<double> w = reference::to_double(weight, D, 1.0);
  const std::vector<double> b = reference::to_double(bias, D, 0.0);
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const double* xr = xs.data() + r * D;
    double mu = 0;
    if (v.centre) {
      for (std::int64_t j = 0; j < D; ++j) mu += xr[j];
      mu /= static_cast<double>(D);
    }
    double m2 = 0;
    for (std::int64_t j = 0; j < D; ++j) m2 += (xr[j] - mu) * (xr[j] - mu);
    m2 /= static_cast<double>(D);
    const double rstd = v.eps_outside_root ? 1.0 / (std::sqrt(m2) + eps) : 1.0 / std::sqrt(m2 + eps);
    for (std::int64_t j = 0; j < D; ++j)
      store(y.data, y.dtype, r * y.row_stride + j, (xr[j] - mu) * rstd * w[j] + b[j]);
    if (mean_out.present()) store(mean_out.data, mean_out.dtype, r, mu);
    if (rstd_out.present()) store(rstd_out.data, rstd_out.dtype, r, rstd);
  }
}

// The exact backward of variant_forward, with rstd as it saved it. With
// c = x − μ (or x), m2 = mean(c²), x̂ = c·rstd(m2) and g = gain·dy:
//   ∂L/∂c_k = rstd·g_k + (Σ_j g_j c_j)·rstd'(m2)·2c_k/D,
//   rstd' = −rstd³/2 (eps inside) or −rstd²/(2√m2) (eps outside),
// and centring subtracts the mean of ∂L/∂c over k.
void variant_backward(Variant v, ConstMatrix dy, ConstMatrix x, ConstVector rstd_in, ConstVector weight,
                      Matrix dx, Vector dweight, Vector dbias) {
  const std::int64_t D = x.cols;
  const std::vector<double> xs = reference::to_double(x), dys = reference::to_double(dy);
  const std::vector<double> w = reference::to_double(weight, D, 1.0);
  const std::vector<double> rs = reference::to_double(rstd_in, x.rows, 1.0);
  std::vector<double> dw(static_cast<std::size_t>(D), 0.0), db(static_cast<std::size_t>(D), 0.0);
  std::vector<double> c(static_cast<std::size_t>(D)), dc(static_cast<std::size_t>(D));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const double* xr = xs.data() + r * D;
    const double* dyr = dys.data() + r * D;
    double mu = 0;
    if (v.centre) {
      for (std::int64_t j = 0; j < D; ++j) mu += xr[j];
      mu /= static_cast<double>(D);
    }
    double m2 = 0, s = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      c[j] = xr[j] - mu;
      m2 += c[j] * c[j];
      s += w[j] * dyr[j] * c[j];
    }
    m2 /= static_cast<double>(D);
    const double rstd = rs[r];
    // At m2 = 0 every c_k is 0, so the second term vanishes whatever rstd' is.
    const double drstd = m2 == 0 ? 0.0
                         : v.eps_outside_root ? -rstd * rstd / (2.0 * std::sqrt(m2))
                                              : -0.5 * rstd * rstd * rstd;
    double mean_dc = 0;
    for (std::int64_t j = 0; j < D; ++j) {
      dc[j] = rstd * w[j] * dyr[j] + s * drstd * 2.0 * c[j] / static_cast<double>(D);
      mean_dc += dc[j] / static_cast<double>(D);
      dw[j] += dyr[j] * c[j] * rstd;
      db[j] += dyr[j];
    }
    for (std::int64_t j = 0; j < D; ++j)
      store(dx.data, dx.dtype, r * dx.row_stride + j, dc[j] - (v.centre ? mean_dc : 0.0));
  }
  for (std::int64_t j = 0; j < D; ++j) {
    if (dweight.present()) store(dweight.data, dweight.dtype, j, dw[j]);
    if (dbias.present()) store(dbias.data, dbias.dtype, j, db[j]);
  }
}

void fill_matrix(Matrix m, double v) {
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t j = 0; j < m.cols; ++j) store(m.data, m.dtype, r * m.row_stride + j, v);
}

void fill_vector(Vector v, double value) {
  if (!v.present()) return;
  for (std::int64_t i = 0; i < v.size; ++i) store(v.data, v.dtype, i, value);
}

// The table of a variant: the library's entry points run first, so the
// control rejects the arguments the library rejects (the worked examples
// count on that), and then its own formula overwrites what they wrote.
Norms variant_norms(std::string name, Variant ln, std::optional<Variant> rms) {
  Norms n = library_norms();
  n.name = std::move(name);
  n.layer_norm = [ln](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y, Vector mean,
                      Vector rstd) {
    normkit::layer_norm(x, w, b, eps, y, mean, rstd);
    variant_forward(ln, x, w, b, eps, y, mean, rstd);
  };
  n.layer_norm_backward = [ln](ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd, ConstVector w,
                               Matrix dx, Vector dw, Vector db) {
    normkit::layer_norm_backward(dy, x, mean, rstd, w, dx, dw, db);
    variant_backward(ln, dy, x, rstd, w, dx, dw, db);
  };
  n.add_layer_norm = [ln](ConstMatrix x, ConstMatrix residual, ConstVector w, ConstVector b, double eps, Matrix h,
                          Matrix y, Vector mean, Vector rstd) {
    normkit::add_layer_norm(x, residual, w, b, eps, h, y, mean, rstd);
    variant_forward(ln, h, w, b, eps, y, mean, rstd);
  };
  if (rms) {
    const Variant v = *rms;
    n.rms_norm = [v](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd) {
      normkit::rms_norm(x, w, eps, y, rstd);
      variant_forward(v, x, w, {}, eps, y, {}, rstd);
    };
    n.rms_norm_backward = [v](ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector w, Matrix dx,
                              Vector dw) {
      normkit::rms_norm_backward(dy, x, rstd, w, dx, dw);
      variant_backward(v, dy, x, rstd, w, dx, dw, {});
    };
  }
  return n;
}

}  // namespace

Norms sequence_axis_norms(std::int64_t seq_len) {
  Norms n = library_norms();
  n.name = "statistics over (T, D)";
  n.layer_norm = [seq_len](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y,
                           Vector mean, Vector rstd) {
    grouped_forward(true, seq_len, x, w, b, eps, y, mean, rstd);
  };
  n.rms_norm = [seq_len](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd) {
    grouped_forward(false, seq_len, x, w, {}, eps, y, {}, rstd);
  };
  return n;
}

Norms unpromoted_f16_norms() {
  Norms n = library_norms();
  n.name = "f16 arithmetic, no f32 promotion";
  n.layer_norm = [](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y, Vector mean,
                    Vector rstd) {
    if (x.dtype == DType::f16)
      f16_forward(true, x, w, b, eps, y, mean, rstd);
    else
      normkit::layer_norm(x, w, b, eps, y, mean, rstd);
  };
  n.rms_norm = [](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd) {
    if (x.dtype == DType::f16)
      f16_forward(false, x, w, {}, eps, y, {}, rstd);
    else
      normkit::rms_norm(x, w, eps, y, rstd);
  };
  return n;
}

Norms zero_output_norms() {
  Norms n = library_norms();
  n.name = "forward writes zeros";
  n.layer_norm = [](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y, Vector mean, Vector rstd) {
    normkit::layer_norm(x, w, b, eps, y, mean, rstd);
    fill_matrix(y, 0.0);
  };
  n.rms_norm = [](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd) {
    normkit::rms_norm(x, w, eps, y, rstd);
    fill_matrix(y, 0.0);
  };
  n.add_layer_norm = [](ConstMatrix x, ConstMatrix residual, ConstVector w, ConstVector b, double eps, Matrix h,
                        Matrix y, Vector mean, Vector rstd) {
    normkit::add_layer_norm(x, residual, w, b, eps, h, y, mean, rstd);
    fill_matrix(y, 0.0);
  };
  return n;
}

Norms uncentred_layer_norms() {
  return variant_norms("LayerNorm without centring", {.centre = false, .eps_outside_root = false}, std::nullopt);
}

Norms frozen_gain_norms() {
  Norms n = library_norms();
  n.name = "backward with dweight = 0";
  n.layer_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd, ConstVector w,
                             Matrix dx, Vector dw, Vector db) {
    normkit::layer_norm_backward(dy, x, mean, rstd, w, dx, dw, db);
    fill_vector(dw, 0.0);
    fill_vector(db, 0.0);
  };
  n.rms_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector w, Matrix dx, Vector dw) {
    normkit::rms_norm_backward(dy, x, rstd, w, dx, dw);
    fill_vector(dw, 0.0);
  };
  return n;
}

Norms residual_dropping_norms() {
  Norms n = library_norms();
  n.name = "fused add that drops the residual";
  n.add_layer_norm = [](ConstMatrix x, ConstMatrix residual, ConstVector w, ConstVector b, double eps, Matrix h,
                        Matrix y, Vector mean, Vector rstd) {
    normkit::add_layer_norm(x, residual, w, b, eps, h, y, mean, rstd);
    const std::vector<double> xs = reference::to_double(x);
    for (std::int64_t r = 0; r < x.rows; ++r)
      for (std::int64_t j = 0; j < x.cols; ++j) store(h.data, h.dtype, r * h.row_stride + j, xs[r * x.cols + j]);
    normkit::layer_norm(x, w, b, eps, y, mean, rstd);
  };
  return n;
}

Norms eps_outside_root_norms() {
  return variant_norms("eps outside the root", {.centre = true, .eps_outside_root = true},
                       Variant{.centre = false, .eps_outside_root = true});
}

}  // namespace normkit::lab
