#include "lab/norms.hpp"

#include <cmath>
#include <vector>

#include "lab/array.hpp"
#include "normkit/half.hpp"
#include "normkit/ops.hpp"
#include "reference.hpp"

namespace normkit::lab {

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

}  // namespace normkit::lab
