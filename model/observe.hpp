// normkit model — the records the model reports for its own ops, so that an
// op observer (normkit/observer.hpp) sees a whole step: the library reports
// the norms, the model everything else. Op names and shapes are those that
// tools/normkit/measure/op_cost.hpp counts FLOPs and bytes of; the label says
// where in the model the op is ("attn.qkv", "mlp.fc2.dw", "loss"), the same
// for every block.
#pragma once

#include <cstdint>

#include "normkit/observer.hpp"

namespace normkit::model {

template <class T>
OpRecord op_record(const char* op, const char* label, std::int64_t a, std::int64_t b = 0, std::int64_t c = 0,
                   std::int64_t d = 0) {
  OpRecord r;
  r.op = op;
  r.label = label;
  r.shape[0] = a;
  r.shape[1] = b;
  r.shape[2] = c;
  r.shape[3] = d;
  r.dtype = r.param_dtype = r.stream_dtype = dtype_of<T>();
  return r;
}

}  // namespace normkit::model
