// The forward kernels for bf16 activations, in a translation unit of their own
// so that nvcc compiles the dtypes in parallel.
#include "cuda/forward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int forward_bf16(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  return launch_forward_16bit<__nv_bfloat16>(a, plan, stream, scratch);
}

}  // namespace normkit::detail::cuda
