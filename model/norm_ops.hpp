// normkit model — the norm calls the model makes, as a table.
//
// The model reaches normalization only through this table. Its default is
// normkit's public API; the lab substitutes a deliberately wrong norm (one
// whose statistics run over a whole sequence, say) to show that its
// model-level checks catch it. The signatures are those of normkit/ops.hpp.
#pragma once

#include <functional>

#include "normkit/tensor.hpp"

namespace normkit::model {

struct NormOps {
  std::function<void(ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y, Vector mean,
                     Vector rstd)>
      layer_norm;
  std::function<void(ConstMatrix x, ConstVector weight, double eps, Matrix y, Vector rstd, double weight_offset)>
      rms_norm;
  std::function<void(ConstMatrix x, ConstMatrix residual, ConstVector weight, ConstVector bias, double eps,
                     Matrix h, Matrix y, Vector mean, Vector rstd)>
      add_layer_norm;
  std::function<void(ConstMatrix x, ConstMatrix residual, ConstVector weight, double eps, Matrix h, Matrix y,
                     Vector rstd, double weight_offset)>
      add_rms_norm;
  std::function<void(ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd, ConstVector weight,
                     Matrix dx, Vector dweight, Vector dbias)>
      layer_norm_backward;
  std::function<void(ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector weight, Matrix dx,
                     Vector dweight, double weight_offset)>
      rms_norm_backward;
  std::function<void(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean, ConstVector rstd,
                     ConstVector weight, Matrix dh, Vector dweight, Vector dbias)>
      add_layer_norm_backward;
  std::function<void(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector rstd, ConstVector weight,
                     Matrix dh, Vector dweight, double weight_offset)>
      add_rms_norm_backward;
};

// normkit's public API (normkit/ops.hpp).
NormOps library_norm_ops();

}  // namespace normkit::model
