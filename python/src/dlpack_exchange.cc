#include "dlpack_exchange.hpp"

namespace normkit_py {

const DLPackExchangeAPI* exchange_api(PyTypeObject* tp) {
  // A few array types at most reach the binding in one process; the first
  // 16 are remembered (the GIL serialises the lookups).
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
    // Walk to the newest table of major version 1, the layout declared in
    // the header.
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

}  // namespace normkit_py
