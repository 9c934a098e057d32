// The rule for viewing an array as (rows, D), in one place: the binding
// builds the library's views with it, and the Python package asks it
// (rows_layout through `_normkit.needs_copy`) before handing a tensor over.
//
// An array of shape (*lead, *normalized_shape) is the (rows, D) view with
// rows = prod(lead) and D = prod(normalized_shape). The normalized
// dimensions must be contiguous (size-1 dimensions may have any stride); the
// leading dimensions must be reachable with one row stride (any slicing of
// rows, a column block of a wider buffer, a padded layout), and the library
// takes that stride only when it is >= D (no two rows overlap). Anything
// else is an error, never a copy.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>

#include "array_import.hpp"
#include "normkit/normkit.hpp"

namespace normkit_py {

// normalized_shape: an int or a sequence of ints, each >= 0, at least one.
struct NormShape {
  int k = 0;  // number of normalized (trailing) dimensions
  std::int64_t dims[kMaxDims] = {};
};
NormShape get_normalized_shape(const char* fn, nanobind::handle h);

// What a layout is, read from shape and strides (in elements) alone.
enum class RowsLayout {
  view,                       // a (rows, D) view the library takes
  overlapping_rows,           // one row stride reaches every row, but it is < D
  normalized_not_contiguous,  // the normalized dimensions are not contiguous
  rows_not_one_stride,        // no single row stride reaches every row
};
struct RowsShape {
  std::int64_t rows = 1, D = 1, row_stride = 0;
};
// The layout of an array whose last `k` (<= ndim) dimensions are normalized,
// and its rows, D and row stride (meaningful for view and overlapping_rows).
RowsLayout rows_layout(int ndim, const std::int64_t* shape, const std::int64_t* strides, int k, RowsShape& out);

// The (rows, D) view of activation array `a` whose trailing dimensions are
// `ns`. `like`, if given, is the array whose shape `a` must equal (named
// `like_arg` in errors); else its trailing dimensions must equal `ns`.
// Overlapping rows are passed on for the library to reject.
template <class M>
M to_matrix(const char* fn, const char* arg, const Array& a, const NormShape& ns, const Array* like,
            const char* like_arg);

// A (n) vector view of `a`: any shape, contiguous. `expect_shape`, if given,
// is the shape it must have (weights and biases: normalized_shape).
template <class V>
V to_vector(const char* fn, const char* arg, const Array& a, const NormShape* expect_shape);

template <class V>
V opt_vector(const char* fn, const char* arg, const Opt& o, const NormShape* expect_shape) {
  return o.present() ? to_vector<V>(fn, arg, *o.a, expect_shape) : V{};
}

// Whether `a`, with trailing dimensions `ns`, must be copied to a contiguous
// array for the library to take it: true exactly when its trailing
// dimensions are `ns` and its layout is not a view. (With other trailing
// dimensions no copy helps: the call fails on the shape.)
bool needs_copy(const Array& a, const NormShape& ns);

}  // namespace normkit_py
