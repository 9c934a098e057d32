// The checks about axes and dtypes: token-wise causality, and 16-bit outputs
// against an f32 reference, each with the negative control it must catch.
#include <cmath>
#include <limits>

#include "lab/check.hpp"
#include "lab/numerics.hpp"
#include "normkit/half.hpp"

namespace normkit::lab {

namespace {

struct Prefix {
  std::int64_t prefix_same = 0, prefix_rows = 0, suffix_changed = 0, suffix_rows = 0;
};

// Runs a forward of `norms` on x1 and x2 (which differ only at positions
// t ≥ t0 of each sequence) and counts rows that are bitwise equal.
Prefix compare_prefix(const Norms& norms, NormKind kind, const Array& x1, const Array& x2,
                      const Array& w, const Array& b, std::int64_t T, std::int64_t t0) {
  Array y1(x1.dtype(), x1.rows(), x1.cols()), y2(x1.dtype(), x1.rows(), x1.cols());
  if (kind == NormKind::layer_norm) {
    norms.layer_norm(x1.mat(), w.vec(), b.vec(), 1e-5, y1.mat(), {}, {});
    norms.layer_norm(x2.mat(), w.vec(), b.vec(), 1e-5, y2.mat(), {}, {});
  } else {
    norms.rms_norm(x1.mat(), w.vec(), 1e-5, y1.mat(), {});
    norms.rms_norm(x2.mat(), w.vec(), 1e-5, y2.mat(), {});
  }
  Prefix p;
  for (std::int64_t r = 0; r < x1.rows(); ++r) {
    const bool same = y1.bitwise_equal_row(y2, r);
    if (r % T < t0) {
      ++p.prefix_rows;
      p.prefix_same += same ? 1 : 0;
    } else {
      ++p.suffix_rows;
      p.suffix_changed += same ? 0 : 1;
    }
  }
  return p;
}

std::string of(std::int64_t a, std::int64_t b) { return std::to_string(a) + " of " + std::to_string(b); }

}  // namespace

void check_feature_axis_causality(const Norms& norms, Recorder& rec) {
  const std::int64_t B = kCausalityB, T = kCausalityT, D = kCausalityD, t0 = 5;
  Rng rng(3);
  const Vec v1 = rng.normals(B * T * D);
  Vec v2 = v1;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = t0; t < T; ++t)
      for (std::int64_t j = 0; j < D; ++j) v2[(b * T + t) * D + j] = 2.0 + 3.0 * rng.normal();
  const Vec wv = rng.normals(D, 1.0, 0.2), bv = rng.normals(D, 0.0, 0.2);
  const Norms control = sequence_axis_norms(T);
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    const Array x1(dt, B * T, D, v1), x2(dt, B * T, D, v2), w(dt, wv), b(dt, bv);
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
      std::string shape = "[";
      shape.append(std::to_string(B)).append(",").append(std::to_string(T)).append(",");
      shape.append(std::to_string(D)).append("], positions t ≥ ").append(std::to_string(t0)).append(" changed");
      const Prefix p = compare_prefix(norms, kind, x1, x2, w, b, T, t0);
      rec.value(k + "_prefix_rows_unchanged_" + d, static_cast<double>(p.prefix_same));
      rec.row(K + " " + shape + ": outputs at t < " + std::to_string(t0) + " bitwise unchanged, " + d,
              of(p.prefix_same, p.prefix_rows), "all " + std::to_string(p.prefix_rows),
              p.prefix_same == p.prefix_rows);
      rec.value(k + "_suffix_rows_changed_" + d, static_cast<double>(p.suffix_changed));
      rec.row(K + ": outputs at the changed positions did change (the test is not vacuous), " + d,
              of(p.suffix_changed, p.suffix_rows), "all " + std::to_string(p.suffix_rows),
              p.suffix_changed == p.suffix_rows);
      const Prefix c = compare_prefix(control, kind, x1, x2, w, b, T, t0);
      const std::int64_t leaked = c.prefix_rows - c.prefix_same;
      rec.value(k + "_control_prefix_rows_leaked_" + d, static_cast<double>(leaked));
      rec.row("negative control (" + control.name + ") " + K + ": earlier outputs changed, " + d,
              of(leaked, c.prefix_rows), "> 0: the test catches the leak", leaked > 0);
    }
  }
}

void check_low_precision_reference(const Norms& norms, Recorder& rec) {
  const double eps = 1e-5;
  const std::int64_t rows = 16, D = 512;
  Rng rng(5);
  // Row r has scale 10^(r/4): from 1 to ~5600, so the largest rows' squares
  // (up to ~6e8) overflow f16 (max 65504) but not f32, while the values
  // themselves stay finite in f16.
  Vec xv(static_cast<std::size_t>(rows * D));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < D; ++j)
      xv[r * D + j] = std::pow(10.0, static_cast<double>(r) / 4.0) * (0.5 + rng.normal());
  const Vec wv = rng.normals(D, 1.0, 0.1), bv = rng.normals(D, 0.0, 0.1);

  // y16 and the reference round16(y32) are both one 16-bit rounding away
  // from an f32 result within B32 of the exact value, so
  //   |y16 − ref| ≤ u16·(|y32| + B32)·2 + 2·B32 + subnormal16.
  auto tolerance = [](DType dt, const ForwardRun& f32) {
    Vec tol(f32.bound.size());
    const double u = unit_roundoff(dt);
    for (std::size_t j = 0; j < tol.size(); ++j)
      tol[j] = 2.0 * u * (std::fabs(f32.y.get(static_cast<std::int64_t>(j))) + f32.bound[j]) +
               2.0 * f32.bound[j] + smallest_subnormal(dt);
    return tol;
  };
  auto widen = [](const Array& a) { return Array(DType::f32, a.rows(), a.cols(), a.values()); };

  for (const DType dt : {DType::f16, DType::bf16}) {
    const std::string d = dname(dt);
    const Array x(dt, rows, D, xv), w(dt, wv), b(dt, bv);
    const Array x32 = widen(x), w32 = widen(w), b32 = widen(b);
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
      const Array* bias = kind == NormKind::layer_norm ? &b : nullptr;
      const Array* bias32 = kind == NormKind::layer_norm ? &b32 : nullptr;
      const ForwardRun f16 = forward(norms, kind, x, &w, bias, eps);
      const ForwardRun f32 = forward(norms, kind, x32, &w32, bias32, eps);
      rec.at_most(k + "_f32_reference_vs_oracle_for_" + d, K + " f32 reference (for " + d + ") against the fp64 oracle, / bound",
                  f32.worst_ratio(), 1.0);
      const Array ref(dt, rows, D, f32.y.values());
      agree(rec, k + "_" + d + "_vs_f32", K + " " + d + " against round(f32 reference), rows of scale 1…5600",
            f16.y.values(), ref.values(), tolerance(dt, f32));
    }
  }

  // RMSNorm (and LayerNorm) of [1000, 2000, 3000, 4000] in f16: 4000² = 1.6e7
  // is far beyond f16's 65504, so only f32 statistics get it right.
  const Vec big{1000, 2000, 3000, 4000};
  const Array x16(DType::f16, big), x32(DType::f32, big);
  rec.is_true("f16_4000_squared_overflows", "4000² rounded to f16 is Inf",
              std::isinf(to_float(to_f16(4000.0f * 4000.0f))), "yes: f16's largest finite value is 65504");
  const Norms control = unpromoted_f16_norms();
  for (const NormKind kind : {NormKind::rms_norm, NormKind::layer_norm}) {
    const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
    const ForwardRun f32 = forward(norms, kind, x32, nullptr, nullptr, eps);
    const Array ref(DType::f16, 1, 4, f32.y.values());
    const Vec tol = tolerance(DType::f16, f32);
    const ForwardRun f16 = forward(norms, kind, x16, nullptr, nullptr, eps);
    agree(rec, k + "_1000_4000_f16_vs_f32", K + "[1000,2000,3000,4000] f16 against round(f32 reference)",
          f16.y.values(), ref.values(), tol);
    near_vec(rec, k + "_1000_4000_f16", K + "[1000,2000,3000,4000] f16 values", f16.y.values(),
             kind == NormKind::rms_norm ? Vec{0.365, 0.730, 1.095, 1.461} : Vec{-1.342, -0.447, 0.447, 1.342},
             add(Vec(4, 5e-4), tol));

    // The negative control squares in f16: Inf, mean Inf, rsqrt 0, y = 0.
    Array yc(DType::f16, 1, 4);
    if (kind == NormKind::rms_norm)
      control.rms_norm(x16.mat(), {}, eps, yc.mat(), {});
    else
      control.layer_norm(x16.mat(), {}, {}, eps, yc.mat(), {}, {});
    bool finite = true, zero = true;
    for (std::int64_t j = 0; j < 4; ++j) {
      finite = finite && std::isfinite(yc.get(j));
      zero = zero && yc.get(j) == 0.0;
    }
    rec.row("negative control (" + control.name + ") " + K + "[1000,…,4000] f16: output", fmt_vec(yc.values()),
            "a finite vector of zeros", finite && zero);
    rec.is_true(k + "_control_passes_isfinite", "an isfinite check on the control's " + K + " output passes", finite,
                "yes: isfinite alone cannot catch this");
    differ(rec, k + "_control_vs_f32",
           "the control's " + K + " output against round(f32 reference): the reference catches it", yc.values(),
           ref.values(), tol);
  }

  // eps in low precision. A constant row has variance exactly 0, so var + eps
  // is eps alone. eps = 1e-8 is below half of f16's smallest subnormal
  // (2⁻²⁵ ≈ 3e-8) and rounds to 0 in f16: a computation in storage precision
  // gets 1/√0 = Inf and 0·Inf = NaN. The library keeps eps and the statistics
  // in f32, so its output is the exact 0. bf16 has f32's exponent range, so
  // eps ≥ 1e-7 stays positive there.
  {
    const double tiny_eps = 1e-8;
    const Array flat(DType::f16, {3, 3, 3, 3});
    Array y_lib(DType::f16, 1, 4), y_ctl(DType::f16, 1, 4);
    norms.layer_norm(flat.mat(), {}, {}, tiny_eps, y_lib.mat(), {}, {});
    control.layer_norm(flat.mat(), {}, {}, tiny_eps, y_ctl.mat(), {}, {});
    bool lib_zero = true;
    double ctl_nonfinite = 0;
    for (std::int64_t j = 0; j < 4; ++j) {
      lib_zero = lib_zero && y_lib.get(j) == 0.0;
      ctl_nonfinite += std::isfinite(y_ctl.get(j)) ? 0.0 : 1.0;
    }
    rec.is_true("eps_1e-8_f16_rounds_to_zero", "eps = 1e-8 rounded to f16 is 0", to_f16(1e-8f).bits == 0,
                "yes: below half of the smallest subnormal");
    rec.is_true("ln_flat_f16_eps_1e-8_zero", "LayerNorm[3,3,3,3] f16, eps = 1e-8, library (eps and statistics in f32)",
                lib_zero, "yes: the exact output, all 0");
    rec.note("ln_flat_f16_eps_1e-8_control_nonfinite",
             "LayerNorm[3,3,3,3] f16, eps = 1e-8, in f16 arithmetic (" + control.name + "): non-finite outputs",
             ctl_nonfinite, "4 of 4: var + eps = 0 in f16, so 0·Inf = NaN");
    rec.is_true("eps_1e-7_bf16_positive", "eps = 1e-7 rounded to bf16 is positive and normal",
                to_float(to_bf16(1e-7f)) >= static_cast<double>(std::numeric_limits<float>::min()),
                "yes: bf16 has f32's exponent range");
  }
}

}  // namespace normkit::lab
