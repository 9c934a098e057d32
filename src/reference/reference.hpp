// The fp64 scalar oracle. Two passes, one thread, no tricks: short enough to
// check by eye, and the thing every kernel is tested against (never against
// each other). Inputs of any dtype are widened to double exactly; nothing is
// rounded until the caller compares.
//
// Shapes: x, dy: (rows, D) views; weight, bias: (D), optional (absent = {});
// results are dense row-major doubles: y, dx (rows·D); mean, rstd (rows);
// dweight, dbias (D).
#pragma once

#include <cstdint>
#include <vector>

#include "normkit/tensor.hpp"

namespace normkit::reference {

// Element i of a contiguous array of dtype t, widened to double.
double load(const void* p, DType t, std::int64_t i);

// A (rows, D) view copied to dense row-major doubles.
std::vector<double> to_double(ConstMatrix m);
// A vector view copied to doubles; absent gives `fill` repeated n times.
std::vector<double> to_double(ConstVector v, std::int64_t n, double fill);

struct Forward {
  std::vector<double> y;     // (rows·D)
  std::vector<double> mean;  // (rows); LayerNorm only
  std::vector<double> rstd;  // (rows)
};

Forward layer_norm(ConstMatrix x, ConstVector weight, ConstVector bias, double eps);
Forward rms_norm(ConstMatrix x, ConstVector weight, double eps, double weight_offset = 0.0);

struct Backward {
  std::vector<double> dx;       // (rows·D)
  std::vector<double> dweight;  // (D)
  std::vector<double> dbias;    // (D); LayerNorm only
};

// Gradients of the forward above at x, with statistics recomputed in fp64
// from x (not taken from a kernel's saved values).
Backward layer_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector weight, double eps);
Backward rms_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector weight, double eps,
                           double weight_offset = 0.0);

}  // namespace normkit::reference
