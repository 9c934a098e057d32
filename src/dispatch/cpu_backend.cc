// The CPU backend's table: the Highway kernels of src/cpu, and the one
// special case they leave to their caller.
#include <cstring>

#include "dispatch/backend.hpp"

namespace normkit::detail {

namespace {

void forward(const ForwardArgs& a, const Place&) { cpu_forward(a); }

void zero(void* p, DType t, std::int64_t n) {
  if (p) std::memset(p, 0, static_cast<std::size_t>(n) * dtype_size(t));
}

void backward(const BackwardArgs& a, const Place&) {
  if (a.rows == 0) {
    // A sum over no rows is zero: the parameter gradients are still written.
    zero(a.dweight, a.w_dtype, a.D);
    zero(a.dbias, a.w_dtype, a.D);
    return;
  }
  cpu_backward(a);
}

constexpr Backend kCpu{forward, backward, nullptr};

}  // namespace

const Backend& cpu_backend() noexcept { return kCpu; }

}  // namespace normkit::detail
