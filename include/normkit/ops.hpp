// normkit — LayerNorm and RMSNorm: forward, backward, and the fused
// residual-add variants used by pre-norm transformer blocks.
//
// Shapes (one set of letters everywhere):
//   x, y, dy, dx, residual, h, dh : (rows, D)   rows = B·T flattened
//   weight, bias, dweight, dbias  : (D)
//   mean, rstd                    : (rows)
//
// Semantics follow PyTorch (torch.nn.functional.layer_norm / rms_norm):
//   LayerNorm:  mean = Σx/D,  var = Σ(x − mean)²/D   (population variance)
//               rstd = 1/sqrt(var + eps)              (eps inside the root)
//               y    = (x − mean)·rstd·weight + bias
//   RMSNorm:    rstd = 1/sqrt(Σx²/D + eps)
//               y    = x·rstd·(weight_offset + weight)
// Optional arguments are passed as default-constructed views ({}): an absent
// weight means a gain of 1, an absent bias means 0, and an absent statistic or
// gradient output is simply not written. weight_offset != 0 needs a weight.
// A view with a null pointer but a non-zero size is an Error, not "absent".
//
// Dtypes:
//   x, y, dy, dx               : f32, f64, f16 or bf16, all the same dtype
//   weight, bias (and grads)   : the dtype of x, or f32 (bf16 activations with
//                                f32 gains is the common mixed case); f64 x
//                                needs f64 weights
//   mean, rstd                 : f32 (f64 when x is f64)
//   residual, h, dh (fused)    : the dtype of x, or f32 when x is 16-bit
//                                (an f32 residual stream); residual, h and dh
//                                share one dtype
//
// Precision policy: 16-bit values are storage only. Inputs are converted to
// f32 in registers, all statistics and arithmetic are f32 (f64 for f64 inputs),
// and only the final result is rounded to the output dtype. f16 inputs up to
// f16's largest finite value never overflow the statistics (65504² ≈ 4.3e9
// fits easily in f32), so RMSNorm of [1000, 2000, 3000, 4000] in f16 is right.
//
// Error bound (the tests assert exactly this): with u_out and u_acc the unit
// roundoff of the output dtype and of the accumulation dtype (f32: 2⁻²⁴,
// f64: 2⁻⁵³, f16: 2⁻¹¹, bf16: 2⁻⁸), g the effective gain (|g| read as
// |weight| + |weight_offset|: the sum is formed in the arithmetic), x̂ = y's
// normalized value before the gain, and μ_|x| = Σ|x|/D, every output element
// of the forward satisfies
//   |y − y_exact| ≤ u_out·|y_exact| + 4·(√D + 2)·u_acc·(|g|·(|x̂| + rstd·μ_|x|) + |bias|)
//                   + (smallest subnormal of the output dtype)
// where y_exact is the fp64 reference on the same (already rounded) inputs.
// The backward bounds have the same form with the magnitudes of the terms of
// each gradient formula in place of |g|·|x̂| (see docs/numerics.md).
//
// Threading and determinism: rows are split among threads (see
// threading.hpp); dweight and dbias are reduced over a fixed partition of rows
// in a fixed order, so every output is bitwise identical for any thread count
// and any run.
//
// Edge cases:
//   rows == 0            a no-op: nothing is read or written, except that
//                        a backward's dweight/dbias (a sum over no rows)
//                        are set to 0
//   D == 0, rows > 0     an Error: a norm over zero features has no mean
//   NaN/Inf in a row     affects that row's outputs (and its mean/rstd)
//                        only; other rows are bitwise unaffected. Within
//                        the row IEEE arithmetic decides, as in PyTorch:
//                        LayerNorm gives NaN throughout; RMSNorm gives NaN
//                        throughout for a NaN, and for an Inf rstd = 0, so
//                        NaN at the Inf and 0 elsewhere. In the backward, a
//                        non-finite row also makes dweight/dbias non-finite,
//                        since those sum over all rows.
//   eps                  must be finite and >= 0; eps = 0 on a zero row gives
//                        rstd = Inf and y = NaN (0·Inf), as in PyTorch.
//   in-place             y may be exactly x (same pointer, same stride);
//                        any other overlap between an input and an output is
//                        an Error. The same holds for dx and dy, and for h or
//                        y and x or residual in the fused ops.
//
// Every function throws normkit::Error for an invalid argument, before any
// output is written.
#pragma once

#include "normkit/error.hpp"
#include "normkit/tensor.hpp"
#include "normkit/threading.hpp"

namespace normkit {

// The dtype of the saved statistics (mean, rstd) for activations of dtype x:
// f64 for f64, else f32 (the accumulation dtype, above). Callers allocate
// mean and rstd in it; a call given another dtype is an Error.
constexpr DType stat_dtype(DType x) noexcept { return x == DType::f64 ? DType::f64 : DType::f32; }

// LayerNorm forward.
//   x: (rows, D); weight, bias: (D), optional; y: (rows, D), may equal x.
//   mean, rstd: (rows), optional outputs saved for layer_norm_backward.
void layer_norm(ConstMatrix x, ConstVector weight, ConstVector bias, double eps, Matrix y,
                Vector mean = {}, Vector rstd = {});

// RMSNorm forward, gain = weight_offset + weight (offset 1 for Gemma's
// zero-centred gains; 0, the default, for Llama's).
//   x: (rows, D); weight: (D), optional; y: (rows, D), may equal x.
//   rstd: (rows), optional output saved for rms_norm_backward.
void rms_norm(ConstMatrix x, ConstVector weight, double eps, Matrix y, Vector rstd = {},
              double weight_offset = 0.0);

// LayerNorm backward. With x̂ = (x − mean)·rstd and g = weight·dy:
//   dx      = rstd·(g − mean(g) − x̂·mean(g·x̂))        (row means over D)
//   dweight = Σ_rows dy·x̂,   dbias = Σ_rows dy
//   dy, x: (rows, D); mean, rstd: (rows) as written by layer_norm;
//   weight: (D), optional; dx: (rows, D), may equal dy;
//   dweight, dbias: (D), optional outputs (overwritten, not accumulated).
void layer_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector mean, ConstVector rstd,
                         ConstVector weight, Matrix dx, Vector dweight = {}, Vector dbias = {});

// RMSNorm backward. With x̂ = x·rstd and g = (weight_offset + weight)·dy:
//   dx      = rstd·(g − x̂·mean(g·x̂))
//   dweight = Σ_rows dy·x̂
//   dy, x: (rows, D); rstd: (rows) as written by rms_norm; weight: (D),
//   optional; dx: (rows, D), may equal dy; dweight: (D), optional output.
void rms_norm_backward(ConstMatrix dy, ConstMatrix x, ConstVector rstd, ConstVector weight,
                       Matrix dx, Vector dweight = {}, double weight_offset = 0.0);

// Fused pre-norm step: h = x + residual (the new residual stream, written
// out) and y = layer_norm(h). The sum is rounded to h's dtype first and the
// norm is taken of that rounded h, so y is exactly layer_norm(h) as stored.
//   x: (rows, D); residual, h: (rows, D) in x's dtype or f32; y: (rows, D)
//   in x's dtype. h may equal residual or x (same dtype); y may equal x.
void add_layer_norm(ConstMatrix x, ConstMatrix residual, ConstVector weight, ConstVector bias,
                    double eps, Matrix h, Matrix y, Vector mean = {}, Vector rstd = {});

// Fused pre-norm step for RMSNorm: h = x + residual, y = rms_norm(h).
void add_rms_norm(ConstMatrix x, ConstMatrix residual, ConstVector weight, double eps, Matrix h,
                  Matrix y, Vector rstd = {}, double weight_offset = 0.0);

// Backward of add_layer_norm. The gradient reaching h is the sum of what
// comes through the norm and what comes through the residual output:
//   dh = layer_norm_backward(dy) + dh_out
// and, since h = x + residual, dh is also the gradient of x and of residual.
//   dy: (rows, D) in x's dtype; dh_out: (rows, D) in h's dtype, optional
//   ({}: the residual output is unused downstream);
//   h, mean, rstd as written by add_layer_norm; dh: (rows, D) in h's dtype,
//   may equal dh_out.
void add_layer_norm_backward(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean,
                             ConstVector rstd, ConstVector weight, Matrix dh,
                             Vector dweight = {}, Vector dbias = {});

// Backward of add_rms_norm: dh = rms_norm_backward(dy) + dh_out.
void add_rms_norm_backward(ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector rstd,
                           ConstVector weight, Matrix dh, Vector dweight = {},
                           double weight_offset = 0.0);

}  // namespace normkit
