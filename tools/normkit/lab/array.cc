#include "lab/array.hpp"

#include <cmath>
#include <cstring>
#include <numbers>

#include "normkit/half.hpp"
#include "reference.hpp"

namespace normkit::lab {

void store(void* p, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(p)[i] = v; return;
    case DType::f16: static_cast<half_t*>(p)[i] = to_f16(static_cast<float>(v)); return;
    case DType::bf16: static_cast<bfloat16_t*>(p)[i] = to_bf16(static_cast<float>(v)); return;
  }
}

Array::Array(DType dtype, std::int64_t rows, std::int64_t cols)
    : dtype_(dtype),
      rows_(rows),
      cols_(cols),
      storage_(static_cast<std::size_t>((rows * cols * static_cast<std::int64_t>(dtype_size(dtype)) + 7) / 8),
               0) {}

Array::Array(DType dtype, std::int64_t rows, std::int64_t cols, const std::vector<double>& values)
    : Array(dtype, rows, cols) {
  for (std::int64_t i = 0; i < size(); ++i) set(i, values[static_cast<std::size_t>(i)]);
}

Array::Array(DType dtype, const std::vector<double>& values)
    : Array(dtype, 1, static_cast<std::int64_t>(values.size()), values) {}

double Array::get(std::int64_t i) const { return reference::load(data(), dtype_, i); }
void Array::set(std::int64_t i, double v) { store(data(), dtype_, i, v); }

std::vector<double> Array::values() const {
  std::vector<double> out(static_cast<std::size_t>(size()));
  for (std::int64_t i = 0; i < size(); ++i) out[static_cast<std::size_t>(i)] = get(i);
  return out;
}

std::vector<double> Array::row(std::int64_t r) const {
  std::vector<double> out(static_cast<std::size_t>(cols_));
  for (std::int64_t j = 0; j < cols_; ++j) out[static_cast<std::size_t>(j)] = get(r, j);
  return out;
}

void Array::fill(double v) {
  for (std::int64_t i = 0; i < size(); ++i) set(i, v);
}

bool Array::bitwise_equal_row(const Array& other, std::int64_t r) const {
  const std::size_t bytes = static_cast<std::size_t>(cols_) * dtype_size(dtype_);
  const auto* a = static_cast<const unsigned char*>(data()) + static_cast<std::size_t>(r) * bytes;
  const auto* b = static_cast<const unsigned char*>(other.data()) + static_cast<std::size_t>(r) * bytes;
  return dtype_ == other.dtype_ && cols_ == other.cols_ && std::memcmp(a, b, bytes) == 0;
}

// splitmix64: a tiny generator with good statistics and a fixed definition.
std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<double> Rng::normals(std::int64_t n, double mean, double scale) {
  std::vector<double> out(static_cast<std::size_t>(n));
  for (double& v : out) v = mean + scale * normal();
  return out;
}

}  // namespace normkit::lab
