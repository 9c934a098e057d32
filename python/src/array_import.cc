#include "array_import.hpp"

#include <string>
#include <utility>

#include "errors.hpp"

namespace nb = nanobind;

namespace normkit_py {
namespace {

using normkit::Device;
using normkit::DType;

std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const char* base = "unknown";
  switch (static_cast<C>(t.code)) {
    case C::Int: base = "int"; break;
    case C::UInt: base = "uint"; break;
    case C::Float: base = "float"; break;
    case C::Bfloat: base = "bfloat"; break;
    case C::Complex: base = "complex"; break;
    case C::Bool: return "bool";
    default: return "an unsupported element type (DLPack code " + std::to_string(t.code) + ")";
  }
  // Appends, not "x" + std::to_string(..): GCC 12 reports a false -Wrestrict
  // for inserting a literal in front of a temporary string.
  std::string name = base;
  name += std::to_string(t.bits);
  if (t.lanes != 1) {
    name += 'x';
    name += std::to_string(t.lanes);
  }
  return name;
}

// Fill `a` from a DLTensor; `bf16_bits` marks a uint16 reinterpretation of a
// bfloat16 array.
void from_dltensor(const char* fn, const char* arg, const nb::dlpack::dltensor& t, bool bf16_bits,
                   Array& a) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.dtype.code);
  const int bits = t.dtype.bits;
  bool ok = t.dtype.lanes == 1;
  if (bf16_bits && code == C::UInt && bits == 16) {
    a.dtype = DType::bf16;
  } else if (code == C::Float && bits == 32) {
    a.dtype = DType::f32;
  } else if (code == C::Float && bits == 64) {
    a.dtype = DType::f64;
  } else if (code == C::Float && bits == 16) {
    a.dtype = DType::f16;
  } else if (code == C::Bfloat && bits == 16) {
    a.dtype = DType::bf16;
  } else {
    ok = false;
  }
  if (!ok)
    type_error(fn, std::string(arg) + " has dtype " + dlpack_dtype_name(t.dtype) +
                       "; expected float32, float64, float16 or bfloat16");

  const int dev = t.device.device_type;
  a.dl_device_type = t.device.device_type;
  a.dl_device_id = t.device.device_id;
  if (dev == nb::device::cpu::value || dev == nb::device::cuda_host::value) {
    a.device = Device::cpu;
  } else if (dev == nb::device::cuda::value || dev == nb::device::cuda_managed::value) {
    a.device = Device::cuda;  // the library decides what it can run (it says so if not)
  } else {
    type_error(fn, std::string(arg) + " is on DLPack device type " + std::to_string(dev) +
                       "; normkit runs on CPU arrays");
  }

  if (t.ndim < 0 || t.ndim > kMaxDims)
    type_error(fn, std::string(arg) + " has " + std::to_string(t.ndim) + " dimensions; at most " +
                       std::to_string(kMaxDims) + " are supported");
  a.ndim = t.ndim;
  std::int64_t compact = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    a.shape[i] = t.shape[i];
    a.strides[i] = t.strides ? t.strides[i] : compact;  // null strides: row-major
    compact *= t.shape[i];
  }
  a.data = static_cast<char*>(t.data) + t.byte_offset;
}

// True for a NumPy array of ml_dtypes.bfloat16. Asked only after an import
// failed, so the common path pays nothing for it.
bool is_numpy_bf16(nb::handle h) {
  if (!nb::hasattr(h, "dtype") || !nb::hasattr(h, "view")) return false;
  nb::object name = nb::getattr(h.attr("dtype"), "name", nb::none());
  return PyUnicode_Check(name.ptr()) && PyUnicode_CompareWithASCIIString(name.ptr(), "bfloat16") == 0;
}

// A DLTensor describing what a nanobind ndarray imported.
template <class NDArray>
nb::dlpack::dltensor dltensor_of(const NDArray& r) {
  nb::dlpack::dltensor t;
  t.data = r.data_handle();
  t.device = {r.device_type(), r.device_id()};
  t.ndim = static_cast<std::int32_t>(r.ndim());
  t.dtype = r.dtype();
  t.shape = const_cast<std::int64_t*>(r.shape_ptr());
  t.strides = const_cast<std::int64_t*>(r.stride_ptr());
  t.byte_offset = r.byte_offset();
  return t;
}

// nanobind's import (__dlpack__ or the buffer protocol) of `src` into `a`;
// false if `src` is not an array nanobind can import.
bool import_ndarray(const char* fn, const char* arg, nb::handle src, bool writable, bool bf16_bits, Array& a) {
  if (writable) {
    nb::ndarray<> w;
    if (nb::try_cast(src, w, false)) {
      from_dltensor(fn, arg, dltensor_of(w), bf16_bits, a);
      a.held_rw = std::move(w);
      return true;
    }
  }
  nb::ndarray<nb::ro> r;
  if (!nb::try_cast(src, r, false)) return false;
  if (writable) value_error(fn, std::string(arg) + " is a read-only array");
  from_dltensor(fn, arg, dltensor_of(r), bf16_bits, a);
  a.held_ro = std::move(r);
  return true;
}

}  // namespace

Array get_array(const char* fn, const char* arg, nb::handle h, bool writable) {
  Array a;
  a.obj = h;
  if (h.is_none()) type_error(fn, std::string(arg) + " is None; an array is required");

  // Fast path: the DLPack C exchange API (PyTorch). The caller's reference
  // to h keeps the tensor alive for the call.
  if (const DLPackExchangeAPI* api = exchange_api(Py_TYPE(h.ptr()))) {
    nb::dlpack::dltensor t;
    if (api->dltensor_from_py_object_no_sync(h.ptr(), &t) == 0) {
      from_dltensor(fn, arg, t, false, a);
      a.api = api;
      return a;
    }
    // The producer refused (a meta or sparse tensor, ...): pass on the
    // first line of its reason (PyTorch appends a C++ stack trace).
    nb::python_error err;
    std::string why = nb::str(err.value()).c_str();
    why = why.substr(0, why.find('\n'));
    type_error(fn, std::string(arg) + " (" + kind_of(h) + ") cannot be viewed as a strided array: " + why);
  }
  if (import_ndarray(fn, arg, h, writable, false, a)) return a;
  // A bfloat16 NumPy array: the same memory viewed as uint16 is importable.
  if (is_numpy_bf16(h)) {
    a.keep = h.attr("view")("uint16");
    if (import_ndarray(fn, arg, a.keep, writable, true, a)) return a;
  }
  type_error(fn, std::string(arg) + " must be an array (a NumPy array, a PyTorch tensor or another "
                                    "DLPack producer), got " + kind_of(h));
}

Opt get_optional(const char* fn, const char* arg, nb::handle h, bool writable) {
  Opt o;
  if (!h.is_none()) o.a.emplace(get_array(fn, arg, h, writable));
  return o;
}

}  // namespace normkit_py
