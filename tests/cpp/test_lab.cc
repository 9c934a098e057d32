// The normalization lab: every check passes on normkit's kernels, each
// negative control is caught by the check it targets, the measured values are
// the numbers the texts work out, and the CLI behaves as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lab/check.hpp"
#include "lab/cli.hpp"
#include "lab/norms.hpp"

namespace normkit::lab {
namespace {

// Each check's result on the library, computed once (the timed checks take
// seconds).
const Result& library_result(const std::string& id) {
  static std::map<std::string, Result> cache;
  auto it = cache.find(id);
  if (it == cache.end()) {
    const Check* c = find_check(id);
    EXPECT_NE(c, nullptr) << id;
    it = cache.emplace(id, run_check(*c, library_norms())).first;
  }
  return it->second;
}

std::string failing_rows(const Result& r) {
  std::string s;
  for (const Row& row : r.rows)
    if (row.ok.has_value() && !*row.ok) s += "  " + row.what + ": " + row.measured + " | expected " + row.expected + "\n";
  return s;
}

class EveryCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryCheck, PassesOnTheLibrary) {
  const Result& r = library_result(GetParam());
  EXPECT_TRUE(r.passed) << GetParam() << " failed:\n" << failing_rows(r);
  EXPECT_FALSE(r.rows.empty());
  EXPECT_FALSE(r.values.empty());
}

std::vector<std::string> all_ids() {
  std::vector<std::string> ids;
  for (const Check& c : all_checks()) ids.emplace_back(c.id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Lab, EveryCheck, ::testing::ValuesIn(all_ids()),
                         [](const auto& p) { return p.param; });

TEST(LabChecks, TheContractIdsAreAllPresent) {
  for (const char* id : {"worked_examples", "shift_scale", "feature_axis_causality", "low_precision_reference",
                         "gain_is_trained", "zero_branch_jacobian", "block_jacobian", "model_causality",
                         "residual_growth", "normalization_geometry", "residual_update_angle", "runtime_arithmetic",
                         "seed_claims"})
    EXPECT_NE(find_check(id), nullptr) << id;
  EXPECT_EQ(find_check("no_such_check"), nullptr);
}

// --- Negative controls: substituted as the norms under test, each must make
// its check fail, and fail on the rows that test that property.

bool has_failing_row(const Result& r, const std::string& fragment) {
  for (const Row& row : r.rows)
    if (row.ok.has_value() && !*row.ok && row.what.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(LabNegativeControls, NormOverTimeAndFeaturesFailsCausality) {
  const Result r = run_check(*find_check("feature_axis_causality"), sequence_axis_norms(kCausalityT));
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "bitwise unchanged")) << failing_rows(r);
  for (const char* dt : {"f64", "f32", "bf16", "f16"})
    for (const char* k : {"ln", "rms"})
      EXPECT_LT(r.value(std::string(k) + "_prefix_rows_unchanged_" + dt), kCausalityB * 5.0) << k << " " << dt;
}

TEST(LabNegativeControls, UnpromotedF16FailsTheReferenceCheck) {
  const Result r = run_check(*find_check("low_precision_reference"), unpromoted_f16_norms());
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "[1000,2000,3000,4000] f16")) << failing_rows(r);
  // The library passes the same rows (see EveryCheck), and the check's own
  // demonstration shows the control's output is finite, so isfinite misses it.
  const Result& lib = library_result("low_precision_reference");
  EXPECT_EQ(lib.value("rms_control_passes_isfinite"), 1.0);
  EXPECT_GT(lib.value("rms_control_vs_f32"), 1.4);  // the whole 1.461 is missing
  EXPECT_LT(lib.value("rms_1000_4000_f16_vs_f32"), 1e-3);
  // eps = 1e-8 vanishes in f16: storage-precision arithmetic gives NaN on a
  // constant row, the library (eps in f32) the exact 0; the control fails it.
  EXPECT_EQ(lib.value("ln_flat_f16_eps_1e-8_control_nonfinite"), 4.0);
  EXPECT_EQ(lib.value("ln_flat_f16_eps_1e-8_zero"), 1.0);
  EXPECT_TRUE(has_failing_row(r, "eps = 1e-8, library")) << failing_rows(r);
}

TEST(LabNegativeControls, ControlsOnlyChangeWhatTheyTarget) {
  // The controls break nothing else: the other checks still pass with them,
  // so a failure above is the targeted property, not collateral damage.
  // Statistics over groups of one row are the token-wise norm itself.
  EXPECT_TRUE(run_check(*find_check("shift_scale"), sequence_axis_norms(1)).passed);
  EXPECT_TRUE(run_check(*find_check("residual_update_angle"), sequence_axis_norms(1)).passed);
  // f16 arithmetic is wrong, but still token-wise.
  EXPECT_TRUE(run_check(*find_check("feature_axis_causality"), unpromoted_f16_norms()).passed);
}

// Runs check `id` against `norms`; its headline must not throw on a failing
// result (the CLI prints it for every check).
Result run_against(const std::string& id, const Norms& norms) {
  const Check* c = find_check(id);
  EXPECT_NE(c, nullptr) << id;
  Result r = run_check(*c, norms);
  EXPECT_NO_THROW(static_cast<void>(headline(*c, r))) << id;
  return r;
}

TEST(LabNegativeControls, NormOverTimeAndFeaturesFailsModelCausality) {
  // The model whose norms take statistics over each sequence's (T, D).
  const Result r = run_against("model_causality", sequence_axis_norms(8));
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "stay bitwise the same, pre-norm LayerNorm")) << failing_rows(r);
  EXPECT_TRUE(has_failing_row(r, "stay bitwise the same, post-norm RMSNorm")) << failing_rows(r);
  EXPECT_LT(r.value("pre_ln_earlier_logits_unchanged"), 10.0);
  // The block Jacobian's future blocks see it too.
  const Result b = run_against("block_jacobian", sequence_axis_norms(3));
  EXPECT_FALSE(b.passed);
  EXPECT_TRUE(has_failing_row(b, "for a later token t' > t, pre-norm LayerNorm block")) << failing_rows(b);
}

TEST(LabNegativeControls, ZeroOutputFailsTheCheckedOutputs) {
  const Norms zero = zero_output_norms();
  const Result w = run_against("worked_examples", zero);
  EXPECT_FALSE(w.passed);
  EXPECT_TRUE(has_failing_row(w, "LayerNorm(1,2,3,4)")) << failing_rows(w);
  const Result a = run_against("residual_update_angle", zero);
  EXPECT_FALSE(a.passed);
  EXPECT_TRUE(has_failing_row(a, "branch input RMSNorm(x)")) << failing_rows(a);
  // The timing alone cannot tell a norm that writes zeros from a real one;
  // the oracle comparison of the timed norm can.
  const Result t = run_against("runtime_arithmetic", zero);
  EXPECT_FALSE(t.passed);
  EXPECT_TRUE(has_failing_row(t, "as timed")) << failing_rows(t);
  // A pre-norm block whose norm outputs zeros is x + S(0): its Jacobian is
  // I, not I + J_S·J_N with the backward's J_N.
  const Result b = run_against("block_jacobian", zero);
  EXPECT_FALSE(b.passed);
  EXPECT_TRUE(has_failing_row(b, "J = I + J_S·J_N")) << failing_rows(b);
}

TEST(LabNegativeControls, UncentredLayerNormFailsShiftScale) {
  const Norms uncentred = uncentred_layer_norms();
  const Result r = run_against("shift_scale", uncentred);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "shift removed")) << failing_rows(r);
  EXPECT_GT(r.value("ln_shift_f64"), 0.1);
  // The geometry sees it too: J·1 is no longer 0.
  const Result g = run_against("normalization_geometry", uncentred);
  EXPECT_FALSE(g.passed);
  EXPECT_TRUE(has_failing_row(g, "J·1 = 0")) << failing_rows(g);
  // seed_claims measures the two norms' cosine against cos(x − μ1, x): an
  // uncentred LayerNorm is RMSNorm, cosine ≈ 1 where 1/√2 is exact.
  const Result c = run_against("seed_claims", uncentred);
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(has_failing_row(c, "mean cosine(LayerNorm, RMSNorm), bf16, 256×4096, inputs N(1, 1)")) << failing_rows(c);
  // Still token-wise, so causality holds.
  EXPECT_TRUE(run_against("feature_axis_causality", uncentred).passed);
}

TEST(LabNegativeControls, FrozenGainFailsGainIsTrained) {
  const Norms frozen = frozen_gain_norms();
  const Result r = run_against("gain_is_trained", frozen);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "max |dL/dweight|")) << failing_rows(r);
  EXPECT_TRUE(has_failing_row(r, "dweight against the fp64 oracle")) << failing_rows(r);
  EXPECT_TRUE(has_failing_row(r, "gains changed")) << failing_rows(r);
  // The forward is the library's.
  EXPECT_TRUE(run_against("worked_examples", frozen).passed);
  EXPECT_TRUE(run_against("shift_scale", frozen).passed);
}

TEST(LabNegativeControls, ResidualDroppingFailsResidualGrowth) {
  const Norms dropping = residual_dropping_norms();
  const Result r = run_against("residual_growth", dropping);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "residual RMS at k = 1")) << failing_rows(r);
  EXPECT_NEAR(r.value("residual_rms_k3_f32"), 1.0, 1e-6);  // h = c = [1,1,1,1]: no growth
  const Result z = run_against("zero_branch_jacobian", dropping);
  EXPECT_FALSE(z.passed);
  EXPECT_TRUE(has_failing_row(z, "post-norm, S ≡ 0")) << failing_rows(z);
  // With a real sublayer the post-norm block becomes N(S(x)): its Jacobian
  // is not J_N·(I + J_S). Pre-norm's add is not fused in block(): unchanged.
  const Result b = run_against("block_jacobian", dropping);
  EXPECT_FALSE(b.passed);
  EXPECT_TRUE(has_failing_row(b, "J = J_N·(I + J_S) against finite differences of the block, post-norm LayerNorm"))
      << failing_rows(b);
  for (const Row& row : b.rows)
    if (row.what.find("pre-norm") != std::string::npos) {
      EXPECT_TRUE(row.ok.value_or(true)) << row.what;
    }
  // The plain norms are the library's.
  EXPECT_TRUE(run_against("worked_examples", dropping).passed);
  EXPECT_TRUE(run_against("shift_scale", dropping).passed);
}

TEST(LabNegativeControls, EpsOutsideTheRootFailsGeometry) {
  const Norms outside = eps_outside_root_norms();
  const Result r = run_against("normalization_geometry", outside);
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(has_failing_row(r, "at x = 0")) << failing_rows(r);
  EXPECT_TRUE(has_failing_row(r, "radial r")) << failing_rows(r);
  EXPECT_TRUE(has_failing_row(r, "LayerNorm ‖y‖ (√D")) << failing_rows(r);  // radius √D·σ/(σ + eps)
  // At eps = 0 the control is the right norm: those rows still pass.
  for (const Row& row : r.rows)
    if (row.what.find("eps = 0,") != std::string::npos) {
      EXPECT_TRUE(row.ok.value_or(true)) << row.what;
    }
  EXPECT_TRUE(run_against("feature_axis_causality", outside).passed);
}

TEST(LabRows, ArithmeticOnTheInputsIsReportedNotChecked) {
  // Rows that no kernel output enters cannot fail, so they are informational.
  for (const auto& [id, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"worked_examples", "learned scalars"},
           {"residual_update_angle", "angle between x and x + u"},
           {"residual_growth", "residual RMS at k = 0"},
           {"runtime_arithmetic", "speed-up ceiling if a 25.5%"},
           {"seed_claims", "LayerNorm parameters per norm"}}) {
    int found = 0;
    for (const Row& row : library_result(id).rows)
      if (row.what.find(fragment) != std::string::npos) {
        ++found;
        EXPECT_FALSE(row.ok.has_value()) << id << ": " << row.what;
      }
    EXPECT_GT(found, 0) << id << " has no row " << fragment;
  }
}

// --- The measured values are the texts' numbers.

TEST(LabValues, WorkedExamples) {
  const Result& r = library_result("worked_examples");
  const double ln[] = {-1.342, -0.447, 0.447, 1.342}, rms[] = {0.365, 0.730, 1.095, 1.461};
  for (const char* dt : {"f64", "f32"})
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(r.value(std::string("ln_1234_") + dt + "_" + std::to_string(j)), ln[j], 5e-4);
      EXPECT_NEAR(r.value(std::string("rms_1234_") + dt + "_" + std::to_string(j)), rms[j], 5e-4);
    }
  EXPECT_NEAR(r.value("ln_123_f32_0"), -1.225, 5e-4);
  EXPECT_NEAR(r.value("rms_123_f32_2"), 1.389, 5e-4);
  EXPECT_NEAR(r.value("ln_2244_f32_0"), -1.0, 1e-5);
  EXPECT_NEAR(r.value("ln_1_3_f32_0"), -1.0, 1e-5);
  EXPECT_NEAR(r.value("ln_101_103_f32_1"), 1.0, 1e-5);
  EXPECT_EQ(r.value("mean_101_103_f32"), 102.0);
  EXPECT_NEAR(r.value("readout_f32"), 100.0, 1e-4);
  EXPECT_NEAR(r.value("rms_of_3_4_f32"), 3.536, 5e-4);
  EXPECT_EQ(r.value("rms_statistics_2x5x8"), 10.0);
  EXPECT_EQ(r.value("rms_params_2x5x8"), 8.0);
  EXPECT_EQ(r.value("ln_params_2x5x8"), 16.0);
  EXPECT_EQ(r.value("rms_gain_shared_by_tokens"), 1.0);
}

TEST(LabValues, ShiftAndScale) {
  const Result& r = library_result("shift_scale");
  EXPECT_LT(r.value("ln_shift_f32"), 1e-5);  // removed
  EXPECT_GT(r.value("rms_shift_f32"), 0.1);  // kept
  EXPECT_GT(r.value("ln_eps_effect_scale_2^-8_f64"), 1e-3);  // visible at small scale
  EXPECT_LT(r.value("ln_eps_effect_scale_4_f64"), 1e-6);
}

TEST(LabValues, BlockJacobians) {
  const Result& b = library_result("block_jacobian");
  for (const char* p : {"pre", "post"})
    for (const char* k : {"ln", "rms"})
      for (const char* s : {"attn", "mlp"}) {
        const std::string id = std::string(p) + "_" + k + "_" + s;
        EXPECT_LT(b.value(id + "_jacobian"), 1e-7) << id;
        EXPECT_EQ(b.value(id + "_future_blocks"), 0.0) << id;
      }
  // The sublayer is far from zero: its part of J is of order 1.
  EXPECT_GT(b.value("pre_ln_mlp_branch_norm"), 1.0);
  EXPECT_GT(b.value("post_ln_mlp_sublayer_norm"), 1.0);
  const Result& c = library_result("model_causality");
  EXPECT_EQ(c.value("post_rms_earlier_logits_unchanged"), 10.0);
  EXPECT_EQ(c.value("post_rms_later_logits_changed"), 6.0);
}

TEST(LabValues, ZeroBranchAndResidualGrowth) {
  const Result& z = library_result("zero_branch_jacobian");
  const double post[] = {-1.34164, -0.44721, 0.44721, 1.34164};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(z.value("post_norm_y_f64_" + std::to_string(j)), post[j], 1e-5);
  EXPECT_LT(z.value("post_norm_jacobian_ones_f64"), 1e-12);
  // LayerNorm keeps D − 2 directions at gain 1/σ: ‖J‖_F ≈ √(D − 2)/σ = √2/√1.25.
  EXPECT_NEAR(z.value("post_norm_jacobian_norm_f64"), std::sqrt(2.0 / 1.25), 1e-4);

  const Result& g = library_result("residual_growth");
  EXPECT_NEAR(g.value("residual_rms_k0_f32"), 2.739, 5e-4);
  EXPECT_NEAR(g.value("residual_rms_k1_f32"), 3.674, 5e-4);
  EXPECT_NEAR(g.value("residual_rms_k3_f32"), 5.612, 5e-4);
  for (const char* k : {"0", "1", "2", "3"}) EXPECT_NEAR(g.value(std::string("ln_xk_k") + k + "_f32_0"), -1.342, 5e-4);
}

TEST(LabValues, GeometryAndAngles) {
  const Result& g = library_result("normalization_geometry");
  EXPECT_EQ(g.value("rms_rank_eps0_f64"), 5.0);  // D − 1, D = 6
  EXPECT_EQ(g.value("ln_rank_eps0_f64"), 4.0);   // D − 2
  EXPECT_EQ(g.value("rms_rank_eps0.25_f64"), 6.0);
  EXPECT_NEAR(g.value("ln_output_radius_eps0_f64"), std::sqrt(6.0), 1e-12);  // on the sphere of radius √D
  EXPECT_LT(g.value("ln_output_radius_eps0.25_f64"), std::sqrt(6.0) - 0.1);   // inside it
  const Result& a = library_result("residual_update_angle");
  EXPECT_NEAR(a.value("angle_c1_f32"), 45.0, 1e-9);
  EXPECT_NEAR(a.value("angle_c10_f32"), 5.71, 5e-3);
  // ops.hpp's f64 bound at D = 2 with |x̂| = √2, rstd·mean|x| = √2/2.
  const double f64_bound = 0x1p-53 * std::sqrt(2.0) + 4 * (std::sqrt(2.0) + 2) * 0x1p-53 * 1.5 * std::sqrt(2.0);
  EXPECT_NEAR(a.value("rms_x_c1_f64_0"), std::sqrt(2.0), f64_bound);
  EXPECT_NEAR(a.value("rms_x_c10_f64_0"), std::sqrt(2.0), f64_bound);
}

TEST(LabValues, RuntimeArithmeticAndClaims) {
  const Result& rt = library_result("runtime_arithmetic");
  EXPECT_NEAR(rt.value("amdahl_free_at_25_5pct"), 1.342, 5e-4);
  EXPECT_NEAR(rt.value("amdahl_10pct_2x"), 1.053, 5e-4);
  const double share = rt.value("rms_time_share");
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 1.0);
  EXPECT_NEAR(rt.value("rms_amdahl_ceiling"), 1.0 / (1.0 - share), 1e-12);
  // A norm does ~1 FLOP per byte (RMSNorm forward 4 FLOPs per 8 bytes in
  // f32, backward 9 per 12; the weights and statistics move a little more),
  // the step's matmuls far more, and the norm runs at a far lower FLOP rate.
  EXPECT_GT(rt.value("rms_norm_flops_per_byte"), 0.5);
  EXPECT_LT(rt.value("rms_norm_flops_per_byte"), 0.8);
  EXPECT_GT(rt.value("rms_matmul_flops_per_byte"), 10.0);
  EXPECT_LT(rt.value("rms_norm_gflops"), rt.value("rms_rest_gflops"));

  const Result& c = library_result("seed_claims");
  EXPECT_EQ(c.value("f16_min_normal"), 6.103515625e-05);
  EXPECT_EQ(c.value("f16_min_subnormal"), 5.9604644775390625e-08);
  EXPECT_EQ(c.value("claim_f16_min_normal_6e-8_holds"), 0.0);  // the text's error
  EXPECT_EQ(c.value("claim_f16_min_subnormal_6e-8_holds"), 1.0);
  EXPECT_EQ(c.value("claim_64_ln_norms_524288_holds"), 1.0);
  EXPECT_EQ(c.value("claim_65_rms_norms_266240_holds"), 1.0);
  EXPECT_EQ(c.value("ln_params_per_norm_4096"), 8192.0);
  // Zero-mean randn: the cosine is ≈ 1 − O(1/D), above the text's 0.98–0.99;
  // with mean 1 it is ≈ 1/√2.
  EXPECT_GT(c.value("cosine_zero_mean"), 0.999);
  EXPECT_NEAR(c.value("cosine_mean_1"), 1.0 / std::sqrt(2.0), 0.02);
  // A claim that does not hold does not fail the check.
  EXPECT_TRUE(c.passed);
  // RMSNorm against LayerNorm in time: the one-sided claim has a verdict
  // that follows the measured ratio; the A100 figures are not measurable here.
  EXPECT_EQ(c.value("claim_rms_cheaper_than_ln_holds"), c.value("rms_over_ln_time") < 1.0 ? 1.0 : 0.0);
  int not_measurable = 0;
  for (const Row& row : c.rows)
    if (row.measured.find("not measurable here") != std::string::npos) {
      ++not_measurable;
      EXPECT_FALSE(row.ok.has_value()) << row.what;
    }
  EXPECT_EQ(not_measurable, 2);
}

// --- The CLI, in process.

int cli(const std::vector<std::string>& args, std::string* out, std::string* err = nullptr) {
  std::ostringstream o, e;
  const int rc = run_cli(args, o, e, library_norms());
  *out = o.str();
  if (err) *err = e.str();
  return rc;
}

TEST(LabCli, ListHelpAndUnknownIds) {
  std::string out, err;
  EXPECT_EQ(cli({"--list"}, &out), 0);
  for (const Check& c : all_checks()) EXPECT_NE(out.find(std::string(c.id) + "\t"), std::string::npos) << c.id;
  EXPECT_EQ(cli({"--help"}, &out), 0);
  EXPECT_NE(out.find("usage: normkit lab"), std::string::npos);
  EXPECT_EQ(cli({"worked_examples", "nope"}, &out, &err), 2);
  EXPECT_NE(err.find("unknown check id 'nope'"), std::string::npos) << err;
  EXPECT_TRUE(out.empty());  // nothing ran
  EXPECT_EQ(cli({"--frobnicate"}, &out, &err), 2);
  EXPECT_EQ(cli({"--report"}, &out, &err), 2);
}

TEST(LabCli, SubsetRunsOnlyThoseChecks) {
  std::string out;
  EXPECT_EQ(cli({"residual_update_angle", "worked_examples"}, &out), 0);
  EXPECT_NE(out.find("[PASS] residual_update_angle"), std::string::npos);
  EXPECT_NE(out.find("[PASS] worked_examples"), std::string::npos);
  EXPECT_EQ(out.find("shift_scale"), std::string::npos);
  EXPECT_NE(out.find("2 of 2 checks passed"), std::string::npos);
}

TEST(LabCli, SummaryIsOneLinePerCheckWithItsHeadline) {
  std::string out;
  ASSERT_EQ(cli({}, &out), 0);
  std::size_t lines = 0;
  for (const char ch : out) lines += ch == '\n' ? 1 : 0;
  EXPECT_EQ(lines, all_checks().size() + 1) << out;
  // Every headline names values that its check records: a renamed value
  // would leave the headline empty.
  for (const Check& c : all_checks()) {
    const Result r = run_check(c, library_norms());
    EXPECT_FALSE(headline(c, r).empty()) << c.id;
  }
  std::string verbose;
  ASSERT_EQ(cli({"-v", "worked_examples"}, &verbose), 0);
  EXPECT_NE(verbose.find("| expected"), std::string::npos) << verbose;
}

TEST(LabCli, FailingCheckGivesExitStatusOne) {
  std::ostringstream o, e;
  EXPECT_EQ(run_cli({"feature_axis_causality"}, o, e, sequence_axis_norms(kCausalityT)), 1);
  EXPECT_NE(o.str().find("[FAIL] feature_axis_causality"), std::string::npos);
  // The summary line names the comparison that failed.
  EXPECT_NE(o.str().find("expected"), std::string::npos) << o.str();
}

TEST(LabCli, MarkdownReport) {
  const std::string path = ::testing::TempDir() + "lab_report_test.md";
  std::string out;
  EXPECT_EQ(cli({"--report", path, "residual_growth"}, &out), 0);
  std::ifstream f(path);
  std::stringstream md;
  md << f.rdbuf();
  EXPECT_NE(md.str().find("# normkit lab report"), std::string::npos);
  EXPECT_NE(md.str().find("## residual_growth"), std::string::npos);
  EXPECT_NE(md.str().find("| quantity | measured | expected |"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace normkit::lab
