// Internal interface between the dispatch layer (src/dispatch) and the CPU
// kernels (src/cpu). Everything here is already validated: pointers are
// non-null where required, shapes agree, dtype combinations are supported,
// eps is finite and >= 0, rows >= 1 and D >= 1, and outputs overlap inputs
// only exactly (same pointer, same stride). Kernels only assert in debug.
//
// Strides are in elements of the array's own dtype.
#pragma once

#include <cstdint>

#include "normkit/tensor.hpp"
#include "support/norm_kind.hpp"

namespace normkit::detail {

// Forward, plain or fused:
//   plain  (residual == nullptr): y = norm(x)
//   fused  (residual != nullptr): h = x + residual (rounded to res_dtype and
//          written), y = norm(h as stored)
// Shapes: x, residual, h, y: (rows, D); weight, bias: (D); mean, rstd: (rows).
struct ForwardArgs {
  NormKind kind = NormKind::layer_norm;
  std::int64_t rows = 0, D = 0;

  const void* x = nullptr;  // x_dtype
  std::int64_t x_stride = 0;
  const void* residual = nullptr;  // res_dtype; nullptr for the plain op
  std::int64_t residual_stride = 0;
  void* h = nullptr;  // res_dtype; non-null iff residual is
  std::int64_t h_stride = 0;
  void* y = nullptr;  // x_dtype
  std::int64_t y_stride = 0;

  const void* weight = nullptr;  // w_dtype, optional (gain 1)
  const void* bias = nullptr;    // w_dtype, optional (LayerNorm only)
  double weight_offset = 0.0;    // RMSNorm: gain = weight_offset + weight
  double eps = 0.0;

  void* mean = nullptr;  // stat dtype (f64 iff x_dtype is f64, else f32), optional
  void* rstd = nullptr;  // stat dtype, optional

  DType x_dtype = DType::f32;
  DType res_dtype = DType::f32;  // residual and h
  DType w_dtype = DType::f32;    // weight and bias
};

// Backward, plain or fused. "xin" is x for the plain op and h for the fused.
//   g   = (weight_offset + weight)·dy
//   dx  = rstd·(g − [mean(g)] − x̂·mean(g·x̂)) + dh_out   ([..] LayerNorm only)
//   dweight = Σ_rows dy·x̂, dbias = Σ_rows dy  — both optional, reduced over
//   a fixed partition of rows in a fixed order (bitwise thread-independent).
// Shapes: dy, xin, dh_out, dx: (rows, D); mean, rstd: (rows); weight,
// dweight, dbias: (D).
struct BackwardArgs {
  NormKind kind = NormKind::layer_norm;
  std::int64_t rows = 0, D = 0;

  const void* dy = nullptr;  // dy_dtype
  std::int64_t dy_stride = 0;
  const void* xin = nullptr;  // xin_dtype
  std::int64_t xin_stride = 0;
  const void* dh_out = nullptr;  // xin_dtype, optional (fused only)
  std::int64_t dh_out_stride = 0;
  const void* mean = nullptr;  // stat dtype; LayerNorm only
  const void* rstd = nullptr;  // stat dtype
  const void* weight = nullptr;  // w_dtype, optional
  double weight_offset = 0.0;

  void* dx = nullptr;  // xin_dtype (dh for the fused op)
  std::int64_t dx_stride = 0;
  void* dweight = nullptr;  // w_dtype, optional
  void* dbias = nullptr;    // w_dtype, optional (LayerNorm only)

  DType dy_dtype = DType::f32;   // the activation dtype (x's)
  DType xin_dtype = DType::f32;  // == dy_dtype for the plain op; res_dtype for fused
  DType w_dtype = DType::f32;
};

// The CPU implementations. Thread-safe; use up to num_threads() threads.
void cpu_forward(const ForwardArgs& a);
void cpu_backward(const BackwardArgs& a);

}  // namespace normkit::detail
