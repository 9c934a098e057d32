// normkit._normkit — the Python binding of include/normkit/ops.hpp: the
// bindings only. What each piece decides lives in its own file:
//
//   dlpack_exchange.hpp   the DLPack C exchange API, declared by layout
//   array_import.hpp      a Python array argument as a borrowed, zero-copy view
//   rows_view.hpp         the rule for viewing an array as (rows, D)
//   outputs.hpp           outputs the caller did not pass, in the caller's framework
//   output_cache.hpp      the blocks that large outputs come from
//   call_scope.hpp        device, stream and GIL for one library call
//   bound_ops.hpp         the eight ops, as one forward and one backward template
//
// Default arguments and autograd live in the Python package (python/normkit).
#include <nanobind/nanobind.h>

#include <cstddef>
#include <exception>

#include "array_import.hpp"
#include "bound_ops.hpp"
#include "normkit/normkit.hpp"
#include "output_cache.hpp"
#include "rows_view.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using normkit_py::BackwardArgs;
using normkit_py::ForwardArgs;
using normkit::NormKind;

NB_MODULE(_normkit, m) {
  m.doc() = "Low-level binding of the normkit C++ library: arguments are positional and outputs "
            "passed as None are allocated here; use the functions of the `normkit` package instead.";

  // The library's errors keep their message: a dtype problem is a TypeError,
  // any other invalid argument a ValueError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const normkit::DTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const normkit::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("version", &normkit::version, "The version of the linked normkit library.");
  m.def("cpu_simd_target", &normkit::cpu_simd_target, "The SIMD target the CPU kernels run.");
  m.def("set_num_threads", &normkit::set_num_threads, "n"_a);
  m.def("num_threads", &normkit::num_threads);
  m.def("has_cuda_backend", &normkit::has_cuda_backend);
  m.def("cuda_device_count", &normkit::cuda_device_count);
  m.def("set_output_cache_limit", [](std::size_t n) { normkit_py::OutputCache::get().set_limit(n); }, "nbytes"_a);
  m.def("empty_output_cache", [] { normkit_py::OutputCache::get().empty(); });
  m.def("output_cache_info", [] {
    const auto i = normkit_py::OutputCache::get().info();
    nb::dict d;
    d["limit_bytes"] = i.limit_bytes;
    d["cached_bytes"] = i.cached_bytes;
    d["cached_blocks"] = i.cached_blocks;
    d["live_bytes"] = i.live_bytes;
    d["live_blocks"] = i.live_blocks;
    d["hits"] = i.hits;
    d["misses"] = i.misses;
    return d;
  });

  // rows_view.hpp's rule, for the PyTorch layer (normkit._torch_ops.as_rows).
  // An argument the ops would refuse (not an array, an unsupported dtype, a
  // bad normalized_shape) needs no copy: the op itself then reports it, in
  // its own words.
  m.def(
      "needs_copy",
      [](nb::handle array, nb::handle normalized_shape) {
        const char* fn = "needs_copy";
        try {
          const normkit_py::NormShape ns = normkit_py::get_normalized_shape(fn, normalized_shape);
          return normkit_py::needs_copy(normkit_py::get_array(fn, "array", array, false), ns);
        } catch (const nb::builtin_exception&) {
          return false;
        }
      },
      "array"_a, "normalized_shape"_a,
      "Whether `array` must be made contiguous for the kernels to take it as (rows, D).");

  // Positional-only in practice: the Python package calls these with every
  // argument in order (keyword parsing would cost more than some kernels).
  m.def(
      "layer_norm",
      [](nb::handle input, nb::handle normalized_shape, nb::handle weight, nb::handle bias, nb::handle eps,
         nb::handle out, bool return_stats) {
        return normkit_py::forward<NormKind::layer_norm, false>(ForwardArgs{.input = input,
                                                                   .normalized_shape = normalized_shape,
                                                                   .weight = weight,
                                                                   .bias = bias,
                                                                   .eps = eps,
                                                                   .out = out,
                                                                   .return_stats = return_stats});
      },
      "input"_a, "normalized_shape"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, "out"_a.none(),
      "return_stats"_a);
  m.def(
      "rms_norm",
      [](nb::handle input, nb::handle normalized_shape, nb::handle weight, nb::handle eps, double weight_offset,
         nb::handle out, bool return_stats) {
        return normkit_py::forward<NormKind::rms_norm, false>(ForwardArgs{.input = input,
                                                                 .normalized_shape = normalized_shape,
                                                                 .weight = weight,
                                                                 .eps = eps,
                                                                 .out = out,
                                                                 .weight_offset = weight_offset,
                                                                 .return_stats = return_stats});
      },
      "input"_a, "normalized_shape"_a, "weight"_a.none(), "eps"_a, "weight_offset"_a, "out"_a.none(),
      "return_stats"_a);
  m.def(
      "add_layer_norm",
      [](nb::handle input, nb::handle residual, nb::handle normalized_shape, nb::handle weight, nb::handle bias,
         nb::handle eps, nb::handle out, nb::handle residual_out, bool return_stats) {
        return normkit_py::forward<NormKind::layer_norm, true>(ForwardArgs{.input = input,
                                                                  .residual = residual,
                                                                  .normalized_shape = normalized_shape,
                                                                  .weight = weight,
                                                                  .bias = bias,
                                                                  .eps = eps,
                                                                  .out = out,
                                                                  .residual_out = residual_out,
                                                                  .return_stats = return_stats});
      },
      "input"_a, "residual"_a, "normalized_shape"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a,
      "out"_a.none(), "residual_out"_a.none(), "return_stats"_a);
  m.def(
      "add_rms_norm",
      [](nb::handle input, nb::handle residual, nb::handle normalized_shape, nb::handle weight, nb::handle eps,
         double weight_offset, nb::handle out, nb::handle residual_out, bool return_stats) {
        return normkit_py::forward<NormKind::rms_norm, true>(ForwardArgs{.input = input,
                                                                .residual = residual,
                                                                .normalized_shape = normalized_shape,
                                                                .weight = weight,
                                                                .eps = eps,
                                                                .out = out,
                                                                .residual_out = residual_out,
                                                                .weight_offset = weight_offset,
                                                                .return_stats = return_stats});
      },
      "input"_a, "residual"_a, "normalized_shape"_a, "weight"_a.none(), "eps"_a, "weight_offset"_a,
      "out"_a.none(), "residual_out"_a.none(), "return_stats"_a);
  m.def(
      "layer_norm_backward",
      [](nb::handle grad_output, nb::handle input, nb::handle normalized_shape, nb::handle mean, nb::handle rstd,
         nb::handle weight, nb::handle bias, nb::handle out, bool want_weight, bool want_bias) {
        return normkit_py::backward<NormKind::layer_norm, false>(BackwardArgs{.grad_output = grad_output,
                                                                     .input = input,
                                                                     .normalized_shape = normalized_shape,
                                                                     .mean = mean,
                                                                     .rstd = rstd,
                                                                     .weight = weight,
                                                                     .bias = bias,
                                                                     .out = out,
                                                                     .want_weight = want_weight,
                                                                     .want_bias = want_bias});
      },
      "grad_output"_a, "input"_a, "normalized_shape"_a, "mean"_a, "rstd"_a, "weight"_a.none(), "bias"_a.none(),
      "out"_a.none(), "want_weight"_a, "want_bias"_a);
  m.def(
      "rms_norm_backward",
      [](nb::handle grad_output, nb::handle input, nb::handle normalized_shape, nb::handle rstd, nb::handle weight,
         double weight_offset, nb::handle out, bool want_weight) {
        return normkit_py::backward<NormKind::rms_norm, false>(BackwardArgs{.grad_output = grad_output,
                                                                   .input = input,
                                                                   .normalized_shape = normalized_shape,
                                                                   .rstd = rstd,
                                                                   .weight = weight,
                                                                   .out = out,
                                                                   .weight_offset = weight_offset,
                                                                   .want_weight = want_weight});
      },
      "grad_output"_a, "input"_a, "normalized_shape"_a, "rstd"_a, "weight"_a.none(), "weight_offset"_a,
      "out"_a.none(), "want_weight"_a);
  m.def(
      "add_layer_norm_backward",
      [](nb::handle grad_output, nb::handle grad_residual_out, nb::handle residual_out, nb::handle normalized_shape,
         nb::handle mean, nb::handle rstd, nb::handle weight, nb::handle bias, nb::handle out, bool want_weight,
         bool want_bias) {
        return normkit_py::backward<NormKind::layer_norm, true>(BackwardArgs{.grad_output = grad_output,
                                                                    .grad_residual_out = grad_residual_out,
                                                                    .input = residual_out,
                                                                    .normalized_shape = normalized_shape,
                                                                    .mean = mean,
                                                                    .rstd = rstd,
                                                                    .weight = weight,
                                                                    .bias = bias,
                                                                    .out = out,
                                                                    .want_weight = want_weight,
                                                                    .want_bias = want_bias});
      },
      "grad_output"_a, "grad_residual_out"_a.none(), "residual_out"_a, "normalized_shape"_a, "mean"_a, "rstd"_a,
      "weight"_a.none(), "bias"_a.none(), "out"_a.none(), "want_weight"_a, "want_bias"_a);
  m.def(
      "add_rms_norm_backward",
      [](nb::handle grad_output, nb::handle grad_residual_out, nb::handle residual_out, nb::handle normalized_shape,
         nb::handle rstd, nb::handle weight, double weight_offset, nb::handle out, bool want_weight) {
        return normkit_py::backward<NormKind::rms_norm, true>(BackwardArgs{.grad_output = grad_output,
                                                                  .grad_residual_out = grad_residual_out,
                                                                  .input = residual_out,
                                                                  .normalized_shape = normalized_shape,
                                                                  .rstd = rstd,
                                                                  .weight = weight,
                                                                  .out = out,
                                                                  .weight_offset = weight_offset,
                                                                  .want_weight = want_weight});
      },
      "grad_output"_a, "grad_residual_out"_a.none(), "residual_out"_a, "normalized_shape"_a, "rstd"_a,
      "weight"_a.none(), "weight_offset"_a, "out"_a.none(), "want_weight"_a);
}
