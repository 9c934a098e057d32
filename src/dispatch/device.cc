// The calling thread's CUDA stream (normkit/device.hpp) and the lookup of
// the CUDA backend, which exists only in builds with NORMKIT_CUDA.
#include "normkit/device.hpp"

#include "dispatch/backend.hpp"

#ifdef NORMKIT_HAS_CUDA
#include "cuda/backend.hpp"
#endif

namespace normkit {

namespace {
// The innermost live StreamGuard of this thread: one device and its stream.
struct StreamSetting {
  std::int32_t index = 0;
  StreamHandle stream = nullptr;
  bool set = false;
};
thread_local StreamSetting t_stream;
}  // namespace

StreamHandle current_stream(std::int32_t device_index) noexcept {
  return t_stream.set && t_stream.index == device_index ? t_stream.stream : nullptr;
}

StreamGuard::StreamGuard(std::int32_t device_index, StreamHandle stream) noexcept
    : previous_index_(t_stream.index), previous_stream_(t_stream.stream), previous_set_(t_stream.set) {
  t_stream = {device_index, stream, true};
}

StreamGuard::~StreamGuard() { t_stream = {previous_index_, previous_stream_, previous_set_}; }

bool has_cuda_backend() noexcept {
#ifdef NORMKIT_HAS_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() noexcept {
#ifdef NORMKIT_HAS_CUDA
  return detail::cuda::device_count();
#else
  return 0;
#endif
}

namespace detail {

const Backend* cuda_backend(std::int32_t index, std::string& why) {
#ifdef NORMKIT_HAS_CUDA
  return cuda::backend(index, why);
#else
  (void)index;
  why = "this build has no CUDA backend";
  return nullptr;
#endif
}

}  // namespace detail
}  // namespace normkit
