// The eight bound ops, as two templates: forward (layer_norm, rms_norm,
// add_layer_norm, add_rms_norm) and backward (their *_backward). The four
// of each read their arguments, allocate their outputs and call the library
// in the same order; they differ only in which arguments they have (a
// residual, a bias and mean, a weight_offset), which the template
// parameters select.
//
// Each turns its array arguments into normkit views without copying
// (array_import.hpp, rows_view.hpp), allocates the outputs the caller did
// not pass (outputs.hpp), calls the library with the GIL released
// (call_scope.hpp) and returns the outputs. Argument validation beyond "is
// this an array, and which (rows, D) view is it" is the library's, whose
// normkit::Error arrives in Python as ValueError (module.cc).
#pragma once

#include <nanobind/nanobind.h>

#include "support/norm_kind.hpp"

namespace normkit_py {

using normkit::NormKind;

// Arguments by their Python names; the ones an op does not have stay unset
// and are never read.
struct ForwardArgs {
  nanobind::handle input{}, residual{}, normalized_shape{}, weight{}, bias{}, eps{}, out{}, residual_out{};
  double weight_offset = 0.0;
  bool return_stats = false;
};

// y, or (y, [mean,] rstd) with return_stats; the fused ops (kAdd) return
// (y, h) or (y, h, [mean,] rstd). mean is LayerNorm's only.
template <NormKind kNorm, bool kAdd>
nanobind::object forward(const ForwardArgs& a);

// `input` is the plain ops' input; the fused ops' backward reads
// residual_out (h) in its place and adds grad_residual_out (optional).
struct BackwardArgs {
  nanobind::handle grad_output{}, grad_residual_out{}, input{}, normalized_shape{}, mean{}, rstd{}, weight{},
      bias{}, out{};
  double weight_offset = 0.0;
  bool want_weight = false, want_bias = false;
};

// (grad_input, grad_weight[, grad_bias]); a parameter gradient is None
// unless wanted and it has a prototype: grad_weight is shaped like weight,
// grad_bias like bias (or weight when no bias is given).
template <NormKind kNorm, bool kAdd>
nanobind::object backward(const BackwardArgs& a);

extern template nanobind::object forward<NormKind::layer_norm, false>(const ForwardArgs&);
extern template nanobind::object forward<NormKind::rms_norm, false>(const ForwardArgs&);
extern template nanobind::object forward<NormKind::layer_norm, true>(const ForwardArgs&);
extern template nanobind::object forward<NormKind::rms_norm, true>(const ForwardArgs&);
extern template nanobind::object backward<NormKind::layer_norm, false>(const BackwardArgs&);
extern template nanobind::object backward<NormKind::rms_norm, false>(const BackwardArgs&);
extern template nanobind::object backward<NormKind::layer_norm, true>(const BackwardArgs&);
extern template nanobind::object backward<NormKind::rms_norm, true>(const BackwardArgs&);

}  // namespace normkit_py
