// The checks about time and about the texts' numeric claims: Amdahl's law on
// a model step measured by `normkit profile`'s profiler, and each measurable
// claim of the texts.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lab/check.hpp"
#include "lab/numerics.hpp"
#include "measure/timing.hpp"
#include "model/blas.hpp"
#include "model/norm_ops.hpp"
#include "normkit/half.hpp"
#include "normkit/threading.hpp"
#include "profile_run.hpp"

namespace normkit::lab {

namespace {

// Overall speed-up when a part taking `share` of the time becomes `factor`
// times faster (factor = ∞: free).
double amdahl(double share, double factor) { return 1.0 / ((1.0 - share) + share / factor); }

// "Many times" (the texts' time share against FLOP share), as a bound: at
// least 2×, where 000's V100 profile shows 150×. A CPU's compute is far
// closer to its memory bandwidth than a GPU's, so a norm here loses less to
// the matrix products; LayerNorm's ratio measured 2.8× with a second run
// beside it (ctest -j2), so a higher bound would fail on load, not on the
// norm (docs/lab.md has the measured ratios).
constexpr double kManyTimes = 2.0;

// A claim of a text: reported, never failing the check.
void claim(Recorder& rec, const std::string& name, const std::string& what, const std::string& measured,
           const std::string& claimed, bool holds) {
  rec.value(name + "_holds", holds ? 1.0 : 0.0);
  rec.row(what, measured + (holds ? "  → holds" : "  → does NOT hold"), "text: " + claimed, std::nullopt);
}

// "≈ v" with the claim's last stated digit at `unit`: holds within one unit.
bool approx(double measured, double claimed, double unit) { return std::fabs(measured - claimed) < unit; }

// The model's norm table (model/norm_ops.hpp) on the lab's norms under test,
// so that a substituted (broken) implementation is what the step times. The
// fused ops the lab's table lacks are composed of its plain norms and an add.
model::NormOps model_norms(const Norms& norms) {
  model::NormOps ops;
  ops.layer_norm = norms.layer_norm;
  ops.rms_norm = [f = norms.rms_norm](ConstMatrix x, ConstVector w, double eps, Matrix y, Vector rstd, double) {
    f(x, w, eps, y, rstd);
  };
  ops.add_layer_norm = norms.add_layer_norm;
  ops.layer_norm_backward = norms.layer_norm_backward;
  ops.rms_norm_backward = [f = norms.rms_norm_backward](ConstMatrix dy, ConstMatrix x, ConstVector rstd,
                                                         ConstVector w, Matrix dx, Vector dw, double) {
    f(dy, x, rstd, w, dx, dw);
  };
  // The model runs in f32 here; h = x + residual and dh += dh_out row by row.
  const auto add_rows = [](ConstMatrix a, ConstMatrix b, Matrix out) {
    for (std::int64_t r = 0; r < a.rows; ++r)
      for (std::int64_t j = 0; j < a.cols; ++j)
        static_cast<float*>(out.data)[r * out.row_stride + j] =
            static_cast<const float*>(a.data)[r * a.row_stride + j] +
            static_cast<const float*>(b.data)[r * b.row_stride + j];
  };
  ops.add_rms_norm = [f = norms.rms_norm, add_rows](ConstMatrix x, ConstMatrix r, ConstVector w, double eps,
                                                     Matrix h, Matrix y, Vector rstd, double) {
    add_rows(x, r, h);
    f(h, w, eps, y, rstd);
  };
  ops.add_layer_norm_backward = [f = norms.layer_norm_backward, add_rows](
                                    ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean,
                                    ConstVector rstd, ConstVector w, Matrix dh, Vector dw, Vector db) {
    f(dy, h, mean, rstd, w, dh, dw, db);
    if (dh_out.data) add_rows(dh, dh_out, dh);
  };
  ops.add_rms_norm_backward = [f = norms.rms_norm_backward, add_rows](ConstMatrix dy, ConstMatrix dh_out,
                                                                       ConstMatrix h, ConstVector rstd, ConstVector w,
                                                                       Matrix dh, Vector dw, double) {
    f(dy, h, rstd, w, dh, dw);
    if (dh_out.data) add_rows(dh, dh_out, dh);
  };
  return ops;
}

}  // namespace

void check_runtime_arithmetic(const Norms& norms, Recorder& rec) {
  // The texts' Amdahl figures are arithmetic on constants: reported beside
  // the text's value, not checked.
  rec.note("amdahl_free_at_25_5pct", "speed-up ceiling if a 25.5% time share became free: 1/(1 − 0.255)",
           amdahl(0.255, std::numeric_limits<double>::infinity()), "text: 1.342; arithmetic on constants");
  rec.note("amdahl_10pct_2x", "speed-up when a 10% share runs 2× faster: 1/(0.9 + 0.1/2)", amdahl(0.10, 2.0),
           "text: 1.053; arithmetic on constants");

  // A training step (forward, loss, backward) of the model of `normkit
  // profile`, measured by its profiler (tools/normkit/profile_run.hpp): a
  // BERT-like pre-norm stack cut to a size that takes milliseconds, so the
  // lab stays quick. Every op is counted (FLOPs) and timed (its fastest over
  // the profiled steps: see profile::Statistic); the norms are the
  // implementation under test.
  profile::StepConfig c;
  c.model.vocab = 512;
  c.model.width = 256;
  c.model.heads = 4;
  c.model.ffn = 1024;
  c.model.depth = 2;
  c.model.context = 64;
  c.batch = 2;
  c.seq = 64;
  const std::int64_t rows = c.batch * c.seq, D = c.model.width;
  // OpenBLAS's generic kernels (a CPU it does not know) make the rest of the
  // step slower and the norm's share smaller than this CPU's would be.
  rec.row("profiled step", "depth 2, D 256, 4 heads, FFN 1024, batch 2 × seq 64, pre-norm, f32, one thread",
          "normkit profile's step; matmuls by OpenBLAS sgemm, " + model::blas_core() + " kernels" +
              (model::blas_core_is_fallback() ? " (its generic fallback: set OPENBLAS_CORETYPE, docs/lab.md)" : ""),
          std::nullopt);
  // One thread for both the norm and the matmuls: two thread pools (OpenMP's
  // and OpenBLAS's) on the same cores wait on each other's spinning threads,
  // and that contention, not either kernel, would dominate the timings.
  const int normkit_threads = num_threads(), blas_threads = model::blas_threads();
  set_num_threads(1);
  model::set_blas_threads(1);

  for (const NormKind kind : {NormKind::rms_norm, NormKind::layer_norm}) {
    const std::string k = kind_tag(kind), K = std::string(norm_title(kind));
    c.model.norm = kind == NormKind::rms_norm ? NormKind::rms_norm : NormKind::layer_norm;
    profile::Step step(c, model_norms(norms));
    const profile::StepProfile p = profile::profile_step(step, 2, 9, profile::Statistic::fastest);
    const auto& norm = p.classes[static_cast<std::size_t>(profile::OpClass::normalization)];
    const auto& mm = p.classes[static_cast<std::size_t>(profile::OpClass::matmul)];
    const double tn = norm.seconds, tr = p.recorded_s - norm.seconds;
    const double share = norm.time_share, flop_share = norm.flop_share;
    rec.note(k + "_step_norm_seconds", K + ": time of the step's norms (" + std::to_string(norm.calls) +
             " calls)", tn, "seconds");
    rec.note(k + "_step_rest_seconds", K + " step: time of the rest (matmuls, attention, element-wise, loss)",
             tr, "seconds");
    rec.is_true(k + "_step_timed", K + " step: both times measured, finite and positive",
                std::isfinite(share) && tn > 0 && tr > 0, "yes");
    rec.note(k + "_time_share", K + ": measured share of the step's time", share,
             "each op's fastest time over 9 steps");
    rec.note(k + "_flop_share", K + ": share of the step's FLOPs", flop_share, "counted");
    rec.note(k + "_amdahl_ceiling", K + ": speed-up ceiling if the norm were free, 1/(1 − time share)",
             amdahl(share, std::numeric_limits<double>::infinity()), "Amdahl on the measured share");
    rec.note(k + "_amdahl_ceiling_from_flops", K + ": the same ceiling predicted from the FLOP share",
             amdahl(flop_share, std::numeric_limits<double>::infinity()), "what FLOP counting would predict");
    // Arithmetic intensity (000: "1 FLOP/byte" against "10"), counted by
    // the profiler: FLOPs over the bytes each op must move. Beside each,
    // the FLOP rate it achieved: the norm's is far lower, which is the time
    // share / FLOP share ratio checked below seen from the other side.
    rec.note(k + "_norm_flops_per_byte", K + ": arithmetic intensity of the step's norms, FLOP/byte",
             norm.intensity(), "counted; 000's 'about 1'");
    rec.note(k + "_matmul_flops_per_byte", K + " step: arithmetic intensity of its matrix products, FLOP/byte",
             mm.intensity(), "counted at this shape; 000's 'about 10' is a toy figure");
    rec.note(k + "_norm_gflops", K + ": achieved GFLOP/s of the norms (" + fmt(norm.bytes / tn / 1e9, 3) + " GB/s)",
             norm.flops / tn / 1e9, "from the times above");
    rec.note(k + "_rest_gflops", K + " step: achieved GFLOP/s of the rest", (p.flops - norm.flops) / tr / 1e9,
             "from the times above");
    // What the texts say: the time share is many times the FLOP share.
    rec.at_least(k + "_time_over_flop_share", K + ": time share / FLOP share (many times over)", share / flop_share,
                 kManyTimes);
    // A timing means something only for a norm that computes the right
    // thing: the norm under test on an input of the step's shape, against
    // the oracle.
    const Array xa(DType::f32, rows, D, Rng(29).normals(rows * D));
    const Array ga(DType::f32, Vec(static_cast<std::size_t>(D), 1.0)), ba(DType::f32, Vec(static_cast<std::size_t>(D), 0.0));
    const ForwardRun check = forward(norms, kind, xa, &ga, kind == NormKind::layer_norm ? &ba : nullptr,
                                     kind == NormKind::rms_norm ? 1e-6 : 1e-5);
    rec.at_most(k + "_step_norm_vs_oracle", K + " as timed, on an input of the step's shape: worst |y − oracle| / bound",
                check.worst_ratio(), 1.0);
  }
  set_num_threads(normkit_threads);
  model::set_blas_threads(blas_threads);
}

void check_seed_claims(const Norms& norms, Recorder& rec) {
  // --- 001: cosine similarity of LayerNorm and RMSNorm outputs. The text's
  // code: x = randn(32, 2048, 4096) in bf16, both norms on x.float(), the
  // outputs cast to bf16; "typically 0.98–0.99". Here 256 rows of 4096
  // (the cosine is a per-row mean, so fewer rows only add sampling noise).
  {
    const std::int64_t rows = 256, D = 4096;
    Rng rng(31);
    for (const double mean : {0.0, 1.0}) {
      const std::string m = mean == 0.0 ? "zero_mean" : "mean_1";
      const Array x16(DType::bf16, rows, D, rng.normals(rows * D, mean, 1.0));
      const Array x32(DType::f32, rows, D, x16.values());
      const ForwardRun ln = forward(norms, NormKind::layer_norm, x32, nullptr, nullptr, 1e-5);
      const ForwardRun rms = forward(norms, NormKind::rms_norm, x32, nullptr, nullptr, 1e-6);
      const Array ln16(DType::bf16, rows, D, ln.y.values()), rms16(DType::bf16, rows, D, rms.y.values());
      // Exactly, LN(x) ∝ x − μ1 and RMS(x) ∝ x, so cos = cos(x − μ1, x)
      // whatever eps is. Rounding moves each output's direction by at most
      // ρ = u_bf16 + ‖bound‖/‖y‖ radians, so the cosine by at most ρ_ln + ρ_rms.
      double measured = 0, predicted = 0, tol = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const Vec a = ln16.row(r), b = rms16.row(r), xr = x16.row(r);
        measured += dot(a, b) / (norm2(a) * norm2(b)) / static_cast<double>(rows);
        double mu = 0;
        for (const double v : xr) mu += v / static_cast<double>(D);
        Vec c = xr;
        for (double& v : c) v -= mu;
        predicted += dot(c, xr) / (norm2(c) * norm2(xr)) / static_cast<double>(rows);
        const Vec bl(ln.bound.begin() + r * D, ln.bound.begin() + (r + 1) * D);
        const Vec br(rms.bound.begin() + r * D, rms.bound.begin() + (r + 1) * D);
        const Vec yl(ln.ref.y.begin() + r * D, ln.ref.y.begin() + (r + 1) * D);
        const Vec yr(rms.ref.y.begin() + r * D, rms.ref.y.begin() + (r + 1) * D);
        tol += (2.0 * 0x1p-8 + norm2(bl) / norm2(yl) + norm2(br) / norm2(yr)) / static_cast<double>(rows);
      }
      rec.near("cosine_" + m, "mean cosine(LayerNorm, RMSNorm), bf16, 256×4096, inputs N(" + fmt(mean) + ", 1)",
               measured, predicted, tol);
      if (mean == 0.0)
        claim(rec, "claim_cosine_0.98_to_0.99", "001: the mean cosine on randn inputs is typically 0.98–0.99",
              fmt(measured), "0.98–0.99", measured >= 0.98 && measured <= 0.99);
      claim(rec, "claim_very_similar_" + m,
            "001: LayerNorm and RMSNorm outputs are very similar (cosine ≥ 0.98), inputs N(" + fmt(mean) + ", 1)",
            fmt(measured), "very similar", measured >= 0.98);
    }
    // "identical outputs when the mean of x is zero": x = (v, −v) has mean 0.
    const std::int64_t Dz = 64;
    Vec v = rng.normals(Dz / 2);
    for (std::int64_t j = 0; j < Dz / 2; ++j) v.push_back(-v[j]);
    const Array xz(DType::f32, v);
    const ForwardRun ln = forward(norms, NormKind::layer_norm, xz, nullptr, nullptr, 1e-5);
    const ForwardRun rms = forward(norms, NormKind::rms_norm, xz, nullptr, nullptr, 1e-5);
    double worst = 0;
    for (std::size_t j = 0; j < v.size(); ++j) {
      const auto i = static_cast<std::int64_t>(j);
      worst = std::max(worst, std::fabs(ln.y.get(i) - rms.y.get(i)) / (ln.bound[j] + rms.bound[j]));
    }
    claim(rec, "claim_identical_at_zero_mean",
          "001: LayerNorm and RMSNorm give identical outputs for zero-mean x (same eps), f32",
          "max |Δ| = " + fmt(worst, 3) + "× the rounding budget", "identical", worst <= 1.0);
  }

  // --- 001: RMSNorm against LayerNorm in time. The text's figures
  // ("~1.06–1.10×" on an A100; "saves roughly 5–10% of the norm's latency",
  // argued from GPU synchronization) are about a GPU this host does not have:
  // reported as not measurable here. What the host can measure is the
  // one-sided claim under them, that dropping a reduction makes RMSNorm
  // cheaper: holds when RMSNorm's median time is below LayerNorm's.
  // Measured as `normkit bench` does: one thread (a second pool on the two
  // shared cores measures contention), warm-ups, calls of the two norms
  // interleaved with the order alternating, so a slow spell of the host
  // falls on both, and medians. Shape: D = 4096 in bf16 as in 001, rows cut
  // from 65,536 to 2,048 (16 MiB in + 16 MiB out per call).
  {
    const std::int64_t rows = 2048, D = 4096;
    Rng rng(37);
    const Array x(DType::bf16, rows, D, rng.normals(rows * D));
    const Array w(DType::bf16, Vec(D, 1.0)), b(DType::bf16, Vec(D, 0.0));
    Array y(DType::bf16, rows, D);
    const int normkit_threads = num_threads();
    set_num_threads(1);
    const int warmups = 3, samples = 31;
    const measure::Interleaved t = measure::time_interleaved(
        {[&] { norms.layer_norm(x.mat(), w.vec(), b.vec(), 1e-5, y.mat(), {}, {}); },
         [&] { norms.rms_norm(x.mat(), w.vec(), 1e-6, y.mat(), {}); }},
        warmups, samples);
    set_num_threads(normkit_threads);
    const double tl = t.median_s(0), tr = t.median_s(1);
    const double bytes = 2.0 * static_cast<double>(rows * D) * 2.0;  // read x, write y, bf16
    rec.value("bench_ln_ms", tl * 1e3);
    rec.row("LayerNorm forward, bf16, 2048×4096, one thread, median of " + std::to_string(samples),
            fmt(tl * 1e3, 4) + " ms (" + fmt(bytes / tl / 1e9, 3) + " GB/s)", "time, reported", std::nullopt);
    rec.value("bench_rms_ms", tr * 1e3);
    rec.row("RMSNorm forward, bf16, 2048×4096, one thread, median of " + std::to_string(samples),
            fmt(tr * 1e3, 4) + " ms (" + fmt(bytes / tr / 1e9, 3) + " GB/s)", "time, reported", std::nullopt);
    const double ratio = tr / tl;
    rec.value("rms_over_ln_time", ratio);
    claim(rec, "claim_rms_cheaper_than_ln", "001: dropping one reduction makes RMSNorm faster than LayerNorm",
          "RMSNorm/LayerNorm time " + fmt(ratio, 3), "faster (one-sided: ratio < 1)", ratio < 1.0);
    rec.row("001: RMSNorm's speed-up over LayerNorm on an A100, ~1.06–1.10×",
            "here " + fmt(1.0 / ratio, 3) + "× on a CPU  → not measurable here", "text: a GPU figure; no GPU on this host",
            std::nullopt);
    rec.row("001: on GPU, dropping one reduction saves roughly 5–10% of the norm's latency",
            "here " + fmt(100.0 * (1.0 - ratio), 3) + "% on a CPU  → not measurable here",
            "text: a GPU figure; no GPU on this host", std::nullopt);
  }

  // --- 001: float16's smallest normal and subnormal ("~6e-8" for both).
  {
    const double min_normal = to_float(half_t{0x0400});
    const double min_subnormal = to_float(half_t{0x0001});
    rec.near("f16_min_normal", "f16 smallest positive normal, to_float(0x0400)", min_normal, 0x1p-14, 0.0);
    rec.near("f16_min_subnormal", "f16 smallest positive subnormal, to_float(0x0001)", min_subnormal, 0x1p-24, 0.0);
    // The conversions agree: these values round-trip, the largest subnormal
    // sits just below the smallest normal, and half the smallest subnormal
    // rounds (to even) to zero.
    const bool round_trip = to_f16(static_cast<float>(min_normal)).bits == 0x0400 &&
                            to_f16(static_cast<float>(min_subnormal)).bits == 0x0001 &&
                            to_float(half_t{0x03ff}) < min_normal && to_f16(0x1p-25f).bits == 0;
    rec.is_true("f16_limits_round_trip", "to_f16 maps them back; 0x03ff < min normal; to_f16(2⁻²⁵) = 0", round_trip,
                "yes");
    claim(rec, "claim_f16_min_normal_6e-8", "001: f16's smallest positive normal is ~6e-8", fmt(min_normal, 4),
          "~6e-8", approx(min_normal, 6e-8, 1e-8));
    claim(rec, "claim_f16_min_subnormal_6e-8", "001: f16's smallest subnormal is ~6e-8", fmt(min_subnormal, 4),
          "~6e-8", approx(min_subnormal, 6e-8, 1e-8));
    // 001: bf16 has float32's exponent range.
    const double bf16_min_normal = to_float(bfloat16_t{0x0080}), bf16_max = to_float(bfloat16_t{0x7f7f});
    const bool same_range = bf16_min_normal == static_cast<double>(std::numeric_limits<float>::min()) &&
                            std::ilogb(bf16_max) == std::ilogb(std::numeric_limits<float>::max());
    rec.value("bf16_min_normal", bf16_min_normal);
    rec.value("bf16_max", bf16_max);
    claim(rec, "claim_bf16_f32_exponent_range", "001: bf16 has the same exponent range as f32",
          "min normal " + fmt(bf16_min_normal, 4) + ", max " + fmt(bf16_max, 4), "same range as f32", same_range);
  }

  // --- Parameter counts: the sizes the API takes for one norm at D = 4096.
  {
    const std::int64_t D = 4096;
    const Array x(DType::f32, 1, D, Vec(D, 1.0)), w(DType::f32, Vec(D, 1.0)), b(DType::f32, Vec(D, 0.0));
    Array y(DType::f32, 1, D);
    norms.layer_norm(x.mat(), w.vec(), b.vec(), 1e-5, y.mat(), {}, {});  // throws unless both take D
    norms.rms_norm(x.mat(), w.vec(), 1e-6, y.mat(), {});
    const double ln_params = static_cast<double>(w.size() + b.size()), rms_params = static_cast<double>(w.size());
    const double ln_total = 64.0 * ln_params, rms_total = 65.0 * rms_params;
    rec.note("ln_params_per_norm_4096", "LayerNorm parameters per norm at D = 4096 (gain + bias)", ln_params,
             "8192: arithmetic on the inputs (the sizes the API accepted)");
    claim(rec, "claim_64_ln_norms_524288", "001: 32 layers × 2 LayerNorms × 8,192 = 524,288 parameters",
          fmt(ln_total, 9), "524,288", ln_total == 524288.0);
    claim(rec, "claim_ln_norm_share_0.006pct", "001: … 0.006% of an 8B model", fmt(100.0 * ln_total / 8e9, 3) + "%",
          "0.006% (within one unit of the last digit)", approx(100.0 * ln_total / 8e9, 0.006, 0.001));
    claim(rec, "claim_65_rms_norms_266240", "001: Llama 3 8B, 65 RMSNorms × 4,096 = 266,240 parameters",
          fmt(rms_total, 9), "266,240", rms_total == 266240.0);
    claim(rec, "claim_rms_norm_share_0.003pct", "001: … about 0.003% of 8 billion",
          fmt(100.0 * rms_total / 8e9, 3) + "%", "0.003%", approx(100.0 * rms_total / 8e9, 0.003, 0.001));
  }

  // --- 001: 30.84M GPU-hours × 3% (normalization) × 5% speed-up ≈ 46,000.
  {
    const double less_time = 30.84e6 * 0.03 * 0.05;                // the norm's time falls by 5%
    const double faster = 30.84e6 * 0.03 * (1.0 - 1.0 / 1.05);     // the norm runs 1.05× as fast
    claim(rec, "claim_gpu_hours_46000_time_5pct_less",
          "001: ~46,000 GPU-hours saved, reading '5% speed-up' as 5% less norm time", fmt(less_time, 6), "~46,000",
          approx(less_time, 46000, 1000));
    claim(rec, "claim_gpu_hours_46000_1.05x",
          "001: ~46,000 GPU-hours saved, reading '5% speed-up' as a 1.05× faster norm", fmt(faster, 6), "~46,000",
          approx(faster, 46000, 1000));
  }
}

}  // namespace normkit::lab
