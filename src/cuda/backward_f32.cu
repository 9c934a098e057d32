// Backward instantiations for f32 and f64 activations (parameters and the
// residual stream in the same dtype).
#include "cuda/backward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int backward_f32(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.dy_dtype == DType::f64) return launch_backward<double, double, double>(a, plan, s, scratch);
  return launch_backward<float, float, float>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
