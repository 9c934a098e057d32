// Where a normkit call runs: on the array's device, queued on the
// framework's current stream for that device (the exchange API's
// current_work_stream; the default stream for arrays that came without
// one), with the GIL released for the call. The stream is asked for while
// the GIL is still held.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "array_import.hpp"
#include "normkit/normkit.hpp"

namespace normkit_py {

class CallScope {
 public:
  CallScope(const char* fn, const Array& ref) : guard_(device_index(ref), work_stream(fn, ref)) {}

 private:
  static normkit::StreamHandle work_stream(const char* fn, const Array& a) {
    if (a.device != normkit::Device::cuda || !a.api || !a.api->current_work_stream) return nullptr;
    void* stream = nullptr;
    if (a.api->current_work_stream(a.dl_device_type, a.dl_device_id, &stream) != 0) {
      if (PyErr_Occurred()) throw nanobind::python_error();
      throw std::runtime_error(std::string(fn) + ": the framework could not say which CUDA stream to use");
    }
    return stream;
  }
  normkit::StreamGuard guard_;
  nanobind::gil_scoped_release release_;
};

}  // namespace normkit_py
