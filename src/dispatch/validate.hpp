// Argument checks shared by every public entry point. Each check throws
// normkit::Error with a message of the form
//   "<function>: <argument> <what is wrong>, expected <what is needed>"
// and none of them writes anything, so a failed call leaves every output as
// it was.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "normkit/tensor.hpp"

namespace normkit::detail {

[[noreturn]] void fail(std::string_view fn, std::string_view arg, std::string_view what);
// The same, for a dtype problem: throws normkit::DTypeError.
[[noreturn]] void fail_dtype(std::string_view fn, std::string_view arg, std::string_view what);

// An argument of a call, with its name for messages and, for outputs, which
// inputs it may alias exactly (same pointer, stride and dtype).
struct Arg {
  std::string_view name;
  const void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0, row_stride = 0;  // vectors: rows = 1, cols = size
  Device device = Device::cpu;
  bool present = false;

  static Arg of(std::string_view name, ConstMatrix m);
  static Arg of(std::string_view name, ConstVector v);
};

class Validator {
 public:
  explicit Validator(std::string_view fn) : fn_(fn) {}

  // Structural checks of one view: device, non-negative sizes, no null data
  // with a non-zero size, row_stride >= D.
  void structure(const Arg& a) const;

  // A required (rows, D) matrix of the given shape.
  void matrix(const Arg& a, std::int64_t rows, std::int64_t D, std::string_view shape_of) const;
  // A required or optional (n) vector.
  void vector(const Arg& a, std::int64_t n, std::string_view n_name) const;
  void required(const Arg& a) const;

  void dtype_in(const Arg& a, std::initializer_list<DType> allowed, std::string_view why) const;
  void same_dtype(const Arg& a, const Arg& b) const;

  // eps and weight_offset must be finite and fit the arithmetic of x's
  // dtype (f32 unless x is f64), or they would turn into Inf there.
  void eps(double eps, DType x) const;
  void weight_offset(double offset, const Arg& weight, DType x) const;
  void nonempty_width(std::int64_t rows, std::int64_t D) const;

  // Outputs must not overlap each other at all, and may overlap an input
  // only exactly (same pointer, stride and dtype) when that pair is listed
  // as allowed in-place.
  struct InPlace {
    std::string_view output, input;
  };
  void no_overlap(std::initializer_list<Arg> outputs, std::initializer_list<Arg> inputs,
                  std::initializer_list<InPlace> allowed) const;

 private:
  std::string_view fn_;
};

// The statistics dtype for activations of dtype x: f64 for f64, else f32.
constexpr DType stat_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace normkit::detail
