// cpu_forward: LayerNorm / RMSNorm forward on the CPU, plain and fused with
// the residual add. It fills in absent parameters, decides the threads and
// the stores, and runs each thread's rows through the kernels of the norm
// kind (forward_rows.hpp; the kernels themselves are in forward-inl.hpp).

#include <cassert>
#include <cstdint>
#include <optional>

#include "cpu/forward_rows.hpp"
#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "cpu/pages.hpp"
#include "cpu/parallel.hpp"
#include "cpu/scratch.hpp"
#include "normkit/ops.hpp"

namespace normkit::detail {

namespace {
std::int64_t forward_bytes_per_row(const ForwardArgs& a) {
  std::int64_t bytes = 2 * static_cast<std::int64_t>(dtype_size(a.x_dtype));  // x, y
  if (a.residual) bytes += 2 * static_cast<std::int64_t>(dtype_size(a.res_dtype));  // residual, h
  return bytes * a.D;
}
}  // namespace

int forward_threads(const ForwardArgs& a) { return threads_for(a.rows, forward_bytes_per_row(a)); }

bool forward_streams(const ForwardArgs& a) {
  return a.y != a.x && streams_output(a.y, a.rows, a.D, a.y_stride, dtype_size(a.x_dtype));
}

bool fused_h_streams(const ForwardArgs& a) {
  // Forming a bf16 h again means rounding it again: one instruction with
  // the AVX-512 BF16 extension, 7 integer operations per vector without.
  // Without it the 16-bit forward is bound by the core, and reading h back
  // from cache costs less (docs/kernels.md, "Streaming a 16-bit h").
  if (a.res_dtype == DType::bf16 && !g_bf16_instructions) return false;
  return a.residual && a.h != a.x && a.h != a.residual &&
         streams_output(a.h, a.rows, a.D, a.h_stride, dtype_size(a.res_dtype));
}

void cpu_forward(const ForwardArgs& args) {
  assert(args.rows >= 1 && args.D >= 1 && args.x && args.y);
  assert((args.residual == nullptr) == (args.h == nullptr));
  // Absent parameters are read as constant rows (gain 1, bias 0), in a copy
  // of the arguments made only then: a copy costs a short call more than the
  // test.
  std::optional<ForwardArgs> filled;
  if (!args.weight || (args.kind == NormKind::layer_norm && !args.bias)) {
    ForwardArgs& f = filled.emplace(args);
    if (!f.weight && !f.bias) f.w_dtype = f.x_dtype;  // any valid dtype: none is read
    if (!f.weight) f.weight = constant_row(f.w_dtype, f.D, 1);
    if (f.kind == NormKind::layer_norm && !f.bias) f.bias = constant_row(f.w_dtype, f.D, 0);
  }
  const ForwardArgs& a = filled ? *filled : args;
  const ForwardStreams stream{forward_streams(a), fused_h_streams(a)};
  parallel_rows(a.rows, forward_bytes_per_row(a), [&](std::int64_t begin, std::int64_t end) {
    if (a.kind == NormKind::layer_norm)
      forward_rows<NormKind::layer_norm>(a, begin, end, stream);
    else
      forward_rows<NormKind::rms_norm>(a, begin, end, stream);
  });
}

}  // namespace normkit::detail
