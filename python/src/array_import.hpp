// Array arguments: a borrowed, zero-copy view of one Python array.
//
//   * objects whose type publishes the DLPack C exchange API (PyTorch >=
//     2.10, dlpack_exchange.hpp) are viewed through its
//     dltensor_from_py_object_no_sync, a C call;
//   * everything else (NumPy, older PyTorch, other DLPack producers) goes
//     through nanobind's ndarray import (`__dlpack__` or the buffer protocol);
//   * NumPy arrays of ml_dtypes.bfloat16, which NumPy can export neither by
//     DLPack nor by the buffer protocol, are reinterpreted as uint16.
//
// Nothing is copied: an array of another element type or on a device the
// binding does not know is a TypeError.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>

#include "dlpack_exchange.hpp"
#include "normkit/normkit.hpp"

namespace normkit_py {

constexpr int kMaxDims = 32;

struct Array {
  nanobind::handle obj;  // the Python object (borrowed from the call's arguments)
  const DLPackExchangeAPI* api = nullptr;  // its framework's exchange API, if any
  void* data = nullptr;
  normkit::DType dtype = normkit::DType::f32;
  int ndim = 0;
  std::int64_t shape[kMaxDims];  // first ndim valid
  std::int64_t strides[kMaxDims];  // first ndim valid, in elements
  normkit::Device device = normkit::Device::cpu;
  std::int32_t dl_device_type = 1, dl_device_id = 0;  // as DLPack gave them
  // What keeps the data alive beyond the caller's reference: a uint16 view
  // of a bfloat16 array, and nanobind's imported DLPack tensor.
  nanobind::object keep;
  nanobind::ndarray<nanobind::ro> held_ro;
  nanobind::ndarray<> held_rw;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

// View `h` as an array; `fn` and `arg` name the function and the argument
// in errors. `writable`: the argument is an output (a read-only array is a
// ValueError).
Array get_array(const char* fn, const char* arg, nanobind::handle h, bool writable);

// An optional array argument: None is absent.
struct Opt {
  std::optional<Array> a;
  bool present() const { return a.has_value(); }
};
Opt get_optional(const char* fn, const char* arg, nanobind::handle h, bool writable);

// The CUDA device an array is on (0 on the CPU).
inline std::int32_t device_index(const Array& a) {
  return a.device == normkit::Device::cuda ? a.dl_device_id : 0;
}

}  // namespace normkit_py
