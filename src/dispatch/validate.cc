#include "dispatch/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "normkit/error.hpp"

namespace normkit::detail {

namespace {
std::string message(std::string_view fn, std::string_view arg, std::string_view what) {
  std::string msg;
  msg.reserve(fn.size() + arg.size() + what.size() + 4);
  msg.append(fn).append(": ").append(arg).append(" ").append(what);
  return msg;
}
}  // namespace

void fail(std::string_view fn, std::string_view arg, std::string_view what) {
  throw Error(message(fn, arg, what));
}

void fail_dtype(std::string_view fn, std::string_view arg, std::string_view what) {
  throw DTypeError(message(fn, arg, what));
}

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }

// rows·cols for a message; a shape whose product overflows (a garbage view
// the user passed) is shown as its factors rather than computed.
std::string elements(std::int64_t rows, std::int64_t cols) {
  std::int64_t n = 0;
  if (__builtin_mul_overflow(rows, cols, &n)) return num(rows) + " x " + num(cols);
  return num(n);
}

std::string dtype_list(std::initializer_list<DType> ts) {
  std::string s;
  for (DType t : ts) {
    if (!s.empty()) s += " or ";
    s += dtype_name(t);
  }
  return s;
}

bool has_bytes(const Arg& a) { return a.present && a.rows > 0 && a.cols > 0; }

// Byte offsets, relative to `a`'s start, of the rows of a strided view.
struct Span {
  std::intptr_t begin;       // first byte
  std::intptr_t end;         // one past the last byte
  std::int64_t rows;
  std::intptr_t stride;      // bytes between rows
  std::intptr_t width;       // bytes in a row
};

// The span of an argument with bytes (has_bytes).
Span span_of(const Arg& a) {
  const auto es = static_cast<std::intptr_t>(dtype_size(a.dtype));
  const auto begin = reinterpret_cast<std::intptr_t>(a.data);
  const std::intptr_t stride = static_cast<std::intptr_t>(a.row_stride) * es;
  const std::intptr_t width = static_cast<std::intptr_t>(a.cols) * es;
  return {begin, begin + (a.rows - 1) * stride + width, a.rows, stride, width};
}

std::intptr_t floor_div(std::intptr_t a, std::intptr_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Do two strided views share a byte? Exact for equal strides (the in-place
// and interleaved-rows cases); otherwise the conservative interval test.
bool overlaps(const Span& sa, const Span& sb) {
  if (sa.end <= sb.begin || sb.end <= sa.begin) return false;
  if (sa.stride != sb.stride || sa.rows == 1 || sb.rows == 1 || sa.stride == 0) return true;
  // Row r of a meets row s of b iff, with k = r − s and d = b − a,
  //   d − width_a < k·stride < d + width_b.
  const std::intptr_t d = sb.begin - sa.begin, S = sa.stride;
  const std::intptr_t k_lo = std::max<std::intptr_t>(floor_div(d - sa.width, S) + 1, -(sb.rows - 1));
  const std::intptr_t k_hi = std::min<std::intptr_t>(floor_div(d + sb.width - 1, S), sa.rows - 1);
  return k_lo <= k_hi;
}

bool identical(const Arg& a, const Arg& b) {
  return a.data == b.data && a.row_stride == b.row_stride && a.dtype == b.dtype &&
         a.rows == b.rows && a.cols == b.cols;
}

}  // namespace

namespace {
// "cpu" or "cuda:<index>".
std::string where(const Arg& a) {
  if (a.device == Device::cpu) return "cpu";
  return std::string(device_name(a.device)) + ":" + std::to_string(a.device_index);
}
}  // namespace

void Validator::bad_structure(const Arg& a) const {
  if (a.device != Device::cpu && a.device != Device::cuda)
    fail(fn_, a.name, "has an unknown device (" + std::to_string(static_cast<int>(a.device)) +
                          "), expected Device::cpu or Device::cuda");
  if (a.device == Device::cuda && a.device_index < 0)
    fail(fn_, a.name, "has CUDA device index " + std::to_string(a.device_index) + ", expected >= 0");
  if (a.rows < 0 || a.cols < 0)
    fail(fn_, a.name, "has negative shape (" + num(a.rows) + ", " + num(a.cols) + ")");
  if (a.data == nullptr && a.rows > 0 && a.cols > 0)
    fail(fn_, a.name, "has a null data pointer but " + elements(a.rows, a.cols) + " elements");
  // The only other way to get here (see structure()): row_stride < D.
  fail(fn_, a.name, "has row_stride " + num(a.row_stride) + ", expected >= D = " + num(a.cols));
}

void Validator::missing(const Arg& a) const { fail(fn_, a.name, "is missing, expected a tensor"); }

void Validator::bad_matrix_shape(const Arg& a, std::int64_t rows, std::int64_t D, std::string_view shape_of) const {
  fail(fn_, a.name, "has shape (" + num(a.rows) + ", " + num(a.cols) + "), expected (" + num(rows) + ", " +
                        num(D) + ") like " + std::string(shape_of));
}

void Validator::bad_vector_size(const Arg& a, std::int64_t n, std::string_view n_name) const {
  fail(fn_, a.name, "has " + num(a.cols) + " elements, expected " + std::string(n_name) + " = " + num(n));
}

void Validator::bad_dtype(const Arg& a, std::initializer_list<DType> allowed, std::string_view why) const {
  fail_dtype(fn_, a.name, "has dtype " + std::string(dtype_name(a.dtype)) + ", expected " + dtype_list(allowed) +
                              " " + std::string(why));
}

void Validator::different_dtypes(const Arg& a, const Arg& b) const {
  fail_dtype(fn_, a.name, "has dtype " + std::string(dtype_name(a.dtype)) + ", expected " +
                              std::string(dtype_name(b.dtype)) + " (the dtype of " + std::string(b.name) + ")");
}

namespace {
// A double as a user would write it (std::to_string prints 1e39 with 40 digits).
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

void Validator::bad_eps(double eps, DType x) const {
  fail(fn_, "eps", "is " + sci(eps) + ", expected a finite value >= 0 (at most " + sci(largest_in_arithmetic(x)) +
                       ", the largest " + (x == DType::f64 ? "f64" : "f32") + " value)");
}

void Validator::bad_weight_offset(double offset, DType x) const {
  if (!std::isfinite(offset) || std::abs(offset) > largest_in_arithmetic(x))
    fail(fn_, "weight_offset", "is " + sci(offset) + ", expected a finite value (|offset| at most " +
                                   sci(largest_in_arithmetic(x)) + ")");
  // The only other way to get here: a non-zero offset without a weight.
  fail(fn_, "weight_offset", "is " + sci(offset) + " but weight is absent, expected a weight to offset");
}

void Validator::other_device(const Arg& a, const Arg& ref) const {
  fail(fn_, a.name, "is on device " + where(a) + ", expected " + where(ref) + " (the device of " +
                        std::string(ref.name) + ")");
}

const Backend& Validator::device_backend(const Arg& ref, Args args) const {
  std::string why;
  const Backend* be = cuda_backend(ref.device_index, why);
  if (!be) fail(fn_, ref.name, "is on device " + where(ref) + ", expected cpu (" + why + ")");
  if (be->memory_problem) {
    for (const Arg& a : args) {
      if (!has_bytes(a)) continue;
      const std::string problem = be->memory_problem(a.data, ref.device_index);
      if (!problem.empty()) fail(fn_, a.name, "is on device " + where(a) + " but its data pointer " + problem);
    }
  }
  return *be;
}

void Validator::empty_width(std::int64_t rows) const {
  fail(fn_, "x", "has D = 0 with " + num(rows) + " rows, expected D >= 1 (a norm over no features has no mean)");
}

// A call passes up to 4 outputs and 6 inputs to no_overlap; more would be a
// bug in this library: it stops rather than write past its arrays (an
// assert is off in release).
constexpr std::size_t kMaxArgs = 8;

void Validator::no_overlap(Args outputs, Args inputs, std::initializer_list<InPlace> allowed) const {
  // The common case first: no output's bytes [begin, end) meet those of
  // another argument (absent and empty arguments have none). Only where two
  // ranges meet do strides and the in-place rule decide (no_overlap_exact).
  if (outputs.size() > kMaxArgs || inputs.size() > kMaxArgs) std::abort();
  std::intptr_t begin[2 * kMaxArgs], end[2 * kMaxArgs];
  std::size_t n = 0;
  const auto add = [&](const Arg& a) {
    if (!has_bytes(a)) return;
    const Span s = span_of(a);
    begin[n] = s.begin;
    end[n] = s.end;
    ++n;
  };
  for (const Arg& a : outputs) add(a);
  const std::size_t n_out = n;
  for (const Arg& a : inputs) add(a);
  bool meet = false;
  for (std::size_t i = 0; i < n_out; ++i)
    for (std::size_t k = i + 1; k < n; ++k) meet |= begin[i] < end[k] && begin[k] < end[i];
  if (meet) no_overlap_exact(outputs, inputs, allowed);
}

void Validator::no_overlap_exact(Args outputs, Args inputs, std::initializer_list<InPlace> allowed) const {
  // The span of each argument with bytes, once: absent and empty arguments
  // overlap nothing, so the pairs are formed from the others only (a plain
  // op has two or three of its four outputs).
  struct Spanned {
    Span span;
    const Arg* arg;
  };
  Spanned outs[kMaxArgs], ins[kMaxArgs];
  std::size_t n_out = 0, n_in = 0;
  for (const Arg& a : outputs)
    if (has_bytes(a)) outs[n_out++] = {span_of(a), &a};
  for (const Arg& a : inputs)
    if (has_bytes(a)) ins[n_in++] = {span_of(a), &a};
  for (std::size_t i = 0; i < n_out; ++i) {
    const Arg& o = *outs[i].arg;
    for (std::size_t k = i + 1; k < n_out; ++k)
      if (overlaps(outs[i].span, outs[k].span))
        fail(fn_, o.name, "overlaps output " + std::string(outs[k].arg->name) + ", expected separate memory");
    for (std::size_t k = 0; k < n_in; ++k) {
      if (!overlaps(outs[i].span, ins[k].span)) continue;
      const Arg& in = *ins[k].arg;
      const bool may_alias = std::any_of(allowed.begin(), allowed.end(), [&](const InPlace& ip) {
        return ip.output == o.name && ip.input == in.name;
      });
      if (may_alias && identical(o, in)) continue;
      fail(fn_, o.name,
           "overlaps input " + std::string(in.name) +
               (may_alias ? ", expected either separate memory or exactly the same view (in-place)"
                          : ", expected separate memory"));
    }
  }
}

}  // namespace normkit::detail
