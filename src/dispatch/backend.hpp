// The backends behind the public entry points: one table of functions per
// kind of device. The dispatch layer validates a call, finds the device all
// its arguments are on, and hands the kernel arguments to that device's
// backend, which owns everything device-specific: its kernels, its scratch
// memory, and its special cases (the zeroing of dweight/dbias for rows == 0).
#pragma once

#include <cstdint>
#include <string>

#include "cpu/kernels.hpp"
#include "normkit/tensor.hpp"

namespace normkit::detail {

// Where a validated call runs. `fn` is the public function's name, for the
// messages of errors that only the device can report (a failed launch).
struct Place {
  const char* fn = "";
  std::int32_t device_index = 0;
  void* stream = nullptr;  // a cudaStream_t; nullptr is the default stream
};

struct Backend {
  // rows >= 1 (a forward over no rows is a no-op for every device).
  void (*forward)(const ForwardArgs& a, const Place& p);
  // rows >= 0; with rows == 0 nothing is read and dweight/dbias, if wanted,
  // are set to 0 (a sum over no rows).
  void (*backward)(const BackwardArgs& a, const Place& p);
  // Empty when the kernels of device `index` can access `p`, else what is
  // wrong, for the message ("is host memory"). Null: no check (the CPU).
  std::string (*memory_problem)(const void* p, std::int32_t index);
};

// The CPU backend: always there.
const Backend& cpu_backend() noexcept;

// The backend for CUDA device `index`, or null with `why` set when this
// build has no CUDA backend or this machine no such device.
const Backend* cuda_backend(std::int32_t index, std::string& why);

}  // namespace normkit::detail
