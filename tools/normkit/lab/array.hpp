// A dense (rows, D) array of one dtype: the lab fills it from doubles, hands
// its views to the public API and reads the results back as doubles.
#pragma once

#include <cstdint>
#include <vector>

#include "normkit/tensor.hpp"

namespace normkit::lab {

// Writes v into element i of a contiguous array of dtype t. f32, f16 and
// bf16 round to nearest even; 16-bit values go through float first, which
// is exact for every value the lab stores (they are floats to begin with).
void store(void* p, DType t, std::int64_t i, double v);

class Array {
 public:
  Array() = default;
  Array(DType dtype, std::int64_t rows, std::int64_t cols);
  // values: rows·cols numbers in row-major order, each rounded into dtype.
  Array(DType dtype, std::int64_t rows, std::int64_t cols, const std::vector<double>& values);
  // A one-row array (a vector of weights, or a single token).
  Array(DType dtype, const std::vector<double>& values);

  DType dtype() const { return dtype_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }

  double get(std::int64_t i) const;  // element i (row-major), widened exactly
  double get(std::int64_t r, std::int64_t j) const { return get(r * cols_ + j); }
  void set(std::int64_t i, double v);
  void set(std::int64_t r, std::int64_t j, double v) { set(r * cols_ + j, v); }
  std::vector<double> values() const;
  std::vector<double> row(std::int64_t r) const;
  void fill(double v);

  // Views for the public API: the whole array as (rows, D), or every element
  // as one vector (weights, biases, per-row statistics).
  Matrix mat() { return {data(), dtype_, rows_, cols_, cols_, Device::cpu}; }
  ConstMatrix mat() const { return {data(), dtype_, rows_, cols_, cols_, Device::cpu}; }
  Vector vec() { return {data(), dtype_, size(), Device::cpu}; }
  ConstVector vec() const { return {data(), dtype_, size(), Device::cpu}; }

  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  bool bitwise_equal_row(const Array& other, std::int64_t r) const;

 private:
  DType dtype_ = DType::f32;
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<std::uint64_t> storage_;  // 8-byte words keep every dtype aligned
};

// Deterministic pseudo-random numbers, identical on every platform (the
// standard distributions are not), so every run of the lab sees the same data.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box–Muller)
  std::vector<double> normals(std::int64_t n, double mean = 0.0, double scale = 1.0);

 private:
  std::uint64_t state_;
};

}  // namespace normkit::lab
