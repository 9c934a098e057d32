// Argument checks shared by every public entry point. Each check throws
// normkit::Error with a message of the form
//   "<function>: <argument> <what is wrong>, expected <what is needed>"
// and none of them writes anything, so a failed call leaves every output as
// it was.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "dispatch/backend.hpp"
#include "normkit/ops.hpp"
#include "normkit/tensor.hpp"

namespace normkit::detail {

[[noreturn]] void fail(std::string_view fn, std::string_view arg, std::string_view what);
// The same, for a dtype problem: throws normkit::DTypeError.
[[noreturn]] void fail_dtype(std::string_view fn, std::string_view arg, std::string_view what);

// An argument of a call, named for messages. Its fields are ordered to keep
// it small (48 bytes): a call makes up to ten of them.
struct Arg {
  const void* data = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0;  // vectors: rows = 1, cols = size
  const char* name = "";
  DType dtype = DType::f32;
  Device device = Device::cpu;
  bool present = false;
  std::int32_t device_index = 0;

  // A default-constructed view (null data, no rows) is an absent optional.
  static Arg of(const char* name, ConstMatrix m) {
    const bool present = m.data != nullptr || m.rows != 0 || m.cols != 0;
    return {m.data, m.rows, m.cols, m.row_stride, name, m.dtype, m.device, present, m.device_index};
  }
  static Arg of(const char* name, ConstVector v) {
    const bool present = v.data != nullptr || v.size != 0;
    return {v.data, 1, v.size, v.size, name, v.dtype, v.device, present, v.device_index};
  }
  // Same device: the index counts only for CUDA (the CPU is one device).
  bool same_device(const Arg& b) const {
    return device == b.device && (device == Device::cpu || device_index == b.device_index);
  }
};

// The arguments a check looks at together, by reference: a list of the
// views themselves would copy each one into the list, and a call builds
// several lists.
using Args = std::initializer_list<std::reference_wrapper<const Arg>>;

// The checks are inline tests that a valid call passes in a few
// instructions: for a single row they are most of a call's fixed cost. Each
// failure goes to an out-of-line function that finds what is wrong and
// throws.
class Validator {
 public:
  // fn: a static string, measured only when a message needs it.
  explicit Validator(const char* fn) : fn_(fn) {}

  // Structural checks of one view: a known device, non-negative sizes, no
  // null data with a non-zero size, row_stride >= D.
  void structure(const Arg& a) const {
    if (a.present && ((a.device != Device::cpu && (a.device != Device::cuda || a.device_index < 0)) ||
                      a.rows < 0 || a.cols < 0 || (a.data == nullptr && a.rows > 0 && a.cols > 0) ||
                      (a.rows > 1 && a.row_stride < a.cols)))
      bad_structure(a);
  }

  // A required (rows, D) matrix of the given shape.
  void matrix(const Arg& a, std::int64_t rows, std::int64_t D, std::string_view shape_of) const {
    required(a);
    structure(a);
    if (a.rows != rows || a.cols != D) bad_matrix_shape(a, rows, D, shape_of);
  }
  // A required or optional (n) vector.
  void vector(const Arg& a, std::int64_t n, std::string_view n_name) const {
    if (!a.present) return;
    structure(a);
    if (a.cols != n) bad_vector_size(a, n, n_name);
  }
  void required(const Arg& a) const {
    if (!a.present) missing(a);
  }

  void dtype_in(const Arg& a, std::initializer_list<DType> allowed, std::string_view why) const {
    if (!a.present) return;
    for (DType t : allowed)
      if (a.dtype == t) return;
    bad_dtype(a, allowed, why);
  }
  void same_dtype(const Arg& a, const Arg& b) const {
    if (a.present && b.present && a.dtype != b.dtype) different_dtypes(a, b);
  }

  // eps and weight_offset must be finite and fit the arithmetic of x's
  // dtype (f32 unless x is f64), or they would turn into Inf there.
  void eps(double eps, DType x) const {
    if (!(eps >= 0 && eps <= largest_in_arithmetic(x))) bad_eps(eps, x);  // NaN fails too
  }
  void weight_offset(double offset, const Arg& weight, DType x) const {
    if (!(offset >= -largest_in_arithmetic(x) && offset <= largest_in_arithmetic(x)) ||
        (offset != 0.0 && !weight.present))
      bad_weight_offset(offset, x);
  }
  void nonempty_width(std::int64_t rows, std::int64_t D) const {
    if (rows > 0 && D == 0) empty_width(rows);
  }

  // Every present argument on the device of `ref` (x, or dy), which runs
  // the call.
  void same_device(Args args, const Arg& ref) const {
    for (const Arg& a : args)
      if (a.present && !a.same_device(ref)) other_device(a, ref);
  }
  // The backend of ref's device; an Error naming ref when this build or
  // machine cannot run it. For CUDA, also checks that the device can
  // access every present argument's memory.
  const Backend& backend(const Arg& ref, Args args) const {
    if (ref.device == Device::cpu) return cpu_backend();
    return device_backend(ref, args);
  }

  // Outputs must not overlap each other at all, and may overlap an input
  // only exactly (same pointer, stride and dtype) when that pair is listed
  // as allowed in-place.
  struct InPlace {
    std::string_view output, input;
  };
  void no_overlap(Args outputs, Args inputs, std::initializer_list<InPlace> allowed) const;

 private:
  // Scalars enter the arithmetic of the activations' dtype: f32 unless x is f64.
  static constexpr double largest_in_arithmetic(DType x) {
    return x == DType::f64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
  }

  [[noreturn]] void bad_structure(const Arg& a) const;
  [[noreturn]] void bad_matrix_shape(const Arg& a, std::int64_t rows, std::int64_t D,
                                     std::string_view shape_of) const;
  [[noreturn]] void bad_vector_size(const Arg& a, std::int64_t n, std::string_view n_name) const;
  [[noreturn]] void missing(const Arg& a) const;
  [[noreturn]] void bad_dtype(const Arg& a, std::initializer_list<DType> allowed, std::string_view why) const;
  [[noreturn]] void different_dtypes(const Arg& a, const Arg& b) const;
  [[noreturn]] void bad_eps(double eps, DType x) const;
  [[noreturn]] void bad_weight_offset(double offset, DType x) const;
  [[noreturn]] void empty_width(std::int64_t rows) const;
  // no_overlap's exact test, once two arguments' byte ranges meet.
  void no_overlap_exact(Args outputs, Args inputs, std::initializer_list<InPlace> allowed) const;
  [[noreturn]] void other_device(const Arg& a, const Arg& ref) const;
  const Backend& device_backend(const Arg& ref, Args args) const;

  const char* fn_;
};

// The statistics dtype rule is public (normkit/ops.hpp).
using normkit::stat_dtype;

}  // namespace normkit::detail
