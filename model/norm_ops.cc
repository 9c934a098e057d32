#include "model/norm_ops.hpp"

#include "normkit/ops.hpp"

namespace normkit::model {

NormOps library_norm_ops() {
  // Lambdas rather than the functions' addresses: the public functions have
  // default arguments, and an overload may be added later.
  NormOps ops;
  ops.layer_norm = [](ConstMatrix x, ConstVector w, ConstVector b, double eps, Matrix y, Vector mean, Vector rstd) {
    normkit::layer_norm(x, w, b, eps, y, mean, rstd);
  };
  ops.rms_norm = [](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd, double offset) {
    normkit::rms_norm(x, w, eps, y, rstd, offset);
  };
  ops.add_layer_norm = [](ConstMatrix x, ConstMatrix r, ConstVector w, ConstVector b, double eps, Matrix h, Matrix y,
                          Vector mean, Vector rstd) { normkit::add_layer_norm(x, r, w, b, eps, h, y, mean, rstd); };
  ops.add_rms_norm = [](ConstMatrix x, ConstMatrix r, ConstVector w, double eps, Matrix h, Matrix y, Vector rstd,
                        double offset) { normkit::add_rms_norm(x, r, w, eps, h, y, rstd, offset); };
  ops.layer_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd, ConstVector w,
                               Matrix dx, Vector dw, Vector db) {
    normkit::layer_norm_backward(dy, x, mean, rstd, w, dx, dw, db);
  };
  ops.rms_norm_backward = [](ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector w, Matrix dx, Vector dw,
                             double offset) { normkit::rms_norm_backward(dy, x, rstd, w, dx, dw, offset); };
  ops.add_layer_norm_backward = [](ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean,
                                   ConstVector rstd, ConstVector w, Matrix dh, Vector dw, Vector db) {
    normkit::add_layer_norm_backward(dy, dh_out, h, mean, rstd, w, dh, dw, db);
  };
  ops.add_rms_norm_backward = [](ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector rstd, ConstVector w,
                                 Matrix dh, Vector dw, double offset) {
    normkit::add_rms_norm_backward(dy, dh_out, h, rstd, w, dh, dw, offset);
  };
  return ops;
}

}  // namespace normkit::model
