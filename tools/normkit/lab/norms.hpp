// The normalization implementation a lab run puts under test. Every check
// reaches the norms only through this table, so a test can substitute a
// broken implementation and confirm that the check catches it. The default
// table is normkit's public API; the negative controls below are the
// mistakes the texts warn about, or a mistake that only the targeted check
// can see. Each names the check it makes fail (docs/lab.md lists them).
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

// Negative control for worked_examples, residual_update_angle and
// runtime_arithmetic: every forward (the fused add included) writes zeros
// as its output y; statistics, h and the backward are the library's. A
// runtime check that only timed the norm could not tell it apart.
Norms zero_output_norms();

// Negative control for shift_scale: LayerNorm without centring, i.e.
// (x / √(mean(x²) + eps))·g + b, with its exact backward (fp64), in
// layer_norm, layer_norm_backward and add_layer_norm. RMSNorm is the
// library's. A shift of x then survives LayerNorm.
Norms uncentred_layer_norms();

// Negative control for gain_is_trained: the backward returns dweight = 0
// (and dbias = 0) while dx is the library's, so nothing trains the gain.
Norms frozen_gain_norms();

// Negative control for residual_growth (and zero_branch_jacobian's
// post-norm rows): add_layer_norm drops the residual, h = x and
// y = LayerNorm(x), so the stream never grows.
Norms residual_dropping_norms();

// Negative control for normalization_geometry: eps applied outside the root,
// rstd = 1/(√(mean square) + eps), for both norms, forward and exact
// backward (fp64). At eps = 0 it is the right norm; at eps > 0 the radial
// gain, the tangent gain and the Jacobian at x = 0 (I/eps, not I/√eps) move.
Norms eps_outside_root_norms();

}  // namespace normkit::lab
