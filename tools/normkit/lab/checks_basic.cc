// The checks that reproduce the texts' small worked examples: the hand
// computations, shift and scale, residual growth, and the update angle.
#include <cmath>
#include <numbers>

#include "lab/check.hpp"
#include "lab/numerics.hpp"
#include "normkit/error.hpp"

namespace normkit::lab {

namespace {

// |exact(eps) − exact(0)|: how far eps moves the oracle's output from the
// texts' eps-free hand values.
Vec eps_effect(NormKind kind, const Array& x, double eps) {
  const reference::Forward with = kind == NormKind::layer_norm ? reference::layer_norm(x.mat(), {}, {}, eps)
                                                      : reference::rms_norm(x.mat(), {}, eps);
  const reference::Forward without = kind == NormKind::layer_norm ? reference::layer_norm(x.mat(), {}, {}, 0.0)
                                                         : reference::rms_norm(x.mat(), {}, 0.0);
  return absdiff(with.y, without.y);
}

Vec constant(std::size_t n, double v) { return Vec(n, v); }

// Whether a call is rejected with normkit::Error.
template <class Fn>
bool rejected(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
    return true;
  }
  return false;
}

std::int64_t count_written(const Array& a) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) n += std::isnan(a.get(i)) ? 0 : 1;
  return n;
}

}  // namespace

void check_worked_examples(const Norms& norms, Recorder& rec) {
  // 002's table uses eps = 1e-5; the texts round to 3 decimals, so a text
  // value is within half a unit of the last digit (5e-4) of the eps-free
  // exact value. Tolerance = that + the eps effect + the kernel's bound.
  const double eps = 1e-5;
  struct Example {
    const char* label;
    const char* tag;
    Vec x, ln_text, rms_text;
    double ln_half_unit, rms_half_unit;
  };
  const double r10 = std::sqrt(10.0);
  const Example examples[] = {
      {"(1,2,3,4)", "1234", {1, 2, 3, 4}, {-1.342, -0.447, 0.447, 1.342}, {0.365, 0.730, 1.095, 1.461},
       5e-4, 5e-4},
      {"(1,2,3)", "123", {1, 2, 3}, {-1.225, 0, 1.225}, {0.463, 0.926, 1.389}, 5e-4, 5e-4},
      // 003 gives LN(2,2,4,4) exactly; RMSNorm of it is not in the texts, so
      // its expected value is the closed form (2,2,4,4)/√10.
      {"(2,2,4,4)", "2244", {2, 2, 4, 4}, {-1, -1, 1, 1}, {2 / r10, 2 / r10, 4 / r10, 4 / r10}, 0, 0},
  };
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    for (const Example& ex : examples) {
      const Array x(dt, ex.x);
      for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
        const ForwardRun f = forward(norms, kind, x, nullptr, nullptr, eps);
        const Vec& text = kind == NormKind::layer_norm ? ex.ln_text : ex.rms_text;
        const double half_unit = kind == NormKind::layer_norm ? ex.ln_half_unit : ex.rms_half_unit;
        const Vec tol = add(add(f.bound, eps_effect(kind, x, eps)), constant(text.size(), half_unit));
        near_vec(rec, kind_tag(kind) + "_" + ex.tag + "_" + d,
                 std::string(norm_title(kind)) + ex.label + ", " + d + " (eps 1e-5)", f.y.values(), text, tol);
      }
    }

    // [1,3] and [101,103]: means 2 and 102, both normalize to [−1, 1].
    {
      const Array x(dt, 2, 2, {1, 3, 101, 103});
      const ForwardRun f = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, eps);
      const Vec eff = eps_effect(NormKind::layer_norm, x, eps);
      const Vec y = f.y.values();
      const Vec a{y[0], y[1]}, b{y[2], y[3]};
      near_vec(rec, "ln_1_3_" + d, "LayerNorm[1,3], " + d, a, {-1, 1},
               {f.bound[0] + eff[0], f.bound[1] + eff[1]});
      near_vec(rec, "ln_101_103_" + d, "LayerNorm[101,103], " + d, b, {-1, 1},
               {f.bound[2] + eff[2], f.bound[3] + eff[3]});
      agree(rec, "ln_1_3_vs_101_103_" + d, "LayerNorm[1,3] − LayerNorm[101,103], " + d, a, b,
            {f.bound[0] + f.bound[2], f.bound[1] + f.bound[3]});
      // The means survive only in the statistics output, not in the vectors.
      const double mean_tol = growth(2) * accum_roundoff(dt) * 102.0;
      rec.near("mean_1_3_" + d, "saved mean of [1,3], " + d, f.mean.get(0), 2.0, mean_tol);
      rec.near("mean_101_103_" + d, "saved mean of [101,103], " + d, f.mean.get(1), 102.0, mean_tol);
    }

    // z = LayerNorm([1,−1]) = [1,−1] (mean 0, variance 1); readout y = 100·z₁ + 0·z₂.
    {
      const Array x(dt, {1, -1});
      const ForwardRun f = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, 0.0);
      const double z1 = f.y.get(0), z2 = f.y.get(1);
      rec.near("readout_" + d, "readout 100·z₁ + 0·z₂ of z = LayerNorm[1,−1], " + d, 100.0 * z1 + 0.0 * z2,
               100.0, 100.0 * f.bound[0] + f.bound[1]);
      rec.note("readout_share_z1_" + d, "share of the readout from z₁ (z₂'s weight is 0), " + d,
               std::fabs(100.0 * z1) / (std::fabs(100.0 * z1) + std::fabs(0.0 * z2)),
               "equal normalized magnitudes, unequal influence");
    }

    // 003: RMS of (3,4) ≈ 3.536, mean and variance of (2,2,4,4) = 3 and 1,
    // read from the saved statistics with eps = 0 (rstd = 1/RMS, 1/σ).
    {
      const double stat_rel = growth(4) * accum_roundoff(dt);
      const ForwardRun r = forward(norms, NormKind::rms_norm, Array(dt, {3, 4}), nullptr, nullptr, 0.0);
      rec.near("rms_of_3_4_" + d, "RMS(3,4) = 1/rstd, " + d, 1.0 / r.rstd.get(0), 3.536,
               5e-4 + 3.54 * stat_rel);
      const ForwardRun l = forward(norms, NormKind::layer_norm, Array(dt, {2, 2, 4, 4}), nullptr, nullptr, 0.0);
      rec.near("mean_2244_" + d, "mean of (2,2,4,4), " + d, l.mean.get(0), 3.0, 3.0 * stat_rel);
      rec.near("var_2244_" + d, "variance of (2,2,4,4) = 1/rstd², " + d,
               1.0 / (l.rstd.get(0) * l.rstd.get(0)), 1.0, 2.0 * stat_rel);
    }
  }

  // Input [2,5,8]: 10 tokens of 8 features. Count what the API writes and
  // what sizes it accepts: statistics are per token, parameters per feature.
  {
    const std::int64_t rows = 2 * 5, D = 8;
    Rng rng(7);
    const Array x(DType::f32, rows, D, rng.normals(rows * D));
    Array y(DType::f32, rows, D), mean(DType::f32, 1, rows), rstd(DType::f32, 1, rows);
    const Array w(DType::f32, Vec(D, 1.0)), b(DType::f32, Vec(D, 0.0));
    const Array w_per_token(DType::f32, Vec(rows * D, 1.0));
    rstd.fill(std::nan(""));
    norms.rms_norm(x.mat(), w.vec(), 1e-5, y.mat(), rstd.vec());
    rec.near("rms_statistics_2x5x8", "RMSNorm statistics written for [2,5,8] (second moments)",
             static_cast<double>(count_written(rstd)), 10.0, 0.0);
    const bool rms_gain_d = !rejected([&] { norms.rms_norm(x.mat(), w.vec(), 1e-5, y.mat(), {}); });
    const bool rms_gain_token =
        rejected([&] { norms.rms_norm(x.mat(), w_per_token.vec(), 1e-5, y.mat(), {}); });
    rec.is_true("rms_gain_shared_by_tokens", "RMSNorm takes a gain of D = 8 and rejects one of B·T·D = 80",
                rms_gain_d && rms_gain_token, "yes: gains are per feature, shared by the 10 tokens");
    // The parameter counts are the sizes of the lab's own arrays: what the
    // API accepts is checked above, so these rows only report.
    rec.note("rms_params_2x5x8", "RMSNorm learned scalars (gain size)", static_cast<double>(w.size()),
             "8: arithmetic on the inputs (the gain the API accepted)");
    mean.fill(std::nan(""));
    rstd.fill(std::nan(""));
    norms.layer_norm(x.mat(), w.vec(), b.vec(), 1e-5, y.mat(), mean.vec(), rstd.vec());
    rec.near("ln_statistics_2x5x8", "LayerNorm (mean, variance) pairs written for [2,5,8]",
             static_cast<double>(std::min(count_written(mean), count_written(rstd))), 10.0, 0.0);
    const bool ln_bias_token = rejected(
        [&] { norms.layer_norm(x.mat(), w.vec(), w_per_token.vec(), 1e-5, y.mat(), {}, {}); });
    rec.is_true("ln_bias_shared_by_tokens", "LayerNorm rejects a bias of 80 (per token)", ln_bias_token,
                "yes");
    rec.note("ln_params_2x5x8", "LayerNorm learned scalars (gain + bias)", static_cast<double>(w.size() + b.size()),
             "16: arithmetic on the inputs (the sizes the API accepted)");
  }
}

void check_shift_scale(const Norms& norms, Recorder& rec) {
  // Inputs are multiples of 1/8 with |x| ≤ 8, and the shift (5), the scales
  // (4, 2⁻⁸) and negation keep them exact in every dtype (bf16 has 8
  // significant bits), so any difference comes from the norm, not the input.
  const double eps = 1e-5;
  const std::int64_t rows = 4, D = 32;
  Rng rng(11);
  Vec base(static_cast<std::size_t>(rows * D));
  for (double& v : base) v = std::floor(rng.uniform() * 129.0 - 64.0) / 8.0;
  auto transformed = [&](double scale, double shift) {
    Vec out = base;
    for (double& v : out) v = scale * v + shift;
    return out;
  };
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    const Array x(dt, rows, D, base);
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
      const ForwardRun f0 = forward(norms, kind, x, nullptr, nullptr, eps);
      const Vec y0 = f0.y.values();

      const ForwardRun fs = forward(norms, kind, Array(dt, rows, D, transformed(1, 5)), nullptr, nullptr, eps);
      if (kind == NormKind::layer_norm)
        agree(rec, k + "_shift_" + d, K + "(x + 5·1) − " + K + "(x), " + d + ": shift removed", fs.y.values(),
              y0, add(fs.bound, f0.bound));
      else
        differ(rec, k + "_shift_" + d, K + "(x + 5·1) − " + K + "(x), " + d + ": shift kept",
               fs.y.values(), y0, add(fs.bound, f0.bound));

      // Positive scales: exactly, norm(a·x) = norm(x) computed with eps/a² in
      // place of eps, so the outputs differ only through eps. Compare the
      // measured change with the oracle's change (the eps effect).
      for (const double a : {4.0, 0x1p-8}) {
        const std::string at = a > 1 ? "4" : "2^-8";
        const ForwardRun fa = forward(norms, kind, Array(dt, rows, D, transformed(a, 0)), nullptr, nullptr, eps);
        const Vec effect = absdiff(fa.ref.y, f0.ref.y);
        double max_effect = 0;
        for (const double e : effect) max_effect = std::max(max_effect, e);
        rec.note(k + "_eps_effect_scale_" + at + "_" + d,
                 "size of the eps effect, max |" + K + "(" + at + "·x) − " + K + "(x)| exact, " + d,
                 max_effect, "scale invariance is exact only at eps = 0");
        // measured change − exact change, within the two outputs' bounds
        agree(rec, k + "_scale_" + at + "_" + d,
              K + "(" + at + "·x) − " + K + "(x) against its exact value (the eps effect), " + d,
              sub(fa.y.values(), y0), sub(fa.ref.y, f0.ref.y), add(fa.bound, f0.bound));
      }

      // A negative scale flips every component.
      const ForwardRun fn = forward(norms, kind, Array(dt, rows, D, transformed(-1, 0)), nullptr, nullptr, eps);
      Vec neg = fn.y.values();
      for (double& v : neg) v = -v;
      agree(rec, k + "_negate_" + d, "−" + K + "(−x) − " + K + "(x), " + d, neg, y0, add(fn.bound, f0.bound));
      std::int64_t flips = 0, nonzero = 0;
      for (std::size_t j = 0; j < y0.size(); ++j) {
        if (std::fabs(y0[j]) <= f0.bound[j]) continue;  // sign of a rounding-sized value is not defined
        ++nonzero;
        flips += (y0[j] > 0) != (fn.y.get(static_cast<std::int64_t>(j)) > 0) ? 1 : 0;
      }
      rec.near(k + "_sign_flips_" + d, K + "(−x): components whose sign flipped, " + d,
               static_cast<double>(flips), static_cast<double>(nonzero), 0.0);
    }
  }
}

void check_residual_growth(const Norms& norms, Recorder& rec) {
  // x₀ = [1,2,3,4], each step adds c = [1,1,1,1] through the fused
  // add_layer_norm (h = x + residual, y = LayerNorm(h)), eps = 1e-6. The
  // residual stays integer, so it is exact in every dtype.
  const double eps = 1e-6;
  const double rms_text[] = {2.739, 3.674, 0, 5.612};  // k = 0, 1, 3 (k = 2 is not in the text)
  const Vec ln_text{-1.342, -0.447, 0.447, 1.342};
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    Array x(dt, {1, 2, 3, 4});
    const Array c(dt, {1, 1, 1, 1});
    for (int k = 0; k <= 3; ++k) {
      Array y(dt, 1, 4), h(dt, 1, 4);
      Array mean(stat_dtype(dt), 1, 1), rstd(stat_dtype(dt), 1, 1);
      if (k == 0)
        norms.layer_norm(x.mat(), {}, {}, eps, y.mat(), mean.vec(), rstd.vec());
      else
        norms.add_layer_norm(c.mat(), x.mat(), {}, {}, eps, h.mat(), y.mat(), mean.vec(), rstd.vec());
      if (k > 0) x = h;
      const Vec xv = x.values();
      const double rms = std::sqrt(dot(xv, xv) / 4.0);  // a measurement of the stream, not a norm layer
      const std::string ks = std::to_string(k);
      if (k == 0)  // x₀ is the input itself: no kernel has touched it yet
        rec.note("residual_rms_k0_" + d, "residual RMS at k = 0, " + d, rms,
                 "text: 2.739; arithmetic on the inputs");
      else if (rms_text[k] > 0)
        rec.near("residual_rms_k" + ks + "_" + d, "residual RMS at k = " + ks + ", " + d, rms, rms_text[k],
                 5e-4);
      else
        rec.note("residual_rms_k" + ks + "_" + d, "residual RMS at k = " + ks + ", " + d, rms,
                 "between 3.674 and 5.612 (not in the text)");
      const ForwardRun ref = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, eps);
      const Vec tol = add(add(ref.bound, eps_effect(NormKind::layer_norm, x, eps)), constant(4, 5e-4));
      near_vec(rec, "ln_xk_k" + ks + "_" + d, "LayerNorm(x_k) at k = " + ks + ", " + d, y.values(), ln_text,
               tol);
    }
  }
}

void check_residual_update_angle(const Norms& norms, Recorder& rec) {
  // x = (c, 0), u = (0, 1), unit-gain RMSNorm with eps = 0 (D = 2).
  const double deg = 180.0 / std::numbers::pi;
  const double sqrt2 = std::sqrt(2.0);
  auto angle = [](const Vec& a, const Vec& b) {
    return std::acos(std::clamp(dot(a, b) / (norm2(a) * norm2(b)), -1.0, 1.0));
  };
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    for (const double c : {1.0, 10.0}) {
      const std::string cs = c == 1.0 ? "1" : "10";
      const Array x(dt, {c, 0}), xu(dt, {c, 1});
      const ForwardRun nx = forward(norms, NormKind::rms_norm, x, nullptr, nullptr, 0.0);
      near_vec(rec, "rms_x_c" + cs + "_" + d, "branch input RMSNorm(x) at c = " + cs + ", " + d,
               nx.y.values(), {sqrt2, 0.0}, nx.bound);
      // θ is computed from the inputs alone (no norm is called), so it is
      // reported against the text, not checked; the row below checks the norm.
      const double theta = angle(x.values(), xu.values()) * deg;
      rec.note("angle_c" + cs + "_" + d, "angle between x and x + u at c = " + cs + ", degrees, " + d, theta,
               std::string(c == 1.0 ? "text: 45" : "text: 5.71") + "; arithmetic on the inputs");
      // A final RMSNorm keeps the direction: the angle between the normalized
      // outputs equals θ, up to the outputs' bounds (a perturbation δ of a
      // vector v turns it by at most |δ|/|v| radians).
      const ForwardRun nxu = forward(norms, NormKind::rms_norm, xu, nullptr, nullptr, 0.0);
      const double turn = (norm2(nx.bound) / norm2(nx.ref.y) + norm2(nxu.bound) / norm2(nxu.ref.y)) * deg;
      rec.near("final_norm_angle_c" + cs + "_" + d,
               "angle between RMSNorm(x + u) and RMSNorm(x) at c = " + cs + ", degrees, " + d,
               angle(nx.y.values(), nxu.y.values()) * deg, std::atan(1.0 / c) * deg, turn + 1e-12);  // + acos's own rounding in double
    }
  }
}

}  // namespace normkit::lab
