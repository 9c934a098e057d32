// normkit measure — what an observed op costs by counting: its FLOPs and
// the bytes it must move, from its record (normkit/observer.hpp) alone.
//
// The library's norms are counted with the bench's traffic model (each array
// the call was given, read or written once: traffic.hpp). The model's own ops
// (model/) are counted here, by the record's op name and shape:
//   matmul                 {M, N, K, acc}  C (M, N) = A (M, K)·B (K, N) (+ C when acc)
//   bias_add, bias_grad    {rows, n}       y += b;  db += column sums of dy
//   add, axpy              {n}             z = x + y;  z = a·x + y
//   gelu, gelu_backward    {n}
//   swiglu, swiglu_backward {rows, F}      gate and up (rows, F) each
//   softmax, softmax_backward {rows, cols, valid}  valid: entries computed (causal)
//   embedding              {rows, D}       x0 = wte[token] + (wpe or sinusoids)[position]
//   embedding_backward     {rows, D, tables}  dx0 into wte's rows (and wpe's: tables = 2)
//   cross_entropy, cross_entropy_backward {rows, V}
//   copy, fill             {n}             y = x;  y = 0
// FLOPs count each add, multiply, divide, compare and transcendental (exp,
// tanh, log) as one; a fused multiply-add is two. Bytes are the least any
// implementation must move: every input read once, every output written
// once, nothing counted twice; caches may make a real call move more (or,
// for data still in cache, less DRAM traffic than this).
#pragma once

#include <cstdint>

#include "normkit/observer.hpp"

namespace normkit::measure {

struct OpCost {
  double flops = 0;
  std::int64_t bytes_read = 0, bytes_written = 0;
  bool known = false;  // false: an op name this table does not know (counted as 0)
  std::int64_t bytes() const { return bytes_read + bytes_written; }
};

OpCost op_cost(const OpRecord& r);

// FLOPs per element of the library's norms, counted on the formulas of
// ops.hpp (per-row work, one rsqrt and a few scalars, is left out: D >> 1).
//   LayerNorm forward   7: mean (add), variance (subtract, multiply, add), and
//                          (x − mean)·rstd·weight + bias (multiply, multiply, add)
//   RMSNorm forward     4: x² summed (multiply, add), x·rstd·weight (2 multiplies)
//   LayerNorm backward 13: g = dy·w; x̂ = (x − mean)·rstd; Σg, Σg·x̂;
//                          dx = rstd·(g − mean(g) − x̂·mean(g·x̂)); dweight += dy·x̂, dbias += dy
//   RMSNorm backward    9: g = dy·w; x̂ = x·rstd; Σg·x̂; dx = rstd·(g − x̂·mean(g·x̂)); dweight += dy·x̂
// The fused ops add one per element (the residual add, or + dh_out).
double norm_flops_per_element(const char* op, bool with_bias, bool with_dh_out);

}  // namespace normkit::measure
