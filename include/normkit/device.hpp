// normkit — which CUDA stream a call runs on, and whether CUDA is there.
//
// A call whose arguments are on CUDA device i (normkit/tensor.hpp) runs there
// asynchronously: it is queued on a stream and returns before the kernels
// finish, like any CUDA library call. The stream is the one a StreamGuard of
// the calling thread set for device i, or the device's default stream.
//
// The stream crosses this header as an opaque handle: the value of a
// cudaStream_t (a pointer), so that no CUDA header is needed to include it.
//   cudaStream_t s; cudaStreamCreate(&s);
//   { normkit::StreamGuard on(0, s); normkit::rms_norm(...); }  // queued on s
#pragma once

#include <cstdint>

namespace normkit {

// A cudaStream_t as an opaque value; nullptr is the default stream.
using StreamHandle = void*;

// The stream the calling thread's calls on CUDA device `device_index` are
// queued on: the innermost live StreamGuard's if it is for that device,
// else nullptr (the default stream).
StreamHandle current_stream(std::int32_t device_index) noexcept;

// Sets the calling thread's stream for CUDA device `device_index` for the
// guard's lifetime and restores the previous setting after. Guards nest; a
// guard covers one device (a call on another device uses that device's
// default stream). Thread-local: other threads are unaffected.
class StreamGuard {
 public:
  StreamGuard(std::int32_t device_index, StreamHandle stream) noexcept;
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  std::int32_t previous_index_;
  StreamHandle previous_stream_;
  bool previous_set_;
};

// Whether this build of the library has the CUDA backend.
bool has_cuda_backend() noexcept;

// The number of CUDA devices the backend can use: 0 without the backend, a
// driver or a GPU.
int cuda_device_count() noexcept;

}  // namespace normkit
