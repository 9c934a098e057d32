// Output arguments: the caller's array, or a new one in the framework, and
// on the device, of the array it is shaped after.
//
// New outputs of >= 1 MiB come from the output cache (output_cache.hpp),
// which keeps the pages of freed outputs; smaller ones from the framework:
// through the exchange API's allocator for a tensor (a C call, where
// torch.empty_like from Python costs ~1 µs), numpy.empty otherwise.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>

#include "array_import.hpp"
#include "normkit/normkit.hpp"
#include "rows_view.hpp"

namespace normkit_py {

struct Output {
  nanobind::object obj;  // what the call returns
  Array a;               // its view
};

// `given` itself (checked to be a writable array), or, when it is None, a
// new uninitialised row-major array of `dtype` and shape[0..ndim).
Output output(const char* fn, const char* arg, nanobind::handle given, const Array& like, normkit::DType dtype,
              int ndim, const std::int64_t* shape);
// An output of `like`'s shape and dtype.
Output output_like(const char* fn, const char* arg, nanobind::handle given, const Array& like);
// The per-row statistics of `x`: shape x.shape[:-k], f32 (f64 for f64 input).
Output stats_output(const char* fn, const char* arg, const Array& x, const NormShape& ns);
// A parameter gradient: none unless `wanted`; shaped and typed like `proto`,
// or `alt` when `proto` is absent (grad_bias without a bias takes the
// weight's), none when both are.
std::optional<Output> param_grad(const char* fn, const char* arg, bool wanted, const Opt& proto, const Opt& alt);

inline nanobind::object obj_or_none(const std::optional<Output>& o) { return o ? o->obj : nanobind::none(); }

// The vector view of an optional output; `shape`, if given, is the shape it
// must have.
inline normkit::Vector out_vector(const char* fn, const char* arg, const std::optional<Output>& o,
                                  const NormShape* shape) {
  return o ? to_vector<normkit::Vector>(fn, arg, o->a, shape) : normkit::Vector{};
}

}  // namespace normkit_py
