// normkit — non-owning views of the arrays the ops read and write.
//
// A matrix view is (rows, D): any leading dimensions of an activation tensor
// [B, T, D] are flattened into rows = B·T. Features of a row are contiguous;
// rows are `row_stride` elements apart (row_stride >= D), so a view can select
// every other row, a column block of a wider buffer, or a padded layout.
// A vector view is (n) contiguous elements: weights, biases, per-row statistics.
//
// Views never own memory. An empty data pointer in a vector view means
// "absent" (an optional weight, bias or statistic that is not wanted).
//
// Every view names the device its memory is on: the CPU, or CUDA device
// `device_index`. All arguments of one call must be on one device, which runs
// the call (normkit/device.hpp: the stream a CUDA call is ordered on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace normkit {

enum class DType : std::uint8_t { f32, f64, f16, bf16 };
enum class Device : std::uint8_t { cpu, cuda };

// Bytes per element of a dtype.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

constexpr std::string_view device_name(Device d) noexcept {
  return d == Device::cpu ? "cpu" : "cuda";
}

// Read-only (rows, D) view. Row r starts at data + r·row_stride elements.
struct ConstMatrix {
  const void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;        // D, the normalized width
  std::int64_t row_stride = 0;  // in elements; >= cols
  Device device = Device::cpu;
  std::int32_t device_index = 0;  // which CUDA device; 0 on the CPU
};

// Writable (rows, D) view.
struct Matrix {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
  Device device = Device::cpu;
  std::int32_t device_index = 0;

  operator ConstMatrix() const noexcept {  // NOLINT: a writable view reads too
    return {data, dtype, rows, cols, row_stride, device, device_index};
  }
};

// Read-only (n) contiguous view; data == nullptr means absent.
struct ConstVector {
  const void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t size = 0;
  Device device = Device::cpu;
  std::int32_t device_index = 0;

  bool present() const noexcept { return data != nullptr; }
};

// Writable (n) contiguous view; data == nullptr means "not wanted".
struct Vector {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t size = 0;
  Device device = Device::cpu;
  std::int32_t device_index = 0;

  bool present() const noexcept { return data != nullptr; }
  operator ConstVector() const noexcept {  // NOLINT: a writable view reads too
    return {data, dtype, size, device, device_index};
  }
};

// Type tags for the typed helpers below. The 16-bit types are storage only:
// normkit converts them in registers and never does arithmetic in them.
struct half_t { std::uint16_t bits; };
struct bfloat16_t { std::uint16_t bits; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<half_t>() { return DType::f16; }
template <> constexpr DType dtype_of<bfloat16_t>() { return DType::bf16; }

// Typed constructors: matrix(ptr, rows, D) is contiguous; pass row_stride for
// anything else.
template <class T>
ConstMatrix matrix(const T* p, std::int64_t rows, std::int64_t cols, std::int64_t row_stride = -1) {
  return {p, dtype_of<T>(), rows, cols, row_stride < 0 ? cols : row_stride, Device::cpu};
}
template <class T>
Matrix matrix(T* p, std::int64_t rows, std::int64_t cols, std::int64_t row_stride = -1) {
  return {p, dtype_of<T>(), rows, cols, row_stride < 0 ? cols : row_stride, Device::cpu};
}
template <class T>
ConstVector vector(const T* p, std::int64_t n) { return {p, dtype_of<T>(), n, Device::cpu}; }
template <class T>
Vector vector(T* p, std::int64_t n) { return {p, dtype_of<T>(), n, Device::cpu}; }

// The same view of memory on another device, e.g. a CUDA allocation:
//   on_device(matrix(p, rows, D), Device::cuda, 0)
template <class View>
constexpr View on_device(View v, Device d, std::int32_t index = 0) noexcept {
  v.device = d;
  v.device_index = d == Device::cpu ? 0 : index;
  return v;
}

}  // namespace normkit
