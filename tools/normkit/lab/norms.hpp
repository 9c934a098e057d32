// The normalization implementation a lab run puts under test. Every check
// reaches the norms only through this table, so a test can substitute a
// broken implementation and confirm that the check catches it. The default
// table is normkit's public API; the two negative controls below are the
// mistakes the texts warn about.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "normkit/tensor.hpp"

namespace normkit::lab {

struct Norms {
  std::string name;
  // The signatures of the public API in normkit/ops.hpp (weight_offset fixed
  // at 0: the lab uses plain gains).
  std::function<void(ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y,
                     Vector mean, Vector rstd)>
      layer_norm;
  std::function<void(ConstMatrix x, ConstVector weight, double eps, Matrix y, Vector rstd)> rms_norm;
  std::function<void(ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd,
                     ConstVector weight, Matrix dx, Vector dweight, Vector dbias)>
      layer_norm_backward;
  std::function<void(ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector weight, Matrix dx,
                     Vector dweight)>
      rms_norm_backward;
  std::function<void(ConstMatrix x, ConstMatrix residual, ConstVector weight, ConstVector bias,
                     double eps, Matrix h, Matrix y, Vector mean, Vector rstd)>
      add_layer_norm;
};

// normkit's public API (normkit/ops.hpp).
Norms library_norms();

// Negative control for feature_axis_causality: the forward norms take their
// statistics over a whole sequence — every group of seq_len consecutive rows,
// i.e. the (T, D) axes of a [B, T, D] tensor — instead of over each token's
// features. Everything else is the library's.
Norms sequence_axis_norms(std::int64_t seq_len);

// Negative control for low_precision_reference: for f16 inputs the forward
// norms do their arithmetic in f16 (every intermediate rounded to f16, as an
// implementation without f32 promotion would), so squares above 65504
// overflow. Other dtypes, and everything else, are the library's.
Norms unpromoted_f16_norms();

}  // namespace normkit::lab
