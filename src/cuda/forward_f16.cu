// The forward kernels for f16 activations, in a translation unit of their own
// so that nvcc compiles the dtypes in parallel.
#include "cuda/forward.cuh"
#include "cuda/launch.hpp"

namespace normkit::detail::cuda {

int forward_f16(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  return launch_forward_16bit<__half>(a, plan, stream, scratch);
}

}  // namespace normkit::detail::cuda
