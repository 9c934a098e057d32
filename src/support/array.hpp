// An owning (rows, cols) array of one dtype for the project's tests and
// tools: filled from doubles (rounded to the dtype), handed to the public API
// as views, read back as doubles. Internal: not part of the installed library.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

#include "normkit/half.hpp"
#include "normkit/tensor.hpp"
#include "reference.hpp"

namespace normkit::support {

// Rounds v to dtype t (to nearest even) and stores it at element i of p.
// 16-bit values go through float first, which is exact for every value the
// tests and tools store (they are floats to begin with).
inline void store(void* p, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(p)[i] = v; return;
    case DType::f16: static_cast<half_t*>(p)[i] = to_f16(static_cast<float>(v)); return;
    case DType::bf16: static_cast<bfloat16_t*>(p)[i] = to_bf16(static_cast<float>(v)); return;
  }
}

// Rows are `stride` >= cols elements apart. Every element starts as
// kSentinel, padding included, so that a kernel that leaves an output
// element unwritten, or writes outside a row, is caught.
class Array {
 public:
  static constexpr double kSentinel = -12345.0;

  Array() = default;
  Array(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t stride = -1)
      : dtype_(dtype), rows_(rows), cols_(cols), stride_(stride < 0 ? cols : stride),
        // 64 spare bytes after the last row: bytes() shows a write past the end.
        bytes_(static_cast<std::size_t>(std::max<std::int64_t>(rows * stride_, 1)) * dtype_size(dtype) + 64) {
    for (std::int64_t i = 0; i < rows_ * stride_; ++i) store(data(), dtype_, i, kSentinel);
  }
  // values: rows·cols numbers in row-major order.
  Array(DType dtype, std::int64_t rows, std::int64_t cols, const std::vector<double>& values)
      : Array(dtype, rows, cols) {
    assert(static_cast<std::int64_t>(values.size()) == rows * cols);
    for (std::int64_t i = 0; i < size(); ++i) set(i, values[static_cast<std::size_t>(i)]);
  }
  // One row: a vector of weights, a per-row statistic, a single token.
  Array(DType dtype, const std::vector<double>& values)
      : Array(dtype, 1, static_cast<std::int64_t>(values.size()), values) {}

  DType dtype() const { return dtype_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t stride() const { return stride_; }
  std::int64_t size() const { return rows_ * cols_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  // Every byte, padding and the spare bytes included: for bitwise comparisons.
  const std::vector<unsigned char>& bytes() const { return bytes_; }

  // Element (r, j), or element i of the row-major (rows, cols) order.
  double get(std::int64_t r, std::int64_t j) const { return reference::load(data(), dtype_, r * stride_ + j); }
  void set(std::int64_t r, std::int64_t j, double v) { store(data(), dtype_, r * stride_ + j, v); }
  double get(std::int64_t i) const { return get(i / cols_, i % cols_); }
  void set(std::int64_t i, double v) { set(i / cols_, i % cols_, v); }
  void fill(double v) {
    for (std::int64_t i = 0; i < size(); ++i) set(i, v);
  }

  // Row-major values of the (rows, cols) part, and of one row.
  std::vector<double> values() const { return reference::to_double(cmat()); }
  std::vector<double> row(std::int64_t r) const {
    std::vector<double> out(static_cast<std::size_t>(cols_));
    for (std::int64_t j = 0; j < cols_; ++j) out[static_cast<std::size_t>(j)] = get(r, j);
    return out;
  }

  // Views for the public API: the array as (rows, D), or, when its elements
  // are contiguous, all of them as one vector (weights, biases, statistics).
  Matrix mat() { return {data(), dtype_, rows_, cols_, stride_, Device::cpu}; }
  ConstMatrix mat() const { return cmat(); }
  ConstMatrix cmat() const { return {data(), dtype_, rows_, cols_, stride_, Device::cpu}; }
  Vector vec() {
    assert(rows_ == 1 || stride_ == cols_);
    return {data(), dtype_, size(), Device::cpu};
  }
  ConstVector vec() const { return cvec(); }
  ConstVector cvec() const {
    assert(rows_ == 1 || stride_ == cols_);
    return {data(), dtype_, size(), Device::cpu};
  }

  // True if every padding element still holds the sentinel.
  bool padding_intact() const {
    unsigned char one[8];
    store(one, dtype_, 0, kSentinel);
    const double sentinel = reference::load(one, dtype_, 0);
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t j = cols_; j < stride_; ++j)
        if (get(r, j) != sentinel) return false;
    return true;
  }

  bool bitwise_equal_row(const Array& other, std::int64_t r) const {
    const std::size_t row_bytes = static_cast<std::size_t>(cols_) * dtype_size(dtype_);
    if (dtype_ != other.dtype_ || cols_ != other.cols_) return false;
    const auto* a = bytes_.data() + static_cast<std::size_t>(r * stride_) * dtype_size(dtype_);
    const auto* b = other.bytes_.data() + static_cast<std::size_t>(r * other.stride_) * dtype_size(dtype_);
    return std::memcmp(a, b, row_bytes) == 0;
  }

 private:
  DType dtype_ = DType::f32;
  std::int64_t rows_ = 0, cols_ = 0, stride_ = 0;
  std::vector<unsigned char> bytes_;
};

}  // namespace normkit::support
