// The checks about derivatives: the trained gain, the zero-branch block
// Jacobians, and the geometry of what normalization erases.
#include <algorithm>
#include <cmath>

#include "lab/check.hpp"
#include "lab/numerics.hpp"

namespace normkit::lab {

namespace {

double max_abs(const Vec& v) {
  double m = 0;
  for (const double x : v)
    if (!(std::fabs(x) <= m)) m = std::fabs(x);
  return m;
}

double frobenius(const Mat& m) { return norm2(m.a); }

// The row sums of J weighted by v: Σ_k |J_ik|·|v_k| bound on the error of
// (J v)_i from per-entry bounds.
Vec bound_apply(const Mat& bound, const Vec& v) {
  Vec out(static_cast<std::size_t>(bound.n), 0.0);
  for (std::int64_t i = 0; i < bound.n; ++i)
    for (std::int64_t k = 0; k < bound.n; ++k) out[i] += bound(i, k) * std::fabs(v[k]);
  return out;
}

Vec ones(std::int64_t n) { return Vec(static_cast<std::size_t>(n), 1.0); }

// ½·Σ(y − t)² in fp64.
double loss(const Vec& y, const Vec& t) {
  double l = 0;
  for (std::size_t i = 0; i < y.size(); ++i) l += 0.5 * (y[i] - t[i]) * (y[i] - t[i]);
  return l;
}

}  // namespace

void check_gain_is_trained(const Norms& norms, Recorder& rec) {
  const std::int64_t rows = 6, D = 8;
  const double eps = 1e-5;
  Rng rng(17);
  const Vec xv = rng.normals(rows * D, 0.3, 1.0), tv = rng.normals(rows * D);
  const Vec w0v = rng.normals(D, 1.0, 0.1), b0v = rng.normals(D, 0.0, 0.1);
  struct Case {
    DType x, w;
  };
  // Gains in the activation dtype, plus the common mixed case of bf16
  // activations with f32 gains.
  const Case cases[] = {{DType::f64, DType::f64}, {DType::f32, DType::f32}, {DType::bf16, DType::bf16},
                        {DType::f16, DType::f16}, {DType::bf16, DType::f32}};
  for (const Case& c : cases) {
    std::string d = dname(c.x);
    if (c.w != c.x) d.append("_").append(dname(c.w)).append("_gain");
    const Array x(c.x, rows, D, xv);
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
      const bool layer = kind == NormKind::layer_norm;
      const Array w0(c.w, w0v), b0(c.w, b0v);
      const Array* bias0 = layer ? &b0 : nullptr;
      const ForwardRun f0 = forward(norms, kind, x, &w0, bias0, eps);
      const Vec y0 = f0.y.values();
      const double l0 = loss(y0, tv);
      // dL/dy = y − t, stored in the activation dtype.
      const Array dy(c.x, rows, D, sub(y0, tv));
      const BackwardRun g = backward(norms, kind, dy, x, &w0, bias0, eps);

      // The gradient reaches the gain (and the bias), and it is the right one.
      rec.at_least(k + "_dweight_max_" + d, K + " max |dL/dweight|, " + d, max_abs(g.dweight.values()),
                   max_abs(g.dw_bound));
      agree(rec, k + "_dweight_err_" + d, K + " dweight against the fp64 oracle, " + d, g.dweight.values(),
            g.ref.dweight, g.dw_bound);
      if (layer) {
        rec.at_least(k + "_dbias_max_" + d, K + " max |dL/dbias|, " + d, max_abs(g.dbias.values()),
                     max_abs(g.db_bound));
        agree(rec, k + "_dbias_err_" + d, K + " dbias against the fp64 oracle, " + d, g.dbias.values(),
              g.ref.dbias, g.db_bound);
      }

      // SGD with lr = 1/λ, λ the largest curvature of L in (w_j, b_j): for
      // fixed x̂ the loss is quadratic with per-feature Hessian
      // [[Σx̂², Σx̂], [Σx̂, rows]], so this step provably lowers L.
      double lambda = 0;
      for (std::int64_t j = 0; j < D; ++j) {
        double sxx = 0, sx = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
          sxx += f0.xhat[r * D + j] * f0.xhat[r * D + j];
          sx += f0.xhat[r * D + j];
        }
        const double h11 = sxx, h22 = layer ? static_cast<double>(rows) : 0.0, h12 = layer ? sx : 0.0;
        const double tr = h11 + h22, det = h11 * h22 - h12 * h12;
        lambda = std::max(lambda, 0.5 * tr + std::sqrt(std::max(0.0, 0.25 * tr * tr - det)));
      }
      const double lr = 1.0 / lambda;
      Array w1(c.w, 1, D), b1(c.w, 1, D);
      std::int64_t must_change = 0, changed_as_needed = 0, changed = 0;
      double grad_sq = 0;
      for (std::int64_t j = 0; j < D; ++j) {
        const double step = lr * g.dweight.get(j);
        w1.set(j, w0.get(j) - step);
        if (layer) b1.set(j, b0.get(j) - lr * g.dbias.get(j));
        grad_sq += g.dweight.get(j) * g.dweight.get(j) + (layer ? g.dbias.get(j) * g.dbias.get(j) : 0.0);
        // A step larger than the gain's own rounding (u·|w|) must show up.
        const bool big = std::fabs(step) > 2.0 * unit_roundoff(c.w) * std::fabs(w0.get(j));
        const bool moved = w1.get(j) != w0.get(j);
        must_change += big ? 1 : 0;
        changed_as_needed += big && moved ? 1 : 0;
        changed += moved ? 1 : 0;
      }
      rec.value(k + "_gains_changed_" + d, static_cast<double>(changed));
      rec.row(K + " gains changed by the SGD step (lr = " + fmt(lr, 3) + "), " + d,
              std::to_string(changed) + " of " + std::to_string(D),
              "every gain whose step exceeds its rounding (" + std::to_string(must_change) + "), and ≥ 1",
              changed_as_needed == must_change && changed >= 1);

      // The next forward uses the new values: it matches the oracle with
      // w1 (b1) and differs from the old output by more than rounding.
      const ForwardRun f1 = forward(norms, kind, x, &w1, layer ? &b1 : nullptr, eps);
      rec.at_most(k + "_forward_new_params_" + d, K + " forward with the updated parameters vs oracle, / bound",
                  f1.worst_ratio(), 1.0);
      differ(rec, k + "_forward_changed_" + d, K + " output after the step − before, " + d, f1.y.values(), y0,
             add(f1.bound, f0.bound));
      const double l1 = loss(f1.y.values(), tv);
      rec.value(k + "_loss_before_" + d, l0);
      rec.value(k + "_loss_after_" + d, l1);
      rec.row(K + " loss ½Σ(y − t)² before → after the step, " + d, fmt(l0) + " → " + fmt(l1),
              "lower (exact decrease ≥ lr·|∇|²/2 = " + fmt(0.5 * lr * grad_sq, 3) + ")", l1 < l0);
    }
  }
}

void check_zero_branch_jacobian(const Norms& norms, Recorder& rec) {
  const double eps = 1e-5;
  const Vec x0{1, 2, 3, 4};
  const std::int64_t D = 4;
  for (const DType dt : kAllDtypes) {
    const std::string d = dname(dt);
    const Array x(dt, x0), x5(dt, {6, 7, 8, 9});

    // Pre-norm with S ≡ 0 is x itself whatever the norm does, so nothing
    // here could fail for it; block_jacobian checks pre-norm with the
    // model's real sublayers.

    // Post-norm, y = N(x + S(x)) with S ≡ 0: the fused add_layer_norm with
    // the zero branch output as its x and the stream x as the residual.
    const Array zero_branch(dt, Vec(D, 0.0));
    Array h(dt, 1, D), y(dt, 1, D), h5(dt, 1, D), y5(dt, 1, D);
    norms.add_layer_norm(zero_branch.mat(), x.mat(), {}, {}, eps, h.mat(), y.mat(), {}, {});
    norms.add_layer_norm(zero_branch.mat(), x5.mat(), {}, {}, eps, h5.mat(), y5.mat(), {}, {});
    const ForwardRun ref = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, eps);
    const ForwardRun ref5 = forward(norms, NormKind::layer_norm, x5, nullptr, nullptr, eps);
    // The text's 5 decimals: half a unit, 5e-6, plus eps's effect on the
    // exact value (|x̂|·eps/(2σ²) ≤ 1.35·1e-5/2.5 = 5.4e-6), plus the bound.
    const Vec text{-1.34164, -0.44721, 0.44721, 1.34164};
    Vec tol(4);
    for (std::size_t j = 0; j < 4; ++j) tol[j] = 5e-6 + std::fabs(text[j]) * eps / (2.0 * 1.25) + ref.bound[j];
    near_vec(rec, "post_norm_y_" + d, "post-norm, S ≡ 0: N(x + S(x)) for x = [1,2,3,4], " + d, y.values(), text,
             tol);
    agree(rec, "post_norm_shift_" + d, "post-norm output(x + 5·1) − output(x): the shift is removed, " + d,
          y5.values(), y.values(), add(ref.bound, ref5.bound));

    // Post-norm Jacobian J = N'(I + S') = N', rows from the backward.
    Mat bound;
    const Mat J = jacobian_from_backward(norms, NormKind::layer_norm, x, eps, &bound);
    const Vec j1 = mat_vec(J, ones(D));
    // Exactly Σ_k J_ik = 0; each entry is within bound(i,k), so |(J·1)_i| ≤ Σ_k bound(i,k).
    const Vec j1_budget = bound_apply(bound, ones(D));
    agree(rec, "post_norm_jacobian_ones_" + d, "post-norm Jacobian · 1 (all-ones direction), " + d, j1,
          Vec(4, 0.0), j1_budget);
    // ‖J‖_F exactly: J = (P − ccᵀ/(D s²))/s with P = I − 11ᵀ/D, c = x − μ1,
    // s² = σ² + eps. Its eigenvalues are 0 on 1, (1 − σ²/s²)/s = eps/s³ on c
    // and 1/s on the other D − 2 directions, so ‖J‖_F² = (D − 2)/s² + eps²/s⁶
    // (√(D − 2)/σ at eps = 0; RMSNorm's is √(D − 1)/s there, it keeps 1).
    // The entries are within bound(i,k), so ‖J‖_F is within ‖bound‖_F.
    {
      const double s2 = 1.25 + eps;  // σ² of [1,2,3,4] is 1.25
      const double exact = std::sqrt(static_cast<double>(D - 2) / s2 + eps * eps / (s2 * s2 * s2));
      rec.near("post_norm_jacobian_norm_" + d, "post-norm ‖J‖_F, " + d, frobenius(J), exact,
               frobenius(bound));
    }
  }
}

void check_normalization_geometry(const Norms& norms, Recorder& rec) {
  const std::int64_t D = 6;
  Rng rng(23);
  const Vec xv = rng.normals(D, 0.4, 1.0);
  double mu = 0;
  for (const double v : xv) mu += v / static_cast<double>(D);
  Vec centred = xv;
  for (double& v : centred) v -= mu;

  // Closed forms with gain 1: RMSNorm J = (I − x xᵀ/(D s²))/s, s² = mean(x²) + eps;
  // LayerNorm J = (I − 11ᵀ/D − c cᵀ/(D s²))/s, c = x − μ1, s² = σ² + eps.
  auto closed = [&](NormKind kind, double eps) {
    const Vec& v = kind == NormKind::layer_norm ? centred : xv;
    const double s2 = dot(v, v) / static_cast<double>(D) + eps, s = std::sqrt(s2);
    Mat J{D, Vec(static_cast<std::size_t>(D * D))};
    for (std::int64_t i = 0; i < D; ++i)
      for (std::int64_t k = 0; k < D; ++k)
        J(i, k) = ((i == k ? 1.0 : 0.0) - (kind == NormKind::layer_norm ? 1.0 / static_cast<double>(D) : 0.0) -
                   v[i] * v[k] / (static_cast<double>(D) * s2)) / s;
    return J;
  };

  for (const DType dt : {DType::f64, DType::f32}) {
    const std::string d = dname(dt);
    const Array x(dt, xv);
    for (const NormKind kind : {NormKind::rms_norm, NormKind::layer_norm}) {
      const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
      for (const double eps : {0.0, 0.25}) {
        const std::string e = eps == 0.0 ? "eps0" : "eps0.25";
        const std::string at = ", eps = " + fmt(eps) + ", " + d;
        Mat bound;
        const Mat J = jacobian_from_backward(norms, kind, x, eps, &bound);
        const Mat Jc = closed(kind, eps);
        agree(rec, k + "_jacobian_vs_closed_form_" + e + "_" + d, K + " Jacobian (backward) against the closed form" + at,
              J.a, Jc.a, bound.a);

        // Finite differences of the f64 forward: central differences at h and
        // h/2. The truncation error of D(h/2) is ≈ |D(h) − D(h/2)|/3 (it
        // falls as h²), and evaluation errors ≤ B (the forward bound) add at
        // most B/(h/2); the budget |D(h) − D(h/2)| + 2·B/(h/2) allows each of
        // the two parts a margin (3× and 2×).
        if (dt == DType::f64) {
          const double h = 0x1p-12;
          Mat fd{D, Vec(static_cast<std::size_t>(D * D))}, tol{D, Vec(static_cast<std::size_t>(D * D))};
          for (std::int64_t kcol = 0; kcol < D; ++kcol) {
            auto column = [&](double step, Vec& bmax) {
              Vec xp = xv, xm = xv;
              xp[kcol] += step;
              xm[kcol] -= step;
              const ForwardRun fp = forward(norms, kind, Array(dt, xp), nullptr, nullptr, eps);
              const ForwardRun fm = forward(norms, kind, Array(dt, xm), nullptr, nullptr, eps);
              Vec col(static_cast<std::size_t>(D));
              bmax.assign(static_cast<std::size_t>(D), 0.0);
              for (std::int64_t i = 0; i < D; ++i) {
                col[i] = (fp.y.get(i) - fm.y.get(i)) / (2.0 * step);
                bmax[i] = std::max(fp.bound[i], fm.bound[i]);
              }
              return col;
            };
            Vec b1, b2;
            const Vec c1 = column(h, b1), c2 = column(h / 2, b2);
            for (std::int64_t i = 0; i < D; ++i) {
              fd(i, kcol) = c2[i];
              tol(i, kcol) = std::fabs(c1[i] - c2[i]) + 2.0 * b2[i] / (h / 2);
            }
          }
          agree(rec, k + "_jacobian_fd_" + e, K + " Jacobian (backward) against finite differences" + at, J.a, fd.a,
                add(tol.a, bound.a));
        }

        // Singular values; rank with threshold τ = ‖E‖_F (the entries'
        // bounds) + 64·D·u·σ_max (Jacobi's own error): a singular value
        // moves by at most ‖E‖₂ ≤ ‖E‖_F, so a true zero stays below τ.
        const Vec sv = singular_values(J);
        const double tau = frobenius(bound) + 64.0 * static_cast<double>(D) * 0x1p-53 * sv[0];
        std::int64_t rank = 0;
        for (const double s : sv) rank += s > tau ? 1 : 0;
        rec.value(k + "_singular_values_" + e + "_" + d + "_min", sv.back());
        if (eps == 0.0) {
          const std::int64_t expected = kind == NormKind::rms_norm ? D - 1 : D - 2;
          rec.near(k + "_rank_" + e + "_" + d,
                   K + " rank of J (σ > τ = " + fmt(tau, 2) + "), σ = " + fmt_vec(sv, 3) + at,
                   static_cast<double>(rank), static_cast<double>(expected), 0.0);
          // The erased directions: x for RMSNorm; 1 and x − μ1 for LayerNorm.
          const Vec& radial = kind == NormKind::rms_norm ? xv : centred;
          const Vec jr = mat_vec(J, radial);
          agree(rec, k + "_annihilates_radial_" + e + "_" + d,
                K + " J·" + (kind == NormKind::rms_norm ? "x" : "(x − μ1)") + " = 0" + at, jr, Vec(D, 0.0),
                bound_apply(bound, radial));
          if (kind == NormKind::layer_norm)
            agree(rec, k + "_annihilates_ones_" + e + "_" + d, K + " J·1 = 0" + at, mat_vec(J, ones(D)), Vec(D, 0.0),
                  bound_apply(bound, ones(D)));
        } else {
          rec.near(k + "_rank_" + e + "_" + d, K + " rank of J (σ > τ = " + fmt(tau, 2) + "), σ = " + fmt_vec(sv, 3) + at,
                   static_cast<double>(rank), kind == NormKind::rms_norm ? static_cast<double>(D) : static_cast<double>(D - 1), 0.0);
          // eps > 0: tangent directions scale by 1/s, the radial one by eps/s³.
          const Vec& radial = kind == NormKind::rms_norm ? xv : centred;
          const double s = std::sqrt(dot(radial, radial) / static_cast<double>(D) + eps);
          Vec tangent = rng.normals(D);
          if (kind == NormKind::layer_norm) {  // stay in the zero-mean subspace too
            double m = 0;
            for (const double v : tangent) m += v / static_cast<double>(D);
            for (double& v : tangent) v -= m;
          }
          const double proj = dot(tangent, radial) / dot(radial, radial);
          for (std::int64_t i = 0; i < D; ++i) tangent[i] -= proj * radial[i];
          const double err = frobenius(bound);  // ‖E v‖/‖v‖ ≤ ‖E‖_F
          rec.near(k + "_tangent_gain_" + e + "_" + d, K + " ‖J v‖/‖v‖ for v ⟂ x (tangent)" + at,
                   norm2(mat_vec(J, tangent)) / norm2(tangent), 1.0 / s, err);
          rec.near(k + "_radial_gain_" + e + "_" + d, K + " ‖J r‖/‖r‖ for the radial r" + at,
                   norm2(mat_vec(J, radial)) / norm2(radial), eps / (s * s * s), err);
          if (kind == NormKind::layer_norm)
            agree(rec, k + "_annihilates_ones_" + e + "_" + d, K + " J·1 = 0 still (centring is exact)" + at,
                  mat_vec(J, ones(D)), Vec(D, 0.0), bound_apply(bound, ones(D)));
        }
      }
    }
    // LayerNorm's output lies on the sphere of radius √D at eps = 0 (Σx̂² = D
    // exactly) and strictly inside it for eps > 0, at √D·σ/√(σ² + eps). Each
    // element is within its bound B_j, so ‖y‖ is within ‖B‖ of the exact norm.
    for (const double eps : {0.0, 0.25}) {
      const ForwardRun f = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, eps);
      const double sigma2 = dot(centred, centred) / static_cast<double>(D);
      const double radius = std::sqrt(static_cast<double>(D) * sigma2 / (sigma2 + eps));
      const std::string e = eps == 0.0 ? "eps0" : "eps0.25";
      rec.near("ln_output_radius_" + e + "_" + d,
               "LayerNorm ‖y‖ (√D = " + fmt(std::sqrt(static_cast<double>(D)), 4) + "), eps = " + fmt(eps) + ", " + d,
               norm2(f.y.values()), radius, norm2(f.bound));
      if (eps > 0)
        rec.at_most("ln_output_inside_sphere_" + e + "_" + d,
                    "LayerNorm ‖y‖ + its bound, inside the sphere of radius √D, eps = " + fmt(eps) + ", " + d,
                    norm2(f.y.values()) + norm2(f.bound), std::sqrt(static_cast<double>(D)));
    }
    // Σx²/D = σ² + μ², from the kernels' saved statistics at eps = 0:
    // 1/rstd_RMS² against mean_LN² + 1/rstd_LN². Each statistic is within
    // growth(D)·u_acc relative (the bound worked_examples uses); squaring and
    // inverting make that at most 2.5× on each term.
    {
      const ForwardRun l = forward(norms, NormKind::layer_norm, x, nullptr, nullptr, 0.0);
      const ForwardRun r = forward(norms, NormKind::rms_norm, x, nullptr, nullptr, 0.0);
      const double mean_sq = 1.0 / (r.rstd.get(0) * r.rstd.get(0));
      const double mu2 = l.mean.get(0) * l.mean.get(0), var = 1.0 / (l.rstd.get(0) * l.rstd.get(0));
      const double rel = 2.5 * growth(D) * accum_roundoff(dt);
      rec.near("mean_square_vs_var_plus_mean2_" + d, "Σx²/D from RMSNorm's rstd against σ² + μ² from LayerNorm's, " + d,
               mean_sq, var + mu2, rel * (mean_sq + var + mu2));
    }
    // At x = 0 (eps > 0), RMSNorm's Jacobian is I/√eps.
    for (const double eps : {1e-2, 1e-6}) {
      Mat bound;
      const Mat J = jacobian_from_backward(norms, NormKind::rms_norm, Array(dt, Vec(D, 0.0)), eps, &bound);
      Mat expect{D, Vec(static_cast<std::size_t>(D * D), 0.0)};
      for (std::int64_t i = 0; i < D; ++i) expect(i, i) = 1.0 / std::sqrt(eps);
      agree(rec, "rms_jacobian_at_zero_eps" + fmt(eps) + "_" + dname(dt),
            "RMSNorm Jacobian at x = 0 against I/√eps = " + fmt(1.0 / std::sqrt(eps)) + " I, eps = " + fmt(eps) +
                ", " + dname(dt),
            J.a, expect.a, bound.a);
    }
  }
}

}  // namespace normkit::lab
