// Forward instantiations for f16 activations: the residual stream (residual,
// h) and the parameters each in f16 or f32.
#include "cuda/forward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int forward_f16(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  using T = __half;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool r32 = a.residual && a.res_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (r32 && w32) return launch_forward<T, float, float>(a, plan, s, scratch);
  if (r32) return launch_forward<T, float, T>(a, plan, s, scratch);
  if (w32) return launch_forward<T, T, float>(a, plan, s, scratch);
  return launch_forward<T, T, T>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
