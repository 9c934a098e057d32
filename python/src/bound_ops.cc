#include "bound_ops.hpp"

#include <optional>

#include "array_import.hpp"
#include "call_scope.hpp"
#include "errors.hpp"
#include "normkit/normkit.hpp"
#include "outputs.hpp"
#include "rows_view.hpp"

namespace nb = nanobind;

namespace normkit_py {
namespace {

using normkit::ConstMatrix;
using normkit::ConstVector;
using normkit::Matrix;
using normkit::Vector;

constexpr const char* op_name(NormKind norm, bool add, bool grad) {
  if (norm == NormKind::layer_norm)
    return add ? (grad ? "add_layer_norm_backward" : "add_layer_norm") : (grad ? "layer_norm_backward" : "layer_norm");
  return add ? (grad ? "add_rms_norm_backward" : "add_rms_norm") : (grad ? "rms_norm_backward" : "rms_norm");
}

double get_eps(const char* fn, nb::handle h) {
  if (!PyFloat_Check(h.ptr()) && !PyLong_Check(h.ptr()))
    type_error(fn, "eps must be a float, got " + kind_of(h));
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return v;  // range checks (finite, >= 0) are the library's
}

}  // namespace

// Arguments are read, and outputs allocated, in one fixed order, so that of
// several bad arguments the same one is reported whichever op it is.
template <NormKind kNorm, bool kAdd>
nb::object forward(const ForwardArgs& a) {
  constexpr bool kLayer = kNorm == NormKind::layer_norm;
  constexpr const char* fn = op_name(kNorm, kAdd, false);
  const NormShape ns = get_normalized_shape(fn, a.normalized_shape);
  const Array x = get_array(fn, "input", a.input, false);
  Opt res, b;
  if constexpr (kAdd) res.a.emplace(get_array(fn, "residual", a.residual, false));
  const Opt w = get_optional(fn, "weight", a.weight, false);
  if constexpr (kLayer) b = get_optional(fn, "bias", a.bias, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  [[maybe_unused]] ConstMatrix resm{};
  if constexpr (kAdd) resm = to_matrix<ConstMatrix>(fn, "residual", *res.a, ns, &x, "input");
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  [[maybe_unused]] ConstVector bv{};
  if constexpr (kLayer) bv = opt_vector<ConstVector>(fn, "bias", b, &ns);
  const double e = get_eps(fn, a.eps);
  const Output y = output_like(fn, "out", a.out, x);
  std::optional<Output> h;
  if constexpr (kAdd) h = output_like(fn, "residual_out", a.residual_out, *res.a);
  const auto ym = to_matrix<Matrix>(fn, "out", y.a, ns, &x, "input");
  [[maybe_unused]] Matrix hm{};
  if constexpr (kAdd) hm = to_matrix<Matrix>(fn, "residual_out", h->a, ns, &x, "input");
  std::optional<Output> m, r;
  if (a.return_stats) {
    if constexpr (kLayer) m = stats_output(fn, "mean", x, ns);
    r = stats_output(fn, "rstd", x, ns);
  }
  [[maybe_unused]] const Vector mv = out_vector(fn, "mean", m, nullptr);
  const Vector rv = out_vector(fn, "rstd", r, nullptr);
  {
    const CallScope scope(fn, x);
    if constexpr (kLayer && !kAdd) {
      normkit::layer_norm(xm, wv, bv, e, ym, mv, rv);
    } else if constexpr (!kAdd) {
      normkit::rms_norm(xm, wv, e, ym, rv, a.weight_offset);
    } else if constexpr (kLayer) {
      normkit::add_layer_norm(xm, resm, wv, bv, e, hm, ym, mv, rv);
    } else {
      normkit::add_rms_norm(xm, resm, wv, e, hm, ym, rv, a.weight_offset);
    }
  }
  if constexpr (kAdd) {
    if (!a.return_stats) return nb::make_tuple(y.obj, h->obj);
    if constexpr (kLayer) return nb::make_tuple(y.obj, h->obj, m->obj, r->obj);
    return nb::make_tuple(y.obj, h->obj, r->obj);
  } else {
    if (!a.return_stats) return y.obj;
    if constexpr (kLayer) return nb::make_tuple(y.obj, m->obj, r->obj);
    return nb::make_tuple(y.obj, r->obj);
  }
}

template <NormKind kNorm, bool kAdd>
nb::object backward(const BackwardArgs& a) {
  constexpr bool kLayer = kNorm == NormKind::layer_norm;
  constexpr const char* fn = op_name(kNorm, kAdd, true);
  constexpr const char* x_name = kAdd ? "residual_out" : "input";
  const NormShape ns = get_normalized_shape(fn, a.normalized_shape);
  const Array dy = get_array(fn, "grad_output", a.grad_output, false);
  Opt dh_out, m, b;
  if constexpr (kAdd) dh_out = get_optional(fn, "grad_residual_out", a.grad_residual_out, false);
  const Array x = get_array(fn, x_name, a.input, false);
  if constexpr (kLayer) m.a.emplace(get_array(fn, "mean", a.mean, false));
  const Array r = get_array(fn, "rstd", a.rstd, false);
  const Opt w = get_optional(fn, "weight", a.weight, false);
  if constexpr (kLayer) b = get_optional(fn, "bias", a.bias, false);
  const auto xm = to_matrix<ConstMatrix>(fn, x_name, x, ns, nullptr, nullptr);
  const auto dym = to_matrix<ConstMatrix>(fn, "grad_output", dy, ns, &x, x_name);
  [[maybe_unused]] ConstMatrix dhom{};
  if constexpr (kAdd)
    if (dh_out.present()) dhom = to_matrix<ConstMatrix>(fn, "grad_residual_out", *dh_out.a, ns, &x, x_name);
  [[maybe_unused]] ConstVector mv{};
  if constexpr (kLayer) mv = to_vector<ConstVector>(fn, "mean", *m.a, nullptr);
  const auto rv = to_vector<ConstVector>(fn, "rstd", r, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const Output dx = output_like(fn, "out", a.out, x);
  const auto dxm = to_matrix<Matrix>(fn, "out", dx.a, ns, &x, x_name);
  const auto dw = param_grad(fn, "grad_weight", a.want_weight, w, w);
  std::optional<Output> db;
  if constexpr (kLayer) db = param_grad(fn, "grad_bias", a.want_bias, b, w);
  const Vector dwv = out_vector(fn, "grad_weight", dw, &ns);
  [[maybe_unused]] const Vector dbv = out_vector(fn, "grad_bias", db, &ns);
  {
    const CallScope scope(fn, dy);
    if constexpr (kLayer && !kAdd) {
      normkit::layer_norm_backward(dym, xm, mv, rv, wv, dxm, dwv, dbv);
    } else if constexpr (!kAdd) {
      normkit::rms_norm_backward(dym, xm, rv, wv, dxm, dwv, a.weight_offset);
    } else if constexpr (kLayer) {
      normkit::add_layer_norm_backward(dym, dhom, xm, mv, rv, wv, dxm, dwv, dbv);
    } else {
      normkit::add_rms_norm_backward(dym, dhom, xm, rv, wv, dxm, dwv, a.weight_offset);
    }
  }
  if constexpr (kLayer) return nb::make_tuple(dx.obj, obj_or_none(dw), obj_or_none(db));
  return nb::make_tuple(dx.obj, obj_or_none(dw));
}

template nb::object forward<NormKind::layer_norm, false>(const ForwardArgs&);
template nb::object forward<NormKind::rms_norm, false>(const ForwardArgs&);
template nb::object forward<NormKind::layer_norm, true>(const ForwardArgs&);
template nb::object forward<NormKind::rms_norm, true>(const ForwardArgs&);
template nb::object backward<NormKind::layer_norm, false>(const BackwardArgs&);
template nb::object backward<NormKind::rms_norm, false>(const BackwardArgs&);
template nb::object backward<NormKind::layer_norm, true>(const BackwardArgs&);
template nb::object backward<NormKind::rms_norm, true>(const BackwardArgs&);

}  // namespace normkit_py
