// Forward instantiations for f32 and f64 activations (parameters and the
// residual stream in the same dtype).
#include "cuda/forward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int forward_f32(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.x_dtype == DType::f64) return launch_forward<double, double, double>(a, plan, s, scratch);
  return launch_forward<float, float, float>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
