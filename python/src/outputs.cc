#include "outputs.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "dlpack_exchange.hpp"
#include "output_cache.hpp"

namespace nb = nanobind;

namespace normkit_py {
namespace {

using normkit::DType;

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
  OutputCache::get().release(c->managed.dl_tensor.data, c->mapped);
  delete c;
}

// A new array of `dtype` and shape[0..ndim) in a cached block, in the
// framework of `like` (a CPU array); null (no Python error set) when the
// system has no memory for the block.
nb::object allocate_cached(const Array& like, DType dtype, int ndim, const std::int64_t* shape,
                           std::size_t bytes) {
  auto owned = std::make_unique<CachedArray>();
  void* p = OutputCache::get().acquire(bytes, &owned->mapped);
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
  if (like.dl_device_type == nb::device::cpu::value && OutputCache::get().serves(bytes)) {
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

}  // namespace

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

Output stats_output(const char* fn, const char* arg, const Array& x, const NormShape& ns) {
  return output(fn, arg, nb::none(), x, x.dtype == DType::f64 ? DType::f64 : DType::f32,
                std::max(0, x.ndim - ns.k), x.shape);
}

std::optional<Output> param_grad(const char* fn, const char* arg, bool wanted, const Opt& proto, const Opt& alt) {
  const Opt& p = proto.present() ? proto : alt;
  if (!wanted || !p.present()) return std::nullopt;
  return output_like(fn, arg, nb::none(), *p.a);
}

}  // namespace normkit_py
