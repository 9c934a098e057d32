// The DLPack C exchange API (dlpack.h >= 1.3), through which the binding
// views a framework's arrays and creates arrays in it without Python calls.
//
// A type that offers it (PyTorch >= 2.10) publishes a capsule
// `__dlpack_c_exchange_api__` holding a DLPackExchangeAPI table. Its
// dltensor_from_py_object_no_sync fills a DLTensor in ~20 ns, where
// `tensor.__dlpack__()` is a Python method that costs ~2 µs per tensor — more
// than the whole kernel for one row of 4096.
//
// The structs are declared here by layout, as the DLPack standard fixes it,
// so that building needs no framework headers; the DLTensor itself is
// nanobind's (the same layout).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

namespace normkit_py {

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
  nanobind::dlpack::dltensor dl_tensor;
};
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  int (*managed_tensor_allocator)(nanobind::dlpack::dltensor* prototype, DLManagedTensorVersioned** out,
                                  void* error_ctx, void (*set_error)(void*, const char*, const char*));
  void* managed_tensor_from_py_object_no_sync;
  int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, nanobind::dlpack::dltensor* out);  // may be null
  // The stream the framework's work on (device_type, device_id) is queued on.
  int (*current_work_stream)(std::int32_t device_type, std::int32_t device_id, void** out_current_stream);
};

// The exchange API of a Python type if it offers a usable one (version 1.x
// with x >= 3, and the three entries the binding calls), else null. Looked
// up once per type: the attribute lives on the type and the table stays
// valid for the life of the process. Call with the GIL held.
const DLPackExchangeAPI* exchange_api(PyTypeObject* tp);

}  // namespace normkit_py
