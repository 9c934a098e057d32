// normkit._normkit — the Python binding of include/normkit/ops.hpp.
//
// Every function here turns its array arguments into normkit views without
// copying, allocates the outputs the caller did not pass (in the caller's
// framework), calls the library with the GIL released and returns the
// outputs. Default arguments and autograd live in the Python package
// (python/normkit); argument validation beyond "is this an array, and which
// (rows, D) view is it" lives in the library, whose normkit::Error arrives in
// Python as ValueError.
//
// Arrays cross the boundary as DLPack tensors:
//   * objects whose type publishes the DLPack C exchange API
//     (`__dlpack_c_exchange_api__`, PyTorch >= 2.10) are viewed through its
//     dltensor_from_py_object_no_sync: a C call that fills a DLTensor in
//     ~20 ns, where `tensor.__dlpack__()` is a Python method that costs
//     ~2 µs per tensor — more than the whole kernel for one row of 4096;
//   * everything else (NumPy, older PyTorch, other DLPack producers) goes
//     through nanobind's ndarray import (`__dlpack__` or the buffer protocol);
//   * NumPy arrays of ml_dtypes.bfloat16, which NumPy can export neither by
//     DLPack nor by the buffer protocol, are reinterpreted as uint16.
//
// Shapes: an array of shape (*lead, *normalized_shape) is the (rows, D) view
// with rows = prod(lead) and D = prod(normalized_shape). The normalized
// dimensions must be contiguous; the leading dimensions must be reachable
// with one row stride (any slicing of rows, a column block of a wider
// buffer, a padded layout). Anything else is a ValueError, never a copy.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "normkit/normkit.hpp"
#include "output_cache.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using normkit::ConstMatrix;
using normkit::ConstVector;
using normkit::Device;
using normkit::DType;
using normkit::Matrix;
using normkit::Vector;

constexpr int kMaxDims = 32;

// ---------------------------------------------------------------------------
// Error helpers. The library's own messages start with the function name;
// the binding's do too, so a user sees one style.

[[noreturn]] void type_error(const char* fn, const std::string& msg) {
  throw nb::type_error((std::string(fn) + ": " + msg).c_str());
}
[[noreturn]] void value_error(const char* fn, const std::string& msg) {
  throw nb::value_error((std::string(fn) + ": " + msg).c_str());
}

std::string kind_of(nb::handle h) { return nb::inst_name(h).c_str(); }

std::string shape_str(const std::int64_t* shape, int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (n == 1) s += ",";
  return s + ")";
}

// ---------------------------------------------------------------------------
// The DLPack C exchange API (dlpack.h >= 1.3). Declared here by layout, as
// the DLPack standard fixes it, so that building needs no framework headers.

struct DLPackVersion {
  std::uint32_t major, minor;
};
struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  std::uint64_t flags;
  nb::dlpack::dltensor dl_tensor;
};
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  int (*managed_tensor_allocator)(nb::dlpack::dltensor* prototype, DLManagedTensorVersioned** out,
                                  void* error_ctx, void (*set_error)(void*, const char*, const char*));
  void* managed_tensor_from_py_object_no_sync;
  int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);  // may be null
  // The stream the framework's work on (device_type, device_id) is queued on.
  int (*current_work_stream)(std::int32_t device_type, std::int32_t device_id, void** out_current_stream);
};

// The exchange API of a Python type if it offers a usable one, else null.
// Looked up once per type: the attribute lives on the type and the table
// must stay valid for the life of the process.
const DLPackExchangeAPI* exchange_api(PyTypeObject* tp) {
  struct Entry {
    PyTypeObject* type;
    const DLPackExchangeAPI* api;
  };
  static Entry cache[16];
  static int used = 0;
  for (int i = 0; i < used; ++i)
    if (cache[i].type == tp) return cache[i].api;

  const DLPackExchangeAPI* found = nullptr;
  PyObject* cap = PyObject_GetAttrString(reinterpret_cast<PyObject*>(tp), "__dlpack_c_exchange_api__");
  if (!cap) {
    PyErr_Clear();
  } else {
    auto* api = static_cast<DLPackExchangeAPI*>(PyCapsule_GetPointer(cap, "dlpack_exchange_api"));
    if (!api) PyErr_Clear();
    // Walk to the newest table of major version 1, the layout declared above.
    for (auto* h = api ? &api->header : nullptr; h; h = h->prev_api) {
      if (h->version.major == 1 && h->version.minor >= 3) {
        auto* t = reinterpret_cast<DLPackExchangeAPI*>(h);
        if (t->dltensor_from_py_object_no_sync && t->managed_tensor_allocator &&
            t->managed_tensor_to_py_object_no_sync)
          found = t;
        break;
      }
    }
    Py_DECREF(cap);
  }
  if (used < 16) {
    Py_INCREF(tp);  // keep the cached key alive
    cache[used++] = {tp, found};
  }
  return found;
}

// ---------------------------------------------------------------------------
// A borrowed view of one Python array argument.

struct Array {
  nb::handle obj;  // the Python object (borrowed from the call's arguments)
  const DLPackExchangeAPI* api = nullptr;  // its framework's exchange API, if any
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::int64_t shape[kMaxDims];  // first ndim valid
  std::int64_t strides[kMaxDims];  // first ndim valid, in elements
  Device device = Device::cpu;
  std::int32_t dl_device_type = 1, dl_device_id = 0;  // as DLPack gave them
  // What keeps the data alive beyond the caller's reference: a uint16 view
  // of a bfloat16 array, and nanobind's imported DLPack tensor.
  nb::object keep;
  nb::ndarray<nb::ro> held_ro;
  nb::ndarray<> held_rw;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

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

// True for a NumPy array of ml_dtypes.bfloat16, which NumPy can export
// neither by DLPack nor by the buffer protocol. Asked only after an import
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

// View `h` as an array. `writable`: the argument is an output.
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

// ---------------------------------------------------------------------------
// normalized_shape and the (rows, D) view.

struct NormShape {
  int k = 0;  // number of normalized (trailing) dimensions
  std::int64_t dims[kMaxDims] = {};
};

NormShape get_normalized_shape(const char* fn, nb::handle h) {
  NormShape s;
  if (PyLong_Check(h.ptr())) {
    s.k = 1;
    s.dims[0] = PyLong_AsLongLong(h.ptr());
    if (s.dims[0] == -1 && PyErr_Occurred()) throw nb::python_error();
  } else {
    PyObject* seq = PySequence_Fast(h.ptr(), "");
    if (!seq) {
      PyErr_Clear();
      type_error(fn, "normalized_shape must be an int or a sequence of ints, got " + kind_of(h));
    }
    nb::object owner = nb::steal(seq);
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > kMaxDims) value_error(fn, "normalized_shape has too many dimensions");
    s.k = static_cast<int>(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
      if (!PyLong_Check(item) && !PyIndex_Check(item))
        type_error(fn, "normalized_shape must be an int or a sequence of ints, got an element of type " +
                           kind_of(item));
      s.dims[i] = PyLong_AsLongLong(item);
      if (s.dims[i] == -1 && PyErr_Occurred()) throw nb::python_error();
    }
  }
  if (s.k == 0) value_error(fn, "normalized_shape is empty; it must name at least one dimension");
  for (int i = 0; i < s.k; ++i)
    if (s.dims[i] < 0) value_error(fn, "normalized_shape " + shape_str(s.dims, s.k) + " has a negative size");
  return s;
}

// The (rows, D) view of an activation array whose trailing dimensions are
// `ns`. `like`, if given, is the array whose shape this one must equal.
// The CUDA device an array is on (0 on the CPU).
std::int32_t device_index(const Array& a) { return a.device == Device::cuda ? a.dl_device_id : 0; }

// A normkit call on the array's device: queued on the framework's current
// stream for that device (the exchange API's current_work_stream; the
// default stream for arrays that came without one), with the GIL released
// for the call. The stream is asked for while the GIL is still held.
class CallScope {
 public:
  CallScope(const char* fn, const Array& ref) : guard_(device_index(ref), work_stream(fn, ref)) {}

 private:
  static normkit::StreamHandle work_stream(const char* fn, const Array& a) {
    if (a.device != Device::cuda || !a.api || !a.api->current_work_stream) return nullptr;
    void* stream = nullptr;
    if (a.api->current_work_stream(a.dl_device_type, a.dl_device_id, &stream) != 0) {
      if (PyErr_Occurred()) throw nb::python_error();
      throw std::runtime_error(std::string(fn) + ": the framework could not say which CUDA stream to use");
    }
    return stream;
  }
  normkit::StreamGuard guard_;
  nb::gil_scoped_release release_;
};

template <class M>
M to_matrix(const char* fn, const char* arg, const Array& a, const NormShape& ns, const Array* like,
            const char* like_arg) {
  if (like) {
    bool same = a.ndim == like->ndim;
    for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == like->shape[i];
    if (!same)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) + ", expected the shape of " +
                          like_arg + " " + shape_str(like->shape, like->ndim));
  } else {
    bool match = a.ndim >= ns.k;
    for (int i = 0; match && i < ns.k; ++i) match = a.shape[a.ndim - ns.k + i] == ns.dims[i];
    if (!match)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) +
                          "; its trailing dimensions must equal normalized_shape " + shape_str(ns.dims, ns.k));
  }
  const int lead = a.ndim - ns.k;
  std::int64_t D = 1, rows = 1;
  for (int i = lead; i < a.ndim; ++i) D *= a.shape[i];
  for (int i = 0; i < lead; ++i) rows *= a.shape[i];

  // Normalized dimensions: contiguous (size-1 dimensions have any stride).
  if (rows > 0) {
    std::int64_t expect = 1;
    for (int i = a.ndim - 1; i >= lead; --i) {
      if (a.shape[i] != 1 && a.strides[i] != expect)
        value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                            shape_str(a.strides, a.ndim) +
                            ") is not contiguous over the normalized dimensions; make it contiguous first "
                            "(.contiguous() / numpy.ascontiguousarray)");
      expect *= a.shape[i];
    }
  }
  // Leading dimensions: one row stride must reach every row.
  std::int64_t row_stride = D, expect = -1;
  for (int i = lead - 1; i >= 0 && rows > 1; --i) {
    if (a.shape[i] == 1) continue;
    if (expect < 0) {
      row_stride = a.strides[i];
      expect = a.strides[i] * a.shape[i];
    } else if (a.strides[i] != expect) {
      value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                          shape_str(a.strides, a.ndim) +
                          ") has rows that no single row stride reaches; make it contiguous first "
                          "(.contiguous() / numpy.ascontiguousarray)");
    } else {
      expect *= a.shape[i];
    }
  }
  using Ptr = decltype(M::data);
  return M{static_cast<Ptr>(a.data), a.dtype, rows, D, row_stride, a.device, device_index(a)};
}

// A (n) vector view: any shape, contiguous. `expect_shape`, if given, is the
// shape the array must have (weights and biases: normalized_shape).
template <class V>
V to_vector(const char* fn, const char* arg, const Array& a, const NormShape* expect_shape) {
  if (expect_shape) {
    bool same = a.ndim == expect_shape->k;
    for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == expect_shape->dims[i];
    if (!same)
      value_error(fn, std::string(arg) + " has shape " + shape_str(a.shape, a.ndim) +
                          ", expected normalized_shape " + shape_str(expect_shape->dims, expect_shape->k));
  }
  std::int64_t expect = 1;
  for (int i = a.ndim - 1; i >= 0 && a.numel() > 0; --i) {
    if (a.shape[i] != 1 && a.strides[i] != expect)
      value_error(fn, std::string(arg) + " (shape " + shape_str(a.shape, a.ndim) + ", strides " +
                          shape_str(a.strides, a.ndim) + ") must be contiguous");
    expect *= a.shape[i];
  }
  using Ptr = decltype(V::data);
  return V{static_cast<Ptr>(a.data), a.dtype, a.numel(), a.device, device_index(a)};
}

// Optional arguments: None is the absent view.
struct Opt {
  std::optional<Array> a;
  bool present() const { return a.has_value(); }
};
Opt get_optional(const char* fn, const char* arg, nb::handle h, bool writable) {
  Opt o;
  if (!h.is_none()) o.a.emplace(get_array(fn, arg, h, writable));
  return o;
}
template <class V>
V opt_vector(const char* fn, const char* arg, const Opt& o, const NormShape* expect_shape) {
  return o.present() ? to_vector<V>(fn, arg, *o.a, expect_shape) : V{};
}

double get_eps(const char* fn, nb::handle h) {
  if (!PyFloat_Check(h.ptr()) && !PyLong_Check(h.ptr()))
    type_error(fn, "eps must be a float, got " + kind_of(h));
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return v;  // range checks (finite, >= 0) are the library's
}

// ---------------------------------------------------------------------------
// Outputs the caller did not provide are allocated here, in the framework of
// the array they are shaped after: large ones (>= 1 MiB) from the output
// cache (output_cache.hpp), which keeps the pages of freed outputs; smaller
// ones through the exchange API's allocator for a tensor (a C call, where
// torch.empty_like from Python costs ~1 µs), with numpy.empty otherwise.

nb::dlpack::dtype dlpack_dtype(DType t) {
  using C = nb::dlpack::dtype_code;
  switch (t) {
    case DType::f32: return {static_cast<std::uint8_t>(C::Float), 32, 1};
    case DType::f64: return {static_cast<std::uint8_t>(C::Float), 64, 1};
    case DType::f16: return {static_cast<std::uint8_t>(C::Float), 16, 1};
    case DType::bf16: return {static_cast<std::uint8_t>(C::Bfloat), 16, 1};
  }
  return {};
}

void set_alloc_error(void*, const char*, const char* message) { PyErr_SetString(PyExc_RuntimeError, message); }

// A block of the output cache lent to one array, and the DLPack description
// a tensor is made from. Freed by the framework through the deleter (a
// tensor) or the capsule (a NumPy array), from any thread.
struct CachedArray {
  DLManagedTensorVersioned managed;
  std::int64_t shape[kMaxDims];
  std::size_t mapped;
};

void give_back(CachedArray* c) noexcept {
  normkit_py::OutputCache::get().release(c->managed.dl_tensor.data, c->mapped);
  delete c;
}

// A new array of `dtype` and shape[0..ndim) in a cached block, in the
// framework of `like` (a CPU array); null (no Python error set) when the
// system has no memory for the block.
nb::object allocate_cached(const Array& like, DType dtype, int ndim, const std::int64_t* shape,
                           std::size_t bytes) {
  auto owned = std::make_unique<CachedArray>();
  void* p = normkit_py::OutputCache::get().acquire(bytes, &owned->mapped);
  if (!p) return nb::object();
  CachedArray* c = owned.release();
  std::copy(shape, shape + ndim, c->shape);
  c->managed.version = {1, 1};
  c->managed.manager_ctx = c;
  c->managed.deleter = [](DLManagedTensorVersioned* m) { give_back(static_cast<CachedArray*>(m->manager_ctx)); };
  c->managed.flags = 0;
  nb::dlpack::dltensor& t = c->managed.dl_tensor;
  t.data = p;
  t.device = {nb::device::cpu::value, 0};
  t.ndim = ndim;
  t.dtype = dlpack_dtype(dtype);
  t.shape = c->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  if (like.api) {
    void* obj = nullptr;
    // On failure the block stays lent: whether the framework already called
    // the deleter is not specified, and a leak is safer than a double free.
    if (like.api->managed_tensor_to_py_object_no_sync(&c->managed, &obj) != 0) throw nb::python_error();
    return nb::steal(static_cast<PyObject*>(obj));
  }
  nb::capsule owner(c, [](void* q) noexcept { give_back(static_cast<CachedArray*>(q)); });
  // NumPy cannot import bfloat16: the block is made a uint16 array and
  // viewed with like's ml_dtypes.bfloat16.
  const bool bits = dtype == DType::bf16;
  std::size_t dims[kMaxDims];
  std::copy(shape, shape + ndim, dims);
  nb::object arr = nb::ndarray<nb::numpy>(p, static_cast<std::size_t>(ndim), dims, owner, nullptr,
                                          bits ? nb::dtype<std::uint16_t>() : t.dtype)
                       .cast();
  return bits ? nb::object(arr.attr("view")(like.obj.attr("dtype"))) : arr;
}

// A new uninitialised row-major array of `dtype` and shape[0..ndim) in the
// framework, and on the device, of `like`.
nb::object allocate(const Array& like, DType dtype, int ndim, const std::int64_t* shape) {
  std::size_t bytes = normkit::dtype_size(dtype);
  for (int i = 0; i < ndim; ++i) bytes *= static_cast<std::size_t>(shape[i]);
  if (like.dl_device_type == nb::device::cpu::value && normkit_py::OutputCache::get().serves(bytes)) {
    nb::object o = allocate_cached(like, dtype, ndim, shape, bytes);
    if (o.is_valid()) return o;
  }
  if (like.api) {
    nb::dlpack::dltensor proto;
    proto.device = {like.dl_device_type, like.dl_device_id};
    proto.ndim = ndim;
    proto.dtype = dlpack_dtype(dtype);
    proto.shape = const_cast<std::int64_t*>(shape);
    DLManagedTensorVersioned* m = nullptr;
    if (like.api->managed_tensor_allocator(&proto, &m, nullptr, set_alloc_error) != 0) throw nb::python_error();
    void* obj = nullptr;
    if (like.api->managed_tensor_to_py_object_no_sync(m, &obj) != 0) throw nb::python_error();
    return nb::steal(static_cast<PyObject*>(obj));
  }
  static nb::object np_empty = nb::module_::import_("numpy").attr("empty");
  // like's own dtype object keeps ml_dtypes.bfloat16; statistics and
  // parameter gradients of other dtypes are f32 or f64.
  nb::object dt = dtype == like.dtype ? nb::object(like.obj.attr("dtype"))
                                      : nb::object(nb::str(dtype == DType::f64 ? "float64" : "float32"));
  nb::list dims;
  for (int i = 0; i < ndim; ++i) dims.append(shape[i]);
  return np_empty(nb::tuple(dims), dt);
}

// An output argument: the caller's array, or a new one shaped like `like`
// (shape[0..ndim) of dtype `dtype`) when the caller passed None.
struct Output {
  nb::object obj;
  Array a;
};
Output output(const char* fn, const char* arg, nb::handle given, const Array& like, DType dtype, int ndim,
              const std::int64_t* shape) {
  Output o;
  o.obj = given.is_none() ? allocate(like, dtype, ndim, shape) : nb::borrow(given);
  o.a = get_array(fn, arg, o.obj, true);
  return o;
}
Output output_like(const char* fn, const char* arg, nb::handle given, const Array& like) {
  return output(fn, arg, given, like, like.dtype, like.ndim, like.shape);
}
// The per-row statistics of `x`: shape x.shape[:-k], f64 for f64 input.
Output stats_output(const char* fn, const char* arg, const Array& x, const NormShape& ns) {
  return output(fn, arg, nb::none(), x, x.dtype == DType::f64 ? DType::f64 : DType::f32,
                std::max(0, x.ndim - ns.k), x.shape);
}
// A parameter gradient: shaped and typed like the first present prototype.
std::optional<Output> param_grad(const char* fn, const char* arg, bool wanted, const Opt& proto, const Opt& alt) {
  const Opt& p = proto.present() ? proto : alt;
  if (!wanted || !p.present()) return std::nullopt;
  return output_like(fn, arg, nb::none(), *p.a);
}
nb::object obj_or_none(const std::optional<Output>& o) { return o ? o->obj : nb::none(); }
// The vector view of an optional output; `shape`, if given, is the shape it
// must have.
Vector out_vector(const char* fn, const char* arg, const std::optional<Output>& o, const NormShape* shape) {
  return o ? to_vector<Vector>(fn, arg, o->a, shape) : Vector{};
}

// ---------------------------------------------------------------------------
// The bound functions. Argument names are the Python API's. Each returns its
// outputs, allocated here unless the caller passed them.

nb::object layer_norm(nb::handle input, nb::handle normalized_shape, nb::handle weight, nb::handle bias,
                      nb::handle eps, nb::handle out, bool return_stats) {
  const char* fn = "layer_norm";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array x = get_array(fn, "input", input, false);
  const Opt w = get_optional(fn, "weight", weight, false), b = get_optional(fn, "bias", bias, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns), bv = opt_vector<ConstVector>(fn, "bias", b, &ns);
  const double e = get_eps(fn, eps);
  const Output y = output_like(fn, "out", out, x);
  const auto ym = to_matrix<Matrix>(fn, "out", y.a, ns, &x, "input");
  std::optional<Output> m, r;
  if (return_stats) m = stats_output(fn, "mean", x, ns), r = stats_output(fn, "rstd", x, ns);
  const auto mv = out_vector(fn, "mean", m, nullptr), rv = out_vector(fn, "rstd", r, nullptr);
  {
    const CallScope scope(fn, x);
    normkit::layer_norm(xm, wv, bv, e, ym, mv, rv);
  }
  if (!return_stats) return y.obj;
  return nb::make_tuple(y.obj, m->obj, r->obj);
}

nb::object rms_norm(nb::handle input, nb::handle normalized_shape, nb::handle weight, nb::handle eps,
                    double weight_offset, nb::handle out, bool return_stats) {
  const char* fn = "rms_norm";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array x = get_array(fn, "input", input, false);
  const Opt w = get_optional(fn, "weight", weight, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const double e = get_eps(fn, eps);
  const Output y = output_like(fn, "out", out, x);
  const auto ym = to_matrix<Matrix>(fn, "out", y.a, ns, &x, "input");
  std::optional<Output> r;
  if (return_stats) r = stats_output(fn, "rstd", x, ns);
  const auto rv = out_vector(fn, "rstd", r, nullptr);
  {
    const CallScope scope(fn, x);
    normkit::rms_norm(xm, wv, e, ym, rv, weight_offset);
  }
  if (!return_stats) return y.obj;
  return nb::make_tuple(y.obj, r->obj);
}

nb::object add_layer_norm(nb::handle input, nb::handle residual, nb::handle normalized_shape, nb::handle weight,
                          nb::handle bias, nb::handle eps, nb::handle out, nb::handle residual_out,
                          bool return_stats) {
  const char* fn = "add_layer_norm";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array x = get_array(fn, "input", input, false), res = get_array(fn, "residual", residual, false);
  const Opt w = get_optional(fn, "weight", weight, false), b = get_optional(fn, "bias", bias, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto resm = to_matrix<ConstMatrix>(fn, "residual", res, ns, &x, "input");
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns), bv = opt_vector<ConstVector>(fn, "bias", b, &ns);
  const double e = get_eps(fn, eps);
  const Output y = output_like(fn, "out", out, x), h = output_like(fn, "residual_out", residual_out, res);
  const auto ym = to_matrix<Matrix>(fn, "out", y.a, ns, &x, "input");
  const auto hm = to_matrix<Matrix>(fn, "residual_out", h.a, ns, &x, "input");
  std::optional<Output> m, r;
  if (return_stats) m = stats_output(fn, "mean", x, ns), r = stats_output(fn, "rstd", x, ns);
  const auto mv = out_vector(fn, "mean", m, nullptr), rv = out_vector(fn, "rstd", r, nullptr);
  {
    const CallScope scope(fn, x);
    normkit::add_layer_norm(xm, resm, wv, bv, e, hm, ym, mv, rv);
  }
  if (!return_stats) return nb::make_tuple(y.obj, h.obj);
  return nb::make_tuple(y.obj, h.obj, m->obj, r->obj);
}

nb::object add_rms_norm(nb::handle input, nb::handle residual, nb::handle normalized_shape, nb::handle weight,
                        nb::handle eps, double weight_offset, nb::handle out, nb::handle residual_out,
                        bool return_stats) {
  const char* fn = "add_rms_norm";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array x = get_array(fn, "input", input, false), res = get_array(fn, "residual", residual, false);
  const Opt w = get_optional(fn, "weight", weight, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto resm = to_matrix<ConstMatrix>(fn, "residual", res, ns, &x, "input");
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const double e = get_eps(fn, eps);
  const Output y = output_like(fn, "out", out, x), h = output_like(fn, "residual_out", residual_out, res);
  const auto ym = to_matrix<Matrix>(fn, "out", y.a, ns, &x, "input");
  const auto hm = to_matrix<Matrix>(fn, "residual_out", h.a, ns, &x, "input");
  std::optional<Output> r;
  if (return_stats) r = stats_output(fn, "rstd", x, ns);
  const auto rv = out_vector(fn, "rstd", r, nullptr);
  {
    const CallScope scope(fn, x);
    normkit::add_rms_norm(xm, resm, wv, e, hm, ym, rv, weight_offset);
  }
  if (!return_stats) return nb::make_tuple(y.obj, h.obj);
  return nb::make_tuple(y.obj, h.obj, r->obj);
}

// Backward functions return (grad_input, grad_weight, grad_bias) or
// (grad_input, grad_weight); a parameter gradient is None unless wanted and
// it has a prototype: grad_weight is shaped like `weight`, grad_bias like
// `bias` (or `weight` when no bias is given).

nb::object layer_norm_backward(nb::handle grad_output, nb::handle input, nb::handle normalized_shape,
                               nb::handle mean, nb::handle rstd, nb::handle weight, nb::handle bias,
                               nb::handle out, bool want_weight, bool want_bias) {
  const char* fn = "layer_norm_backward";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array dy = get_array(fn, "grad_output", grad_output, false), x = get_array(fn, "input", input, false);
  const Array m = get_array(fn, "mean", mean, false), r = get_array(fn, "rstd", rstd, false);
  const Opt w = get_optional(fn, "weight", weight, false), b = get_optional(fn, "bias", bias, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto dym = to_matrix<ConstMatrix>(fn, "grad_output", dy, ns, &x, "input");
  const auto mv = to_vector<ConstVector>(fn, "mean", m, nullptr), rv = to_vector<ConstVector>(fn, "rstd", r, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const Output dx = output_like(fn, "out", out, x);
  const auto dxm = to_matrix<Matrix>(fn, "out", dx.a, ns, &x, "input");
  const auto dw = param_grad(fn, "grad_weight", want_weight, w, w);
  const auto db = param_grad(fn, "grad_bias", want_bias, b, w);
  const auto dwv = out_vector(fn, "grad_weight", dw, &ns), dbv = out_vector(fn, "grad_bias", db, &ns);
  {
    const CallScope scope(fn, dy);
    normkit::layer_norm_backward(dym, xm, mv, rv, wv, dxm, dwv, dbv);
  }
  return nb::make_tuple(dx.obj, obj_or_none(dw), obj_or_none(db));
}

nb::object rms_norm_backward(nb::handle grad_output, nb::handle input, nb::handle normalized_shape,
                             nb::handle rstd, nb::handle weight, double weight_offset, nb::handle out,
                             bool want_weight) {
  const char* fn = "rms_norm_backward";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array dy = get_array(fn, "grad_output", grad_output, false), x = get_array(fn, "input", input, false);
  const Array r = get_array(fn, "rstd", rstd, false);
  const Opt w = get_optional(fn, "weight", weight, false);
  const auto xm = to_matrix<ConstMatrix>(fn, "input", x, ns, nullptr, nullptr);
  const auto dym = to_matrix<ConstMatrix>(fn, "grad_output", dy, ns, &x, "input");
  const auto rv = to_vector<ConstVector>(fn, "rstd", r, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const Output dx = output_like(fn, "out", out, x);
  const auto dxm = to_matrix<Matrix>(fn, "out", dx.a, ns, &x, "input");
  const auto dw = param_grad(fn, "grad_weight", want_weight, w, w);
  const auto dwv = out_vector(fn, "grad_weight", dw, &ns);
  {
    const CallScope scope(fn, dy);
    normkit::rms_norm_backward(dym, xm, rv, wv, dxm, dwv, weight_offset);
  }
  return nb::make_tuple(dx.obj, obj_or_none(dw));
}

nb::object add_layer_norm_backward(nb::handle grad_output, nb::handle grad_residual_out, nb::handle residual_out,
                                   nb::handle normalized_shape, nb::handle mean, nb::handle rstd,
                                   nb::handle weight, nb::handle bias, nb::handle out, bool want_weight,
                                   bool want_bias) {
  const char* fn = "add_layer_norm_backward";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array dy = get_array(fn, "grad_output", grad_output, false);
  const Opt dh_out = get_optional(fn, "grad_residual_out", grad_residual_out, false);
  const Array h = get_array(fn, "residual_out", residual_out, false);
  const Array m = get_array(fn, "mean", mean, false), r = get_array(fn, "rstd", rstd, false);
  const Opt w = get_optional(fn, "weight", weight, false), b = get_optional(fn, "bias", bias, false);
  const auto hm = to_matrix<ConstMatrix>(fn, "residual_out", h, ns, nullptr, nullptr);
  const auto dym = to_matrix<ConstMatrix>(fn, "grad_output", dy, ns, &h, "residual_out");
  const auto dhom = dh_out.present()
                        ? to_matrix<ConstMatrix>(fn, "grad_residual_out", *dh_out.a, ns, &h, "residual_out")
                        : ConstMatrix{};
  const auto mv = to_vector<ConstVector>(fn, "mean", m, nullptr), rv = to_vector<ConstVector>(fn, "rstd", r, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const Output dh = output_like(fn, "out", out, h);
  const auto dhm = to_matrix<Matrix>(fn, "out", dh.a, ns, &h, "residual_out");
  const auto dw = param_grad(fn, "grad_weight", want_weight, w, w);
  const auto db = param_grad(fn, "grad_bias", want_bias, b, w);
  const auto dwv = out_vector(fn, "grad_weight", dw, &ns), dbv = out_vector(fn, "grad_bias", db, &ns);
  {
    const CallScope scope(fn, dy);
    normkit::add_layer_norm_backward(dym, dhom, hm, mv, rv, wv, dhm, dwv, dbv);
  }
  return nb::make_tuple(dh.obj, obj_or_none(dw), obj_or_none(db));
}

nb::object add_rms_norm_backward(nb::handle grad_output, nb::handle grad_residual_out, nb::handle residual_out,
                                 nb::handle normalized_shape, nb::handle rstd, nb::handle weight,
                                 double weight_offset, nb::handle out, bool want_weight) {
  const char* fn = "add_rms_norm_backward";
  const NormShape ns = get_normalized_shape(fn, normalized_shape);
  const Array dy = get_array(fn, "grad_output", grad_output, false);
  const Opt dh_out = get_optional(fn, "grad_residual_out", grad_residual_out, false);
  const Array h = get_array(fn, "residual_out", residual_out, false);
  const Array r = get_array(fn, "rstd", rstd, false);
  const Opt w = get_optional(fn, "weight", weight, false);
  const auto hm = to_matrix<ConstMatrix>(fn, "residual_out", h, ns, nullptr, nullptr);
  const auto dym = to_matrix<ConstMatrix>(fn, "grad_output", dy, ns, &h, "residual_out");
  const auto dhom = dh_out.present()
                        ? to_matrix<ConstMatrix>(fn, "grad_residual_out", *dh_out.a, ns, &h, "residual_out")
                        : ConstMatrix{};
  const auto rv = to_vector<ConstVector>(fn, "rstd", r, nullptr);
  const auto wv = opt_vector<ConstVector>(fn, "weight", w, &ns);
  const Output dh = output_like(fn, "out", out, h);
  const auto dhm = to_matrix<Matrix>(fn, "out", dh.a, ns, &h, "residual_out");
  const auto dw = param_grad(fn, "grad_weight", want_weight, w, w);
  const auto dwv = out_vector(fn, "grad_weight", dw, &ns);
  {
    const CallScope scope(fn, dy);
    normkit::add_rms_norm_backward(dym, dhom, hm, rv, wv, dhm, dwv, weight_offset);
  }
  return nb::make_tuple(dh.obj, obj_or_none(dw));
}

}  // namespace

NB_MODULE(_normkit, m) {
  m.doc() = "Low-level binding of the normkit C++ library: arguments are positional and outputs "
            "passed as None are allocated here; use the functions of the `normkit` package instead.";

  // The library's errors keep their message: a dtype problem is a TypeError,
  // any other invalid argument a ValueError.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const normkit::DTypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const normkit::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("version", &normkit::version, "The version of the linked normkit library.");
  m.def("set_num_threads", &normkit::set_num_threads, "n"_a);
  m.def("num_threads", &normkit::num_threads);
  m.def("has_cuda_backend", &normkit::has_cuda_backend);
  m.def("cuda_device_count", &normkit::cuda_device_count);
  m.def("set_output_cache_limit", [](std::size_t n) { normkit_py::OutputCache::get().set_limit(n); }, "nbytes"_a);
  m.def("empty_output_cache", [] { normkit_py::OutputCache::get().empty(); });
  m.def("output_cache_info", [] {
    const auto i = normkit_py::OutputCache::get().info();
    nb::dict d;
    d["limit_bytes"] = i.limit_bytes;
    d["cached_bytes"] = i.cached_bytes;
    d["cached_blocks"] = i.cached_blocks;
    d["live_bytes"] = i.live_bytes;
    d["live_blocks"] = i.live_blocks;
    d["hits"] = i.hits;
    d["misses"] = i.misses;
    return d;
  });

  // Positional-only in practice: the Python package calls these with every
  // argument in order (keyword parsing would cost more than some kernels).
  m.def("layer_norm", &layer_norm, "input"_a, "normalized_shape"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a,
        "out"_a.none(), "return_stats"_a);
  m.def("rms_norm", &rms_norm, "input"_a, "normalized_shape"_a, "weight"_a.none(), "eps"_a, "weight_offset"_a,
        "out"_a.none(), "return_stats"_a);
  m.def("add_layer_norm", &add_layer_norm, "input"_a, "residual"_a, "normalized_shape"_a, "weight"_a.none(),
        "bias"_a.none(), "eps"_a, "out"_a.none(), "residual_out"_a.none(), "return_stats"_a);
  m.def("add_rms_norm", &add_rms_norm, "input"_a, "residual"_a, "normalized_shape"_a, "weight"_a.none(), "eps"_a,
        "weight_offset"_a, "out"_a.none(), "residual_out"_a.none(), "return_stats"_a);
  m.def("layer_norm_backward", &layer_norm_backward, "grad_output"_a, "input"_a, "normalized_shape"_a, "mean"_a,
        "rstd"_a, "weight"_a.none(), "bias"_a.none(), "out"_a.none(), "want_weight"_a, "want_bias"_a);
  m.def("rms_norm_backward", &rms_norm_backward, "grad_output"_a, "input"_a, "normalized_shape"_a, "rstd"_a,
        "weight"_a.none(), "weight_offset"_a, "out"_a.none(), "want_weight"_a);
  m.def("add_layer_norm_backward", &add_layer_norm_backward, "grad_output"_a, "grad_residual_out"_a.none(),
        "residual_out"_a, "normalized_shape"_a, "mean"_a, "rstd"_a, "weight"_a.none(), "bias"_a.none(),
        "out"_a.none(), "want_weight"_a, "want_bias"_a);
  m.def("add_rms_norm_backward", &add_rms_norm_backward, "grad_output"_a, "grad_residual_out"_a.none(),
        "residual_out"_a, "normalized_shape"_a, "rstd"_a, "weight"_a.none(), "weight_offset"_a, "out"_a.none(),
        "want_weight"_a);
}
