#include "rows_view.hpp"

#include <string>

#include "errors.hpp"

namespace nb = nanobind;

namespace normkit_py {

using normkit::ConstMatrix;
using normkit::ConstVector;
using normkit::Matrix;
using normkit::Vector;

NormShape get_normalized_shape(const char* fn, nb::handle h) {
  NormShape s;
  if (PyLong_Check(h.ptr())) {
    s.k = 1;
    s.dims[0] = PyLong_AsLongLong(h.ptr());
    if (s.dims[0] == -1 && PyErr_Occurred()) throw nb::python_error();
  } else {
    PyObject* seq = PySequence_Fast(h.ptr(), "");
    if (!seq) {
      PyErr_Clear();
      type_error(fn, "normalized_shape must be an int or a sequence of ints, got " + kind_of(h));
    }
    nb::object owner = nb::steal(seq);
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > kMaxDims) value_error(fn, "normalized_shape has too many dimensions");
    s.k = static_cast<int>(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
      if (!PyLong_Check(item) && !PyIndex_Check(item))
        type_error(fn, "normalized_shape must be an int or a sequence of ints, got an element of type " +
                           kind_of(item));
      s.dims[i] = PyLong_AsLongLong(item);
      if (s.dims[i] == -1 && PyErr_Occurred()) throw nb::python_error();
    }
  }
  if (s.k == 0) value_error(fn, "normalized_shape is empty; it must name at least one dimension");
  for (int i = 0; i < s.k; ++i)
    if (s.dims[i] < 0) value_error(fn, "normalized_shape " + shape_str(s.dims, s.k) + " has a negative size");
  return s;
}

RowsLayout rows_layout(int ndim, const std::int64_t* shape, const std::int64_t* strides, int k, RowsShape& out) {
  const int lead = ndim - k;
  std::int64_t D = 1, rows = 1;
  for (int i = lead; i < ndim; ++i) D *= shape[i];
  for (int i = 0; i < lead; ++i) rows *= shape[i];
  out = {rows, D, D};

  // Normalized dimensions: contiguous (size-1 dimensions have any stride).
  if (rows > 0) {
    std::int64_t expect = 1;
    for (int i = ndim - 1; i >= lead; --i) {
      if (shape[i] != 1 && strides[i] != expect) return RowsLayout::normalized_not_contiguous;
      expect *= shape[i];
    }
  }
  // Leading dimensions: one row stride must reach every row.
  std::int64_t expect = -1;
  for (int i = lead - 1; i >= 0 && rows > 1; --i) {
    if (shape[i] == 1) continue;
    if (expect < 0) {
      out.row_stride = strides[i];
      expect = strides[i] * shape[i];
    } else if (strides[i] != expect) {
      return RowsLayout::rows_not_one_stride;
    } else {
      expect *= shape[i];
    }
  }
  return rows > 1 && out.row_stride < D ? RowsLayout::overlapping_rows : RowsLayout::view;
}

template <class M>
M to_matrix(const char* fn, const char* arg, const Array& a, const NormShape& ns, const Array* like,
            const char* like_arg) {
  if (like) {
    bool same = a.ndim == like->ndim;
    for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == like->shape[i];
    if (!same)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) + ", expected the shape of " +
                          like_arg + " " + shape_str(like->shape, like->ndim));
  } else {
    bool match = a.ndim >= ns.k;
    for (int i = 0; match && i < ns.k; ++i) match = a.shape[a.ndim - ns.k + i] == ns.dims[i];
    if (!match)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) +
                          "; its trailing dimensions must equal normalized_shape " + shape_str(ns.dims, ns.k));
  }
  RowsShape s;
  switch (rows_layout(a.ndim, a.shape, a.strides, ns.k, s)) {
    case RowsLayout::view:
    case RowsLayout::overlapping_rows:  // the library's error names the row stride and D
      break;
    case RowsLayout::normalized_not_contiguous:
      value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                          shape_str(a.strides, a.ndim) +
                          ") is not contiguous over the normalized dimensions; make it contiguous first "
                          "(.contiguous() / numpy.ascontiguousarray)");
    case RowsLayout::rows_not_one_stride:
      value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                          shape_str(a.strides, a.ndim) +
                          ") has rows that no single row stride reaches; make it contiguous first "
                          "(.contiguous() / numpy.ascontiguousarray)");
  }
  using Ptr = decltype(M::data);
  return M{static_cast<Ptr>(a.data), a.dtype, s.rows, s.D, s.row_stride, a.device, device_index(a)};
}

template <class V>
V to_vector(const char* fn, const char* arg, const Array& a, const NormShape* expect_shape) {
  if (expect_shape) {
    bool same = a.ndim == expect_shape->k;
    for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == expect_shape->dims[i];
    if (!same)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) +
                          ", expected normalized_shape " + shape_str(expect_shape->dims, expect_shape->k));
  }
  std::int64_t expect = 1;
  for (int i = a.ndim - 1; i >= 0 && a.numel() > 0; --i) {
    if (a.shape[i] != 1 && a.strides[i] != expect)
      value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                          shape_str(a.strides, a.ndim) + ") must be contiguous");
    expect *= a.shape[i];
  }
  using Ptr = decltype(V::data);
  return V{static_cast<Ptr>(a.data), a.dtype, a.numel(), a.device, device_index(a)};
}

template ConstMatrix to_matrix<ConstMatrix>(const char*, const char*, const Array&, const NormShape&, const Array*,
                                            const char*);
template Matrix to_matrix<Matrix>(const char*, const char*, const Array&, const NormShape&, const Array*, const char*);
template ConstVector to_vector<ConstVector>(const char*, const char*, const Array&, const NormShape*);
template Vector to_vector<Vector>(const char*, const char*, const Array&, const NormShape*);

bool needs_copy(const Array& a, const NormShape& ns) {
  if (a.ndim < ns.k) return false;
  for (int i = 0; i < ns.k; ++i)
    if (a.shape[a.ndim - ns.k + i] != ns.dims[i]) return false;
  RowsShape s;
  return rows_layout(a.ndim, a.shape, a.strides, ns.k, s) != RowsLayout::view;
}

}  // namespace normkit_py
