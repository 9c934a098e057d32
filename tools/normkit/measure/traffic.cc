#include "measure/traffic.hpp"

#include <stdexcept>

#include "normkit/ops.hpp"

namespace normkit::measure {

std::string_view norm_name(NormKind n) { return n == NormKind::layer_norm ? "layer" : "rms"; }

std::string_view pass_name(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::backward_dx: return "backward_dx";
    case Pass::fused: return "fused";
    case Pass::add_then_norm: return "add_then_norm";
    case Pass::fused_backward: return "fused_backward";
    case Pass::backward_then_add: return "backward_then_add";
  }
  return "?";
}

const Op& find_op(NormKind norm, Pass pass) {
  for (const Op& op : kOps)
    if (op.norm == norm && op.pass == pass) return op;
  throw std::logic_error("measure: no op in the table for this norm and pass");
}

std::int64_t array_bytes(Array a, const Shape& s) {
  if (is_activation(a)) return s.rows * s.D * static_cast<std::int64_t>(dtype_size(s.act));
  if (is_parameter(a)) return s.D * static_cast<std::int64_t>(dtype_size(s.param));
  return s.rows * static_cast<std::int64_t>(dtype_size(stat_dtype(s.act)));  // mean, rstd
}

Traffic traffic(Arrays reads, Arrays writes, const Shape& s) {
  Traffic t;
  for (int i = 0; i < kArrayCount; ++i) {
    const auto a = static_cast<Array>(i);
    if (reads.has(a)) t.read += array_bytes(a, s);
    if (writes.has(a)) t.written += array_bytes(a, s);
  }
  return t;
}

Traffic traffic(const Op& op, const Shape& s) { return traffic(op.reads, op.writes, s); }

std::int64_t working_set_bytes(const Op& op, const Shape& s) {
  std::int64_t n = 0;
  for (int i = 0; i < kArrayCount; ++i) {
    const auto a = static_cast<Array>(i);
    if (op.reads.has(a) || op.writes.has(a)) n += array_bytes(a, s);
  }
  return n;
}

}  // namespace normkit::measure
