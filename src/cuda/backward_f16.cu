// Backward instantiations for f16 activations: xin, dh_out and dx (the
// residual stream of the fused op) and the parameters each in f16 or f32.
#include "cuda/backward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int backward_f16(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  using T = __half;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool i32 = a.xin_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (i32 && w32) return launch_backward<T, float, float>(a, plan, s, scratch);
  if (i32) return launch_backward<T, float, T>(a, plan, s, scratch);
  if (w32) return launch_backward<T, T, float>(a, plan, s, scratch);
  return launch_backward<T, T, T>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
