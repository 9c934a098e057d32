// The numbers of the error bound the kernels promise (normkit/ops.hpp,
// derived in docs/numerics.md §2): roundoff units of each dtype and of the
// arithmetic behind it, the subnormal floors, and the growth factor of an
// accumulated sum. One place for the test suite, the lab, the bench's
// accuracy check and the fuzzer.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "normkit/tensor.hpp"

namespace normkit::reference {

// Unit roundoff (half an ulp at 1) of a storage dtype.
inline double unit_roundoff(DType t) {
  switch (t) {
    case DType::f64: return 0x1p-53;
    case DType::f32: return 0x1p-24;
    case DType::f16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
  }
  return 1.0;
}

// Unit roundoff of the arithmetic used for activations of dtype x: f64 for
// f64, f32 for everything else (16-bit values widen to f32 exactly).
inline double accum_roundoff(DType x) { return x == DType::f64 ? 0x1p-53 : 0x1p-24; }

// The smallest positive subnormal of a dtype.
inline double smallest_subnormal(DType t) {
  switch (t) {
    case DType::f64: return std::numeric_limits<double>::denorm_min();
    case DType::f32: return 0x1p-149;
    case DType::f16: return 0x1p-24;
    case DType::bf16: return 0x1p-133;
  }
  return 0.0;
}

// Half of it: the absolute rounding error of an output that lands in the
// subnormal range. For f64 half a step underflows double itself, and so do
// the budget's other terms at such magnitudes (u·|ref| and the growth term
// are ~2^-53 of values near 2^-1074), so the floor there is one whole step:
// the final rounding plus everything the other terms could not represent.
inline double half_min_subnormal(DType t) {
  return t == DType::f64 ? smallest_subnormal(t) : smallest_subnormal(t) / 2;
}

// Smallest positive normal value λ of the arithmetic used for activations of
// dtype x. Below λ a rounding error is absolute, at most u·λ (half the
// subnormal spacing), not relative: a statistic of subnormal values is off
// by up to growth·u·λ however small the values are.
inline double accum_smallest_normal(DType x) { return x == DType::f64 ? 0x1p-1022 : 0x1p-126; }

// The growth factor of a sum of n terms accumulated in lane-parallel chunks:
// 4(√n + 2), the +2 covering the divide, sqrt and reciprocal that follow.
inline double growth(std::int64_t n) { return 4.0 * (std::sqrt(static_cast<double>(n)) + 2.0); }

// Per-element budget: u_out·|ref| + growth·u_acc·scale + half a subnormal step.
inline double budget(DType out, DType acc, double growth_factor, double ref, double scale) {
  return unit_roundoff(out) * std::abs(ref) + growth_factor * accum_roundoff(acc) * scale + half_min_subnormal(out);
}

}  // namespace normkit::reference
