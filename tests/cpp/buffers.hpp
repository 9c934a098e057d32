// Test data: owning, dtype-erased buffers with a row stride, filled from
// doubles (rounded to the dtype) and read back as doubles.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "normkit/half.hpp"
#include "normkit/tensor.hpp"
#include "reference.hpp"

namespace normkit::test {

// Round a double to dtype t and store it at element i of p.
inline void store(void* p, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f16: static_cast<half_t*>(p)[i] = to_f16(static_cast<float>(v)); break;
    case DType::bf16: static_cast<bfloat16_t*>(p)[i] = to_bf16(static_cast<float>(v)); break;
  }
}

// A (rows, D) array with row_stride >= D. Padding elements are filled with
// a sentinel so that a kernel writing outside a row is caught.
class Buffer {
 public:
  static constexpr double kSentinel = -12345.0;

  Buffer() = default;
  Buffer(DType t, std::int64_t rows, std::int64_t D, std::int64_t stride = -1)
      : dtype_(t), rows_(rows), cols_(D), stride_(stride < 0 ? D : stride),
        bytes_(static_cast<std::size_t>(std::max<std::int64_t>(rows * stride_, 1)) * dtype_size(t) + 64) {
    for (std::int64_t i = 0; i < rows_ * stride_; ++i) store(data(), dtype_, i, kSentinel);
  }

  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  DType dtype() const { return dtype_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t stride() const { return stride_; }

  Matrix mat() { return {data(), dtype_, rows_, cols_, stride_, Device::cpu}; }
  ConstMatrix cmat() const { return {data(), dtype_, rows_, cols_, stride_, Device::cpu}; }
  // Vectors: a buffer of one row.
  Vector vec() { return {data(), dtype_, cols_, Device::cpu}; }
  ConstVector cvec() const { return {data(), dtype_, cols_, Device::cpu}; }

  void set(std::int64_t r, std::int64_t j, double v) { store(data(), dtype_, r * stride_ + j, v); }
  double get(std::int64_t r, std::int64_t j) const { return reference::load(data(), dtype_, r * stride_ + j); }

  // Dense row-major values of the (rows, D) part, as doubles.
  std::vector<double> values() const { return reference::to_double(cmat()); }

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

  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  DType dtype_ = DType::f32;
  std::int64_t rows_ = 0, cols_ = 0, stride_ = 0;
  std::vector<unsigned char> bytes_;
};

// Fill with N(mean, sd) values rounded to the dtype.
inline void fill_normal(Buffer& b, std::mt19937_64& rng, double mean = 0.0, double sd = 1.0) {
  std::normal_distribution<double> dist(mean, sd);
  for (std::int64_t r = 0; r < b.rows(); ++r)
    for (std::int64_t j = 0; j < b.cols(); ++j) b.set(r, j, dist(rng));
}

// A vector buffer (1 row of n) with N(mean, sd) values.
inline Buffer random_vector(DType t, std::int64_t n, std::mt19937_64& rng, double mean, double sd) {
  Buffer b(t, 1, n);
  fill_normal(b, rng, mean, sd);
  return b;
}

}  // namespace normkit::test
