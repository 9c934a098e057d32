// The CUDA backend: device checks, the launch plan, scratch memory and the
// launch of a validated call on the caller's device and stream. Host code
// against the CUDA runtime API; the kernels are in the .cu files.
//
// Scratch (the split mapping's per-segment statistics, the backward's
// partial sums) is stream-ordered memory from the device's default pool
// (cudaMallocAsync / cudaFreeAsync on the call's stream): nothing is held
// between calls, concurrent calls on different streams never share it, and
// the pool makes the allocation cheap after the first call.
#include "cuda/backend.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "cuda/launch.hpp"
#include "cuda/launch_plan.hpp"
#include "normkit/error.hpp"

namespace normkit::detail::cuda {

namespace {

struct Runtime {
  int count = 0;
  std::string error;  // why count is 0
};

const Runtime& runtime() {
  static const Runtime r = [] {
    Runtime out;
    const cudaError_t e = cudaGetDeviceCount(&out.count);
    if (e != cudaSuccess) {
      out.count = 0;
      out.error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
      cudaGetLastError();  // not sticky: clear it for the caller's own CUDA code
    }
    return out;
  }();
  return r;
}

[[noreturn]] void cuda_fail(const char* fn, const char* what, cudaError_t e) {
  throw Error(std::string(fn) + ": CUDA " + what + " failed: " + cudaGetErrorName(e) + ": " +
              cudaGetErrorString(e));
}

void check(const char* fn, const char* what, cudaError_t e) {
  if (e != cudaSuccess) cuda_fail(fn, what, e);
}

// Per-device facts the plan needs, read once.
struct DeviceInfo {
  std::atomic<int> sm_count{0};
  std::atomic<int> pools{-1};  // supports cudaMallocAsync: 1, 0, or -1 unknown
};
constexpr int kMaxDevices = 64;
std::array<DeviceInfo, kMaxDevices> g_devices;

int sm_count(const char* fn, int index) {
  DeviceInfo& d = g_devices[static_cast<std::size_t>(index)];
  int n = d.sm_count.load(std::memory_order_relaxed);
  if (n == 0) {
    check(fn, "device query", cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, index));
    d.sm_count.store(n, std::memory_order_relaxed);
  }
  return n;
}

bool has_pools(const char* fn, int index) {
  DeviceInfo& d = g_devices[static_cast<std::size_t>(index)];
  int v = d.pools.load(std::memory_order_relaxed);
  if (v < 0) {
    check(fn, "device query", cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, index));
    d.pools.store(v != 0 ? 1 : 0, std::memory_order_relaxed);
  }
  return v != 0;
}

// Makes `index` the calling thread's current device for the scope.
class DeviceScope {
 public:
  DeviceScope(const char* fn, int index) {
    check(fn, "cudaGetDevice", cudaGetDevice(&previous_));
    if (previous_ != index) check(fn, "cudaSetDevice", cudaSetDevice(index));
    index_ = index;
  }
  ~DeviceScope() {
    if (previous_ != index_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0, index_ = 0;
};

// Scratch memory for one call, ordered on its stream. Without memory pools
// (old drivers) it falls back to cudaMalloc, and the free waits for the
// stream first.
class Scratch {
 public:
  Scratch(const char* fn, int index, cudaStream_t stream, std::size_t bytes) : fn_(fn), stream_(stream) {
    if (bytes == 0) return;
    pooled_ = has_pools(fn, index);
    const cudaError_t e = pooled_ ? cudaMallocAsync(&p_, bytes, stream) : cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error(std::string(fn) + ": cannot allocate " + std::to_string(bytes) +
                  " bytes of CUDA scratch memory: " + cudaGetErrorString(e));
    }
  }
  ~Scratch() {
    if (!p_) return;
    if (pooled_) {
      cudaFreeAsync(p_, stream_);
    } else {
      cudaStreamSynchronize(stream_);
      cudaFree(p_);
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return p_; }

 private:
  const char* fn_;
  cudaStream_t stream_;
  void* p_ = nullptr;
  bool pooled_ = false;
};

PlanInput plan_input(bool backward, std::int64_t rows, std::int64_t D, DType x, int grads, int sms) {
  PlanInput in;
  in.backward = backward;
  in.rows = rows;
  in.D = D;
  in.x_size = dtype_size(x);
  in.compute_size = x == DType::f64 ? 8 : 4;
  in.param_grads = grads;
  in.sm_count = sms;
  return in;
}

void forward(const ForwardArgs& a, const Place& p) {
  const DeviceScope on(p.fn, p.device_index);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  const Plan plan = plan_launch(p.fn, plan_input(false, a.rows, a.D, a.x_dtype, 0, sm_count(p.fn, p.device_index)));
  const Scratch scratch(p.fn, p.device_index, stream, plan.scratch_bytes());
  int e = 0;
  switch (a.x_dtype) {
    case DType::f32:
    case DType::f64: e = forward_f32(a, plan, stream, scratch.get()); break;
    case DType::f16: e = forward_f16(a, plan, stream, scratch.get()); break;
    case DType::bf16: e = forward_bf16(a, plan, stream, scratch.get()); break;
  }
  check(p.fn, "kernel launch", static_cast<cudaError_t>(e));
}

void backward(const BackwardArgs& a, const Place& p) {
  const DeviceScope on(p.fn, p.device_index);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  if (a.rows == 0) {
    // A sum over no rows is zero: the parameter gradients are still written.
    const std::size_t bytes = static_cast<std::size_t>(a.D) * dtype_size(a.w_dtype);
    if (a.dweight) check(p.fn, "cudaMemsetAsync", cudaMemsetAsync(a.dweight, 0, bytes, stream));
    if (a.dbias) check(p.fn, "cudaMemsetAsync", cudaMemsetAsync(a.dbias, 0, bytes, stream));
    return;
  }
  const int grads = (a.dweight ? 1 : 0) + (a.dbias ? 1 : 0);
  const Plan plan =
      plan_launch(p.fn, plan_input(true, a.rows, a.D, a.dy_dtype, grads, sm_count(p.fn, p.device_index)));
  const Scratch scratch(p.fn, p.device_index, stream, plan.scratch_bytes());
  int e = 0;
  switch (a.dy_dtype) {
    case DType::f32:
    case DType::f64: e = backward_f32(a, plan, stream, scratch.get()); break;
    case DType::f16: e = backward_f16(a, plan, stream, scratch.get()); break;
    case DType::bf16: e = backward_bf16(a, plan, stream, scratch.get()); break;
  }
  check(p.fn, "kernel launch", static_cast<cudaError_t>(e));
}

std::string memory_problem(const void* ptr, std::int32_t index) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("cannot be checked (") + cudaGetErrorName(e) + ")";
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      if (attr.device == index) return {};
      return "points to memory of cuda:" + std::to_string(attr.device);
    case cudaMemoryTypeManaged: return {};
    case cudaMemoryTypeHost:  // pinned host memory, mapped into the device's address space
      if (attr.devicePointer == ptr) return {};
      return "points to pinned host memory that cuda:" + std::to_string(index) + " cannot address directly";
    default: return "points to ordinary host memory, which the GPU cannot access";
  }
}

constexpr Backend kCuda{forward, backward, memory_problem};

}  // namespace

int device_count() noexcept { return runtime().count; }

const Backend* backend(std::int32_t index, std::string& why) {
  const Runtime& r = runtime();
  if (r.count == 0) {
    why = "no CUDA device is available: " + r.error;
    if (r.error.empty()) why = "no CUDA device is available";
    return nullptr;
  }
  if (index >= r.count || index >= kMaxDevices) {
    why = "this machine has " + std::to_string(r.count) + " CUDA device" + (r.count == 1 ? "" : "s");
    return nullptr;
  }
  return &kCuda;
}

}  // namespace normkit::detail::cuda
