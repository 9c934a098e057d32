// The op × dtype × option matrix the core tests sweep, and the parameters
// (weight, bias) each case uses.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "normkit/ops.hpp"
#include "support/norm_kind.hpp"
#include "tolerance.hpp"

namespace normkit::test {

// LayerNorm: none (no affine), weight (bias=False), bias only, both.
// RMSNorm: none, weight, weight with offset 1 (Gemma's gain).
enum class Affine { none, weight, bias, both, offset };

struct Case {
  NormKind op;
  DType x;  // activations
  DType w;  // parameters
  Affine affine;
};

inline std::string name_of(const Case& c) {
  static const char* affine[] = {"none", "weight", "bias", "both", "offset"};
  return std::string(c.op == NormKind::layer_norm ? "layer" : "rms") + "_" + std::string(dtype_name(c.x)) + "_w" +
         std::string(dtype_name(c.w)) + "_" + affine[static_cast<int>(c.affine)];
}

// gtest prints parameters with this (instead of their bytes).
inline void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

// Every supported (x, w) dtype pair with every affine option of the op.
inline std::vector<Case> all_cases() {
  const std::vector<std::pair<DType, DType>> dtypes = {
      {DType::f32, DType::f32}, {DType::f64, DType::f64}, {DType::f16, DType::f16}, {DType::f16, DType::f32},
      {DType::bf16, DType::bf16}, {DType::bf16, DType::f32}};
  std::vector<Case> out;
  for (auto [x, w] : dtypes) {
    for (Affine a : {Affine::none, Affine::weight, Affine::bias, Affine::both}) out.push_back({NormKind::layer_norm, x, w, a});
    for (Affine a : {Affine::none, Affine::weight, Affine::offset}) out.push_back({NormKind::rms_norm, x, w, a});
  }
  return out;
}

using normkit::stat_dtype;  // the statistics dtype rule, normkit/ops.hpp

// Parameters of one case, with the dense double values the budget reads
// (tolerance.hpp: gain_size; the bias, absent filled in as 0).
struct Params {
  Array weight, bias;
  bool has_weight = false, has_bias = false;
  double offset = 0.0;
  std::vector<double> gain_size, shift;

  ConstVector w() const { return has_weight ? weight.cvec() : ConstVector{}; }
  ConstVector b() const { return has_bias ? bias.cvec() : ConstVector{}; }
};

inline Params make_params(const Case& c, std::int64_t D, std::mt19937_64& rng) {
  Params p;
  p.has_weight = c.affine == Affine::weight || c.affine == Affine::both || c.affine == Affine::offset;
  p.has_bias = c.affine == Affine::bias || c.affine == Affine::both;
  p.offset = c.affine == Affine::offset ? 1.0 : 0.0;
  // Gemma stores gain − 1, so its weights sit near 0; others near 1.
  if (p.has_weight) p.weight = random_vector(c.w, D, rng, p.offset > 0 ? 0.0 : 1.0, 0.5);
  if (p.has_bias) p.bias = random_vector(c.w, D, rng, 0.0, 0.5);
  p.gain_size = gain_size(p.w(), D, p.offset);
  p.shift = reference::to_double(p.b(), D, 0.0);
  return p;
}

// The oracle's forward for a case.
inline reference::Forward reference_forward(const Case& c, ConstMatrix x, const Params& p, double eps) {
  return c.op == NormKind::layer_norm ? reference::layer_norm(x, p.w(), p.b(), eps)
                           : reference::rms_norm(x, p.w(), eps, p.offset);
}

inline reference::Backward reference_backward(const Case& c, ConstMatrix dy, ConstMatrix x, const Params& p,
                                              double eps) {
  return c.op == NormKind::layer_norm ? reference::layer_norm_backward(dy, x, p.w(), eps)
                           : reference::rms_norm_backward(dy, x, p.w(), eps, p.offset);
}

// Widths and row counts from the core spec: odd widths catch remainder
// handling, 4097 and 65537 straddle vector and cache-block boundaries.
inline const std::vector<std::int64_t> kWidths = {1, 2, 3, 7, 8, 17, 64, 111, 768, 4096, 4097, 65537};
inline const std::vector<std::int64_t> kRows = {0, 1, 3, 1000};
// rows × D is capped so the fp64 oracle keeps the suite fast; the widest
// rows still run with 0, 1 and 3 rows.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 20;

}  // namespace normkit::test
