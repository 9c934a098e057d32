// The public entry points: validate every argument, then pick the backend of
// the device the arguments are on and call it. This is the only place that
// knows both the public views and the kernel interface.
#include "normkit/ops.hpp"

#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "dispatch/backend.hpp"
#include "dispatch/observer.hpp"
#include "dispatch/validate.hpp"
#include "normkit/device.hpp"
#include "normkit/observer.hpp"
#include "normkit/version.hpp"

namespace normkit {

const char* version() noexcept { return NORMKIT_VERSION_STRING; }

const char* cpu_simd_target() noexcept { return detail::active_cpu_target(); }

namespace {

using detail::Arg;
using detail::stat_dtype;
using detail::Validator;

constexpr std::initializer_list<DType> kAllDtypes = {DType::f32, DType::f64, DType::f16, DType::bf16};

bool is_16bit(DType t) { return t == DType::f16 || t == DType::bf16; }

// Parameters (weight, bias and their gradients) are in x's dtype or in f32;
// f64 activations need f64 parameters.
void check_param_dtype(const Validator& v, const Arg& p, DType x) {
  if (x == DType::f64)
    v.dtype_in(p, {DType::f64}, "(f64 activations need f64 parameters)");
  else
    v.dtype_in(p, {x, DType::f32}, "(parameters are in the activations' dtype or f32)");
}

// The residual stream (residual, h, dh_out, dh of the fused ops) is in x's
// dtype, or f32 when x is 16-bit.
void check_stream_dtype(const Validator& v, const Arg& r, DType x) {
  if (is_16bit(x))
    v.dtype_in(r, {x, DType::f32}, "(the residual stream is in x's dtype or f32)");
  else
    v.dtype_in(r, {x}, "(the residual stream is in x's dtype)");
}

// Where a call on ref's device runs: its device index and, for CUDA, the
// calling thread's stream for that device.
detail::Place place_of(const char* fn, const Arg& ref) {
  if (ref.device == Device::cpu) return {fn, 0, nullptr};
  return {fn, ref.device_index, current_stream(ref.device_index)};
}

// The first present argument's dtype, or `fallback`.
DType first_dtype(detail::Args args, DType fallback) {
  for (const Arg& a : args)
    if (a.present) return a.dtype;
  return fallback;
}

// An argument the op does not have (the residual and h of a plain op,
// RMSNorm's bias and mean), named for messages like any other.
Arg absent(const char* name) { return Arg{.name = name}; }

// The data pointer of an output's Arg, made from the caller's writable view.
void* writable(const Arg& a) { return const_cast<void*>(a.data); }

// A call's arguments, as Args made once from the caller's views: the checks
// and the kernel arguments read them there (each copy of a call's views is
// a measurable part of a one-row call).
struct ForwardCall {
  const char* fn;
  NormKind kind;
  bool fused;
  Arg x, residual;  // residual absent for the plain op
  Arg weight, bias;
  double eps;
  double weight_offset;
  Arg h;  // absent for the plain op
  Arg y, mean, rstd;
};

void run_forward(const ForwardCall& c) {
  const Validator v(c.fn);
  const Arg &x = c.x, &residual = c.residual, &weight = c.weight, &bias = c.bias;
  const Arg &h = c.h, &y = c.y, &mean = c.mean, &rstd = c.rstd;

  v.required(x);
  v.structure(x);
  v.dtype_in(x, kAllDtypes, "");
  const std::int64_t rows = x.rows, D = x.cols;
  v.nonempty_width(rows, D);
  if (c.fused) {
    v.matrix(residual, rows, D, "x");
    check_stream_dtype(v, residual, x.dtype);
    v.matrix(h, rows, D, "x");
    v.same_dtype(h, residual);
  }
  v.matrix(y, rows, D, "x");
  v.same_dtype(y, x);
  v.vector(weight, D, "D");
  v.vector(bias, D, "D");
  check_param_dtype(v, weight, x.dtype);
  check_param_dtype(v, bias, x.dtype);
  v.same_dtype(bias, weight);
  v.vector(mean, rows, "rows");
  v.vector(rstd, rows, "rows");
  v.dtype_in(mean, {stat_dtype(x.dtype)}, "(statistics of this x dtype)");
  v.dtype_in(rstd, {stat_dtype(x.dtype)}, "(statistics of this x dtype)");
  v.eps(c.eps, x.dtype);
  v.weight_offset(c.weight_offset, weight, x.dtype);
  v.same_device({residual, h, y, weight, bias, mean, rstd}, x);
  const detail::Backend& backend = v.backend(x, {x, residual, h, y, weight, bias, mean, rstd});
  v.no_overlap({h, y, mean, rstd}, {x, residual, weight, bias},
               {{"y", "x"}, {"h", "x"}, {"h", "residual"}});
  if (rows == 0) return;

  // Every field named, so each is written once: a struct filled field by
  // field after `ForwardArgs a;` was zeroed first with `rep stos`, a
  // measurable part of a one-row call.
  const detail::ForwardArgs a{
      .kind = c.kind,
      .rows = rows,
      .D = D,
      .x = x.data,
      .x_stride = x.row_stride,
      .residual = c.fused ? residual.data : nullptr,
      .residual_stride = c.fused ? residual.row_stride : 0,
      .h = c.fused ? writable(h) : nullptr,
      .h_stride = c.fused ? h.row_stride : 0,
      .y = writable(y),
      .y_stride = y.row_stride,
      .weight = weight.data,
      .bias = bias.data,
      .weight_offset = c.weight_offset,
      .eps = c.eps,
      .mean = writable(mean),
      .rstd = writable(rstd),
      .x_dtype = x.dtype,
      .res_dtype = c.fused ? residual.dtype : x.dtype,
      .w_dtype = first_dtype({weight, bias}, x.dtype),
  };
  backend.forward(a, place_of(c.fn, x));
}

struct BackwardCall {
  const char* fn;
  NormKind kind;
  bool fused;
  Arg dy;
  Arg dh_out;  // fused only, optional
  Arg xin;     // x (plain) or h (fused)
  Arg mean, rstd;  // mean absent for RMSNorm
  Arg weight;
  double weight_offset;
  Arg dx;  // dx (plain) or dh (fused)
  Arg dweight, dbias;  // dbias absent for RMSNorm
};

void run_backward(const BackwardCall& c) {
  const Validator v(c.fn);
  const Arg &dy = c.dy, &dh_out = c.dh_out, &xin = c.xin, &mean = c.mean, &rstd = c.rstd;
  const Arg &weight = c.weight, &dx = c.dx, &dweight = c.dweight, &dbias = c.dbias;

  v.required(dy);
  v.structure(dy);
  v.dtype_in(dy, kAllDtypes, "");
  const std::int64_t rows = dy.rows, D = dy.cols;
  v.nonempty_width(rows, D);
  v.matrix(xin, rows, D, "dy");
  if (c.fused) {
    check_stream_dtype(v, xin, dy.dtype);
    v.structure(dh_out);
    if (dh_out.present) v.matrix(dh_out, rows, D, "dy");
    v.same_dtype(dh_out, xin);
  } else {
    v.same_dtype(xin, dy);
  }
  v.matrix(dx, rows, D, "dy");
  v.same_dtype(dx, xin);
  // An empty (rows = 0) statistic is indistinguishable from an absent one.
  if (c.kind == NormKind::layer_norm) {
    if (rows > 0) v.required(mean);
    v.vector(mean, rows, "rows");
    v.dtype_in(mean, {stat_dtype(dy.dtype)}, "(as written by the forward)");
  }
  if (rows > 0) v.required(rstd);
  v.vector(rstd, rows, "rows");
  v.dtype_in(rstd, {stat_dtype(dy.dtype)}, "(as written by the forward)");
  v.vector(weight, D, "D");
  v.vector(dweight, D, "D");
  v.vector(dbias, D, "D");
  check_param_dtype(v, weight, dy.dtype);
  check_param_dtype(v, dweight, dy.dtype);
  check_param_dtype(v, dbias, dy.dtype);
  v.same_dtype(dweight, weight);
  v.same_dtype(dbias, weight);
  v.same_dtype(dbias, dweight);
  v.weight_offset(c.weight_offset, weight, dy.dtype);
  v.same_device({dh_out, xin, mean, rstd, weight, dx, dweight, dbias}, dy);
  const detail::Backend& backend = v.backend(dy, {dy, dh_out, xin, mean, rstd, weight, dx, dweight, dbias});
  v.no_overlap({dx, dweight, dbias}, {dy, dh_out, xin, mean, rstd, weight},
               {{"dx", "dy"}, {"dh", "dh_out"}});

  // rows == 0 goes to the backend too: it writes the zero parameter
  // gradients (a sum over no rows) with its device's means.
  const detail::BackwardArgs a{
      .kind = c.kind,
      .rows = rows,
      .D = D,
      .dy = dy.data,
      .dy_stride = dy.row_stride,
      .xin = xin.data,
      .xin_stride = xin.row_stride,
      .dh_out = dh_out.present ? dh_out.data : nullptr,
      .dh_out_stride = dh_out.present ? dh_out.row_stride : 0,
      .mean = mean.data,
      .rstd = rstd.data,
      .weight = weight.data,
      .weight_offset = c.weight_offset,
      .dx = writable(dx),
      .dx_stride = dx.row_stride,
      .dweight = writable(dweight),
      .dbias = writable(dbias),
      .dy_dtype = dy.dtype,
      .xin_dtype = xin.dtype,
      .w_dtype = first_dtype({weight, dweight, dbias}, dy.dtype),
  };
  backend.backward(a, place_of(c.fn, dy));
}

// The record of a call, for the observer: what it was given.
std::uint32_t bit_if(bool present, OpArg a) { return present ? bit_of(a) : 0u; }

OpRecord record_of(const ForwardCall& c) {
  OpRecord r;
  r.op = c.fn;
  r.shape[0] = c.x.rows;
  r.shape[1] = c.x.cols;
  r.dtype = c.x.dtype;
  r.param_dtype = c.weight.data != nullptr ? c.weight.dtype : c.bias.data != nullptr ? c.bias.dtype : c.x.dtype;
  r.stream_dtype = c.fused ? c.residual.dtype : c.x.dtype;
  r.args = bit_of(OpArg::x) | bit_of(OpArg::y) | bit_if(c.fused, OpArg::residual) | bit_if(c.fused, OpArg::h) |
           bit_if(c.weight.data != nullptr, OpArg::weight) | bit_if(c.bias.data != nullptr, OpArg::bias) |
           bit_if(c.mean.data != nullptr, OpArg::mean) | bit_if(c.rstd.data != nullptr, OpArg::rstd);
  r.device = c.x.device;
  r.device_index = c.x.device_index;
  return r;
}

OpRecord record_of(const BackwardCall& c) {
  OpRecord r;
  r.op = c.fn;
  r.shape[0] = c.dy.rows;
  r.shape[1] = c.dy.cols;
  r.dtype = c.dy.dtype;
  r.param_dtype = c.weight.data != nullptr    ? c.weight.dtype
                  : c.dweight.data != nullptr ? c.dweight.dtype
                  : c.dbias.data != nullptr   ? c.dbias.dtype
                                              : c.dy.dtype;
  r.stream_dtype = c.fused ? c.xin.dtype : c.dy.dtype;
  // xin is x (plain) or h (fused); dx is dx or dh: one bit each, by role.
  r.args = bit_of(OpArg::dy) | bit_of(c.fused ? OpArg::h : OpArg::x) | bit_of(OpArg::dx) |
           bit_if(c.dh_out.data != nullptr, OpArg::dh_out) | bit_if(c.mean.data != nullptr, OpArg::mean) |
           bit_if(c.rstd.data != nullptr, OpArg::rstd) | bit_if(c.weight.data != nullptr, OpArg::weight) |
           bit_if(c.dweight.data != nullptr, OpArg::dweight) | bit_if(c.dbias.data != nullptr, OpArg::dbias);
  r.device = c.dy.device;
  r.device_index = c.dy.device_index;
  return r;
}

// The one place that reports calls to the observer. Without one installed,
// a call costs this load and a branch that always goes the same way.
template <class Call>
void observed(const Call& c, void (*run)(const Call&)) {
  OpObserver* const observer = detail::installed_observer();
  if (!observer) [[likely]] {
    run(c);
    return;
  }
  const std::int64_t start = observer_clock_ns();
  run(c);
  OpRecord r = record_of(c);
  r.start_ns = start;
  r.end_ns = observer_clock_ns();
  observer->on_op(r);
}

void forward(const ForwardCall& c) { observed(c, run_forward); }
void backward(const BackwardCall& c) { observed(c, run_backward); }

}  // namespace

void layer_norm(ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y, Vector mean,
                Vector rstd) {
  forward({"layer_norm", NormKind::layer_norm, false, Arg::of("x", x), absent("residual"), Arg::of("weight", weight),
           Arg::of("bias", bias), eps, 0.0, absent("h"), Arg::of("y", y), Arg::of("mean", mean),
           Arg::of("rstd", rstd)});
}

void rms_norm(ConstMatrix x, ConstVector weight, double eps, Matrix y, Vector rstd, double weight_offset) {
  forward({"rms_norm", NormKind::rms_norm, false, Arg::of("x", x), absent("residual"), Arg::of("weight", weight),
           absent("bias"), eps, weight_offset, absent("h"), Arg::of("y", y), absent("mean"), Arg::of("rstd", rstd)});
}

void add_layer_norm(ConstMatrix x, ConstMatrix residual, ConstVector weight, ConstVector bias, double eps,
                    Matrix h, Matrix y, Vector mean, Vector rstd) {
  forward({"add_layer_norm", NormKind::layer_norm, true, Arg::of("x", x), Arg::of("residual", residual),
           Arg::of("weight", weight), Arg::of("bias", bias), eps, 0.0, Arg::of("h", h), Arg::of("y", y),
           Arg::of("mean", mean), Arg::of("rstd", rstd)});
}

void add_rms_norm(ConstMatrix x, ConstMatrix residual, ConstVector weight, double eps, Matrix h, Matrix y,
                  Vector rstd, double weight_offset) {
  forward({"add_rms_norm", NormKind::rms_norm, true, Arg::of("x", x), Arg::of("residual", residual),
           Arg::of("weight", weight), absent("bias"), eps, weight_offset, Arg::of("h", h), Arg::of("y", y),
           absent("mean"), Arg::of("rstd", rstd)});
}

void layer_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd, ConstVector weight,
                         Matrix dx, Vector dweight, Vector dbias) {
  backward({"layer_norm_backward", NormKind::layer_norm, false, Arg::of("dy", dy), absent("dh_out"),
            Arg::of("x", x), Arg::of("mean", mean), Arg::of("rstd", rstd), Arg::of("weight", weight), 0.0,
            Arg::of("dx", dx), Arg::of("dweight", dweight), Arg::of("dbias", dbias)});
}

void rms_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector weight, Matrix dx,
                       Vector dweight, double weight_offset) {
  backward({"rms_norm_backward", NormKind::rms_norm, false, Arg::of("dy", dy), absent("dh_out"), Arg::of("x", x),
            absent("mean"), Arg::of("rstd", rstd), Arg::of("weight", weight), weight_offset, Arg::of("dx", dx),
            Arg::of("dweight", dweight), absent("dbias")});
}

void add_layer_norm_backward(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean,
                             ConstVector rstd, ConstVector weight, Matrix dh, Vector dweight, Vector dbias) {
  backward({"add_layer_norm_backward", NormKind::layer_norm, true, Arg::of("dy", dy), Arg::of("dh_out", dh_out),
            Arg::of("h", h), Arg::of("mean", mean), Arg::of("rstd", rstd), Arg::of("weight", weight), 0.0,
            Arg::of("dh", dh), Arg::of("dweight", dweight), Arg::of("dbias", dbias)});
}

void add_rms_norm_backward(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector rstd,
                           ConstVector weight, Matrix dh, Vector dweight, double weight_offset) {
  backward({"add_rms_norm_backward", NormKind::rms_norm, true, Arg::of("dy", dy), Arg::of("dh_out", dh_out),
            Arg::of("h", h), absent("mean"), Arg::of("rstd", rstd), Arg::of("weight", weight), weight_offset,
            Arg::of("dh", dh), Arg::of("dweight", dweight), absent("dbias")});
}

}  // namespace normkit
