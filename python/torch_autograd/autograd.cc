// normkit._torch_autograd: LayerNorm and RMSNorm as C++ autograd functions.
//
// A Python torch.autograd.Function costs about as much per forward+backward
// as PyTorch's whole native LayerNorm at one row (docs/python.md), so with
// autograd a decode-sized call is bound by that layer, not by the kernels.
// These nodes are built and run by the autograd engine in C++, as native
// ops are. They take only the common case: CPU tensors, contiguous input,
// weight and bias of the shape normalized_shape; for anything else each
// entry point returns None and the caller takes the Python Function, which
// accepts every layout and reports every error. Both call the same kernels
// with the same arguments, so their outputs are bitwise identical.
//
// Outputs come from PyTorch's allocator, so these take only inputs smaller
// than the binding's output cache serves: above that, a fresh large block
// faults its pages in on every call (output_cache.hpp), which costs far more
// than the Python Function's overhead, and the Function's outputs come from
// the cache.
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/utils/pybind.h>

#include <cmath>
#include <optional>
#include <vector>

#include "normkit/normkit.hpp"
#include "output_cache.hpp"

namespace {

namespace py = pybind11;
using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using OptTensor = std::optional<Tensor>;

std::optional<normkit::DType> dtype_of(const Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return normkit::DType::f32;
    case at::kDouble: return normkit::DType::f64;
    case at::kHalf: return normkit::DType::f16;
    case at::kBFloat16: return normkit::DType::bf16;
    default: return std::nullopt;
  }
}

bool plain_cpu(const Tensor& t) { return t.device().is_cpu() && t.layout() == at::kStrided && t.is_contiguous(); }

// The fast path's preconditions, each one the library would also accept;
// false sends the call to the Python Function.
bool fast_input(const Tensor& x, at::IntArrayRef ns) {
  const auto nd = static_cast<std::int64_t>(ns.size());
  if (!plain_cpu(x) || !dtype_of(x) || nd == 0 || x.dim() < nd) return false;
  if (static_cast<std::size_t>(x.numel()) * x.element_size() >= normkit_py::OutputCache::kMinBytes) return false;
  for (std::int64_t i = 0; i < nd; ++i)
    if (x.size(x.dim() - nd + i) != ns[static_cast<std::size_t>(i)] || ns[static_cast<std::size_t>(i)] <= 0) return false;
  return true;
}

bool fast_param(const OptTensor& p, const Tensor& x, at::IntArrayRef ns) {
  if (!p) return true;
  if (!plain_cpu(*p) || p->sizes() != ns) return false;
  // The parameter dtypes the library takes: x's, or f32 for 16-bit x.
  const auto pt = p->scalar_type();
  return pt == x.scalar_type() || (pt == at::kFloat && x.element_size() == 2);
}

bool fast_eps(double eps) { return std::isfinite(eps) && eps >= 0.0; }

std::int64_t width(at::IntArrayRef ns) {
  std::int64_t d = 1;
  for (const auto n : ns) d *= n;
  return d;
}

// Views of contiguous tensors; a writable view reads too (Matrix and Vector
// convert to their Const forms). An undefined or absent tensor is an absent
// vector: a parameter not given, a gradient not wanted.
normkit::Matrix rows_of(const Tensor& t, std::int64_t d) { return {t.data_ptr(), *dtype_of(t), t.numel() / d, d, d}; }
normkit::Vector vec_of(const Tensor& t) {
  return t.defined() ? normkit::Vector{t.data_ptr(), *dtype_of(t), t.numel()} : normkit::Vector{};
}
normkit::Vector vec_of(const OptTensor& t) { return t ? vec_of(*t) : normkit::Vector{}; }

// A parameter's gradient when wanted (its parameter given and asked for);
// else undefined, which the kernels take as not to be written.
Tensor param_grad(const Tensor& p, bool want) { return want ? at::empty_like(p) : Tensor(); }

// mean and rstd take the leading shape of x, as the Python route returns them.
Tensor stats_like(const Tensor& x, at::IntArrayRef ns) {
  const auto st = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return at::empty(x.sizes().slice(0, x.dim() - ns.size()), x.options().dtype(st));
}

// The engine runs a backward with grad mode on only for create_graph=True.
void refuse_double_backward() {
  TORCH_CHECK(!at::GradMode::is_enabled(),
              "normkit: double backward is not supported (the gradient of a normkit gradient); "
              "call backward/grad without create_graph=True");
}

// A forward is called from Python and runs its kernel with the GIL
// released, as the binding's calls do; a backward runs on the engine's
// thread, which does not hold it.
template <class F>
void without_gil(F&& f) {
  const py::gil_scoped_release release;
  f();
}

struct LayerNormFn : torch::autograd::Function<LayerNormFn> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, std::vector<std::int64_t> ns, const OptTensor& w,
                               const OptTensor& b, double eps, bool return_stats) {
    const std::int64_t d = width(ns);
    Tensor y = at::empty_like(x);
    Tensor mean = stats_like(x, ns), rstd = stats_like(x, ns);
    without_gil([&] {
      normkit::layer_norm(rows_of(x, d), vec_of(w), vec_of(b), eps, rows_of(y, d), vec_of(mean), vec_of(rstd));
    });
    ctx->save_for_backward({x, w.value_or(Tensor()), b.value_or(Tensor()), mean, rstd});
    ctx->saved_data["d"] = d;
    if (!return_stats) return {y};
    ctx->mark_non_differentiable({mean, rstd});
    return {y, mean, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    refuse_double_backward();
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1], &b = saved[2];
    const std::int64_t d = ctx->saved_data["d"].toInt();
    const Tensor dy = grads[0].contiguous();
    Tensor dx = at::empty_like(x);
    // needs_input_grad counts the tensors given (x, then weight and bias
    // where present); the gradients returned follow forward's arguments.
    Tensor dw = param_grad(w, w.defined() && ctx->needs_input_grad(1));
    Tensor db = param_grad(b, b.defined() && ctx->needs_input_grad(w.defined() ? 2 : 1));
    normkit::layer_norm_backward(rows_of(dy, d), rows_of(x, d), vec_of(saved[3]), vec_of(saved[4]), vec_of(w),
                                 rows_of(dx, d), vec_of(dw), vec_of(db));
    return {ctx->needs_input_grad(0) ? dx : Tensor(), Tensor(), dw, db, Tensor(), Tensor()};
  }
};

struct RMSNormFn : torch::autograd::Function<RMSNormFn> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, std::vector<std::int64_t> ns, const OptTensor& w,
                               double eps, double weight_offset, bool return_stats) {
    const std::int64_t d = width(ns);
    Tensor y = at::empty_like(x);
    Tensor rstd = stats_like(x, ns);
    without_gil([&] { normkit::rms_norm(rows_of(x, d), vec_of(w), eps, rows_of(y, d), vec_of(rstd), weight_offset); });
    ctx->save_for_backward({x, w.value_or(Tensor()), rstd});
    ctx->saved_data["d"] = d;
    ctx->saved_data["weight_offset"] = weight_offset;
    if (!return_stats) return {y};
    ctx->mark_non_differentiable({rstd});
    return {y, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    refuse_double_backward();
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &w = saved[1];
    const std::int64_t d = ctx->saved_data["d"].toInt();
    const double offset = ctx->saved_data["weight_offset"].toDouble();
    const Tensor dy = grads[0].contiguous();
    Tensor dx = at::empty_like(x);
    Tensor dw = param_grad(w, w.defined() && ctx->needs_input_grad(1));
    normkit::rms_norm_backward(rows_of(dy, d), rows_of(x, d), vec_of(saved[2]), vec_of(w), rows_of(dx, d),
                               vec_of(dw), offset);
    return {ctx->needs_input_grad(0) ? dx : Tensor(), Tensor(), dw, Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

PYBIND11_MODULE(_torch_autograd, m) {
  m.doc() = "LayerNorm and RMSNorm as C++ autograd functions (CPU, contiguous); None where they do not apply";
  // C++ has no stable ABI across PyTorch releases: the package uses this
  // module only under the PyTorch it was compiled against.
  m.attr("torch_version") = NORMKIT_TORCH_VERSION;
  m.def(
      "layer_norm",
      [](const Tensor& x, std::vector<std::int64_t> ns, const OptTensor& w, const OptTensor& b, double eps,
         bool return_stats) -> py::object {
        if (!fast_input(x, ns) || !fast_param(w, x, ns) || !fast_param(b, x, ns) || !fast_eps(eps)) return py::none();
        const auto out = LayerNormFn::apply(x, std::move(ns), w, b, eps, return_stats);
        return return_stats ? py::object(py::make_tuple(out[0], out[1], out[2])) : py::cast(out[0]);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight"), py::arg("bias"), py::arg("eps"),
      py::arg("return_stats"));
  m.def(
      "rms_norm",
      [](const Tensor& x, std::vector<std::int64_t> ns, const OptTensor& w, double eps, double weight_offset,
         bool return_stats) -> py::object {
        if (!fast_input(x, ns) || !fast_param(w, x, ns) || !fast_eps(eps) || !std::isfinite(weight_offset) ||
            (weight_offset != 0.0 && !w))
          return py::none();
        const auto out = RMSNormFn::apply(x, std::move(ns), w, eps, weight_offset, return_stats);
        return return_stats ? py::object(py::make_tuple(out[0], out[1])) : py::cast(out[0]);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight"), py::arg("eps"), py::arg("weight_offset"),
      py::arg("return_stats"));
}
