// The per-dtype launchers of the CUDA kernels (forward_*.cu, backward_*.cu),
// callable from host code compiled without CUDA headers. Each picks the
// kernel instantiation for the call's storage-type combination, queues it on
// `stream` (a cudaStream_t) with `plan` (launch_plan.hpp) and `scratch`
// (plan.scratch_bytes() of device memory, or null when that is 0), and
// returns the launch's cudaError_t (0: queued).
#pragma once

#include "cpu/kernels.hpp"
#include "cuda/launch_plan.hpp"

namespace normkit::detail::cuda {

int forward_f32(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch);  // and f64
int forward_f16(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch);
int forward_bf16(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch);
int backward_f32(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch);  // and f64
int backward_f16(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch);
int backward_bf16(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch);

}  // namespace normkit::detail::cuda
