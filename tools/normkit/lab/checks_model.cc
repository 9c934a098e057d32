// The checks that run the model of model/ with the norms under test: real
// block Jacobians (a non-zero sublayer, pre- and post-norm) and causality of
// the whole language model.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lab/check.hpp"
#include "lab/numerics.hpp"
#include "model/model.hpp"
#include "normkit/ops.hpp"

namespace normkit::lab {

namespace {

// The model's norm table from the norms under test. RMSNorm's fused add is
// the library's sum followed by the rms_norm under test (the lab's table has
// no add_rms_norm); the backward calls, which no check here makes, are the
// library's. The model in the lab uses plain gains (weight_offset 0).
model::NormOps model_ops(const Norms& n) {
  model::NormOps ops = model::library_norm_ops();
  ops.layer_norm = n.layer_norm;
  ops.rms_norm = [f = n.rms_norm](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd, double) {
    f(x, w, eps, y, rstd);
  };
  ops.add_layer_norm = n.add_layer_norm;
  ops.add_rms_norm = [f = n.rms_norm](ConstMatrix x, ConstMatrix r, ConstVector w, double eps, Matrix h, Matrix y,
                                      Vector rstd, double) {
    normkit::add_rms_norm(x, r, w, eps, h, y, rstd);
    f(h, w, eps, y, rstd);
  };
  return ops;
}

model::Config small_config(model::Placement p, NormKind kind) {
  model::Config c;
  c.vocab = 9;
  c.context = 3;
  c.width = 6;
  c.heads = 2;
  c.ffn = 12;
  c.depth = 1;
  c.placement = p;
  c.norm = kind == NormKind::layer_norm ? NormKind::layer_norm : NormKind::rms_norm;
  return c;
}

// Central differences of f: Rⁿ → Rⁿ at x, with steps h and h/2: returns
// D(h/2) and, per entry, the budget |D(h) − D(h/2)| (its truncation error is
// about a third of that, falling as h²) + 2·r/(h/2), r the rounding of f's
// f64 evaluation, taken as 2⁻⁴⁴·max|f| (2⁹ units of 2⁻⁵³: the sublayer's
// matrix products and softmax).
template <class F>
Mat finite_difference(F f, const Vec& x, Mat* budget) {
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  const double h = 0x1p-12;
  double fmax = 0;
  for (const double v : f(x)) fmax = std::max(fmax, std::fabs(v));
  const double r = 0x1p-44 * std::max(fmax, 1.0);
  Mat J{n, Vec(static_cast<std::size_t>(n * n))};
  budget->n = n;
  budget->a.assign(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t k = 0; k < n; ++k) {
    auto column = [&](double step) {
      Vec xp = x, xm = x;
      xp[k] += step;
      xm[k] -= step;
      const Vec fp = f(xp), fm = f(xm);
      Vec c(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) c[i] = (fp[i] - fm[i]) / (2.0 * step);
      return c;
    };
    const Vec c1 = column(h), c2 = column(h / 2);
    for (std::int64_t i = 0; i < n; ++i) {
      J(i, k) = c2[i];
      (*budget)(i, k) = std::fabs(c1[i] - c2[i]) + 2.0 * r / (h / 2);
    }
  }
  return J;
}

Mat matmul(const Mat& a, const Mat& b) {
  Mat c{a.n, Vec(a.a.size(), 0.0)};
  for (std::int64_t i = 0; i < a.n; ++i)
    for (std::int64_t k = 0; k < a.n; ++k)
      for (std::int64_t j = 0; j < a.n; ++j) c(i, j) += a(i, k) * b(k, j);
  return c;
}

Mat absolute(Mat m) {
  for (double& v : m.a) v = std::fabs(v);
  return m;
}

Mat plus_identity(Mat m) {
  for (std::int64_t i = 0; i < m.n; ++i) m(i, i) += 1.0;
  return m;
}

// The norm's Jacobian over a (T, D) input: block diagonal, one D×D block
// per token from the backward under test, with its entries' bounds.
Mat token_jacobians(const Norms& norms, NormKind kind, const Vec& x, std::int64_t T, std::int64_t D, double eps,
                    Mat* bound) {
  const std::int64_t n = T * D;
  Mat J{n, Vec(static_cast<std::size_t>(n * n), 0.0)};
  bound->n = n;
  bound->a.assign(J.a.size(), 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    Mat b;
    const Mat Jt = jacobian_from_backward(norms, kind, Array(DType::f64, Vec(x.begin() + t * D, x.begin() + (t + 1) * D)),
                                          eps, &b);
    for (std::int64_t i = 0; i < D; ++i)
      for (std::int64_t k = 0; k < D; ++k) {
        J(t * D + i, t * D + k) = Jt(i, k);
        (*bound)(t * D + i, t * D + k) = b(i, k);
      }
  }
  return J;
}

}  // namespace

void check_block_jacobian(const Norms& norms, Recorder& rec) {
  const std::int64_t T = 3;
  for (const model::Placement placement : {model::Placement::pre, model::Placement::post}) {
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const model::Config c = small_config(placement, kind);
      const std::int64_t D = c.width, n = T * D;
      model::Model<double> m(c, model_ops(norms));
      m.init(5);
      // A sublayer with weights of order 1 (×25 over the 0.02 init) and
      // non-zero biases, so that J_S is far from 0 and from I.
      Rng rng(41);
      for (const auto& t : m.tensors()) {
        const bool matrix = t.name.find("qkv") != std::string::npos || t.name.find("proj") != std::string::npos ||
                            t.name.find(".fc") != std::string::npos;
        if (!matrix) continue;
        const bool bias = t.name.ends_with(".bias");
        for (std::int64_t i = 0; i < t.size; ++i) {
          double& p = m.params()[static_cast<std::size_t>(t.offset + i)];
          p = bias ? 0.3 * rng.normal() : 25.0 * p;
        }
      }
      const Vec x = rng.normals(n, 0.2, 1.0);
      const std::string P(model::placement_name(placement)), k = kind_tag(kind), K = std::string(norm_title(kind));
      for (std::size_t j = 0; j < m.sublayer_count(); ++j) {
        const std::string S = j == 0 ? "attention" : "MLP";
        const std::string at = P + "-norm " + K + " block, " + S + " sublayer (T = 3, D = 6, f64)";
        const std::string id = P + "_" + k + "_" + (j == 0 ? "attn" : "mlp");
        auto block = [&](const Vec& v) {
          Vec y(v.size());
          m.block(j, v, 1, T, y);
          return y;
        };
        auto sublayer = [&](const Vec& v) {
          Vec y(v.size());
          m.sublayer(j, v, 1, T, y);
          return y;
        };
        Mat b_block, b_s, b_n;
        const Mat J = finite_difference(block, x, &b_block);
        Mat expected, budget;
        if (placement == model::Placement::pre) {
          // J_pre = I + J_S(N(x))·J_N(x)
          const ForwardRun u = forward(norms, kind, Array(DType::f64, T, D, x), nullptr, nullptr, c.eps);
          const Mat Js = finite_difference(sublayer, u.y.values(), &b_s);
          const Mat Jn = token_jacobians(norms, kind, x, T, D, c.eps, &b_n);
          expected = plus_identity(matmul(Js, Jn));
          budget = matmul(b_s, absolute(Jn));
          const Mat more = matmul(absolute(Js), b_n);
          for (std::size_t e = 0; e < budget.a.size(); ++e) budget.a[e] += more.a[e] + b_block.a[e];
          const Mat branch = matmul(Js, Jn);
          rec.at_least(id + "_branch_norm", "‖J_S·J_N‖_F, the branch's part, " + at, norm2(branch.a), 0.1 * std::sqrt(double(n)));
        } else {
          // J_post = J_N(x + S(x))·(I + J_S(x))
          const Mat Js = finite_difference(sublayer, x, &b_s);
          const Vec s = sublayer(x);
          Vec h(x.size());
          for (std::size_t e = 0; e < h.size(); ++e) h[e] = x[e] + s[e];
          const Mat Jn = token_jacobians(norms, kind, h, T, D, c.eps, &b_n);
          const Mat IJs = plus_identity(Js);
          expected = matmul(Jn, IJs);
          budget = matmul(absolute(Jn), b_s);
          const Mat more = matmul(b_n, absolute(IJs));
          for (std::size_t e = 0; e < budget.a.size(); ++e) budget.a[e] += more.a[e] + b_block.a[e];
          rec.at_least(id + "_sublayer_norm", "‖J_S‖_F, the sublayer's own Jacobian, " + at, norm2(Js.a),
                       0.1 * std::sqrt(double(n)));
        }
        agree(rec, id + "_jacobian", std::string(placement == model::Placement::pre ? "J = I + J_S·J_N" : "J = J_N·(I + J_S)") +
                                         " against finite differences of the block, " + at,
              J.a, expected.a, budget.a);
        // Causality inside the block: a later token's input leaves earlier
        // outputs bitwise unchanged, so the blocks of J above the diagonal
        // are exactly zero.
        double above = 0;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t kk = 0; kk < n; ++kk)
            if (kk / D > i / D) above = std::max(above, std::fabs(J(i, kk)));
        rec.at_most(id + "_future_blocks", "largest |∂y_t/∂x_t'| for a later token t' > t, " + at, above, 0.0);
      }
    }
  }
}

void check_model_causality(const Norms& norms, Recorder& rec) {
  const std::int64_t batch = 2, seq = 8, k = 5;
  for (const model::Placement placement : {model::Placement::pre, model::Placement::post}) {
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      model::Config c = small_config(placement, kind);
      c.context = seq;
      c.depth = 2;
      model::Model<float> m(c, model_ops(norms));
      m.init(3);
      Rng rng(13);
      std::vector<std::int32_t> a(static_cast<std::size_t>(batch * seq)), b;
      for (auto& t : a) t = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(c.vocab));
      b = a;
      for (std::int64_t r = 0; r < batch; ++r)
        for (std::int64_t t = k; t < seq; ++t) {
          auto& v = b[static_cast<std::size_t>(r * seq + t)];
          v = static_cast<std::int32_t>((v + 1 + static_cast<std::int32_t>(rng.next() % 7)) % c.vocab);
        }
      m.forward(a, batch, seq);
      const std::vector<float> la(m.logits().begin(), m.logits().end());
      m.forward(b, batch, seq);
      const std::vector<float> lb(m.logits().begin(), m.logits().end());
      const std::size_t V = static_cast<std::size_t>(c.vocab);
      std::int64_t earlier_same = 0, later_changed = 0;
      for (std::int64_t r = 0; r < batch; ++r)
        for (std::int64_t t = 0; t < seq; ++t) {
          const std::size_t row = static_cast<std::size_t>(r * seq + t) * V;
          const bool same = std::memcmp(la.data() + row, lb.data() + row, V * sizeof(float)) == 0;
          (t < k ? earlier_same : later_changed) += t < k ? (same ? 1 : 0) : (same ? 0 : 1);
        }
      const std::string P(model::placement_name(placement)), K = std::string(norm_title(kind)), id = P + "_" + kind_tag(kind);
      const std::string at = ", " + P + "-norm " + K + " model, depth 2, f32";
      rec.value(id + "_earlier_logits_unchanged", static_cast<double>(earlier_same));
      rec.row("positions before the change whose logits stay bitwise the same" + at,
              std::to_string(earlier_same) + " of " + std::to_string(batch * k), "all " + std::to_string(batch * k),
              earlier_same == batch * k);
      rec.value(id + "_later_logits_changed", static_cast<double>(later_changed));
      rec.row("positions from the change on whose logits change" + at,
              std::to_string(later_changed) + " of " + std::to_string(batch * (seq - k)),
              "all " + std::to_string(batch * (seq - k)), later_changed == batch * (seq - k));
    }
  }
}

}  // namespace normkit::lab
