// normkit — an observer of op calls: which op ran, on what, and when.
//
// One observer may be installed per process. The dispatch layer then reports
// every successful call of a public op (normkit/ops.hpp) to it, on the
// calling thread, once the call has returned from its backend: a profiler
// builds its table from these records. Code that calls normkit can report
// its own ops (matrix products, activations) into the same stream through
// ObservedOp, so one observer sees a whole program step.
//
// With no observer installed a call pays one load and one predictable
// branch (`normkit bench --observer` measures it). A call that throws (bad
// arguments) is not reported.
//
// Times are std::chrono::steady_clock nanoseconds around the whole call,
// validation included. A CUDA call returns once its kernels are queued, so
// its record is the host time of the enqueue, not of the kernels.
#pragma once

#include <chrono>
#include <cstdint>

#include "normkit/tensor.hpp"

namespace normkit {

// The tensors a norm op was given, as bits of OpRecord::args (bit_of(arg)).
// Absent optional arguments (bias, the saved statistics, dh_out, dbias ...)
// have no bit, so the bytes a call moved can be counted from its record.
enum class OpArg : std::uint8_t { x, residual, h, y, dy, dh_out, dx, weight, bias, mean, rstd, dweight, dbias };

constexpr std::uint32_t bit_of(OpArg a) noexcept { return 1u << static_cast<unsigned>(a); }

struct OpRecord {
  // The public function ("add_rms_norm"), or the name the reporting code
  // gives its own op ("matmul"). Static strings: records are copied freely.
  const char* op = "";
  // Where in the caller's program ("attn.qkv"); "" for the library's ops.
  const char* label = "";
  // The library's norms: {rows, D, 0, 0}. Other ops: as their reporter
  // documents (model/: "matmul" is {M, N, K, accumulate}).
  std::int64_t shape[4] = {0, 0, 0, 0};
  DType dtype = DType::f32;        // x (forward) or dy (backward)
  DType param_dtype = DType::f32;  // weight, bias and their gradients; dtype when none is given
  DType stream_dtype = DType::f32; // residual, h, dh_out, dh of the fused ops; dtype otherwise
  std::uint32_t args = 0;          // norms: the tensors given, OpArg bits
  Device device = Device::cpu;
  std::int32_t device_index = 0;
  std::int64_t start_ns = 0, end_ns = 0;  // steady_clock, since its epoch
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // Called once per reported op, on the thread that ran it; calls from
  // several threads may overlap, so an observer shared by threads must
  // synchronize itself.
  virtual void on_op(const OpRecord& record) = 0;
};

// Installs `observer` (nullptr: none) for every thread, and returns the one
// it replaces. The caller keeps it alive until no call that may have seen it
// is still running (after the last op of the threads that call normkit).
OpObserver* set_op_observer(OpObserver* observer) noexcept;

// The installed observer, or nullptr.
OpObserver* op_observer() noexcept;

// steady_clock now, in the nanoseconds of OpRecord.
inline std::int64_t observer_clock_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reports the caller's own op: construct it before the op with the record's
// description, and the record goes to the observer when it goes out of
// scope. Nothing is timed when no observer is installed.
//   { normkit::ObservedOp op({.op = "gelu", .label = "mlp.act", .shape = {n}}); ... }
class ObservedOp {
 public:
  explicit ObservedOp(const OpRecord& record) noexcept : observer_(op_observer()) {
    if (observer_) {
      record_ = record;
      record_.start_ns = observer_clock_ns();
    }
  }
  ~ObservedOp() {
    if (observer_) {
      record_.end_ns = observer_clock_ns();
      observer_->on_op(record_);
    }
  }
  ObservedOp(const ObservedOp&) = delete;
  ObservedOp& operator=(const ObservedOp&) = delete;

 private:
  OpObserver* observer_;
  OpRecord record_;
};

}  // namespace normkit
