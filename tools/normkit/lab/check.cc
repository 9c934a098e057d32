#include "lab/check.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <stdexcept>

namespace normkit::lab {

double Result::value(std::string_view name) const {
  for (const Value& v : values)
    if (v.name == name) return v.value;
  throw std::out_of_range("check " + id + " has no value named " + std::string(name));
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fmt_vec(const std::vector<double>& v, int digits) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += fmt(v[i], digits);
  }
  return s + "]";
}

void Recorder::value(std::string name, double v) {
  // Names are keys of a JSON object: a repeated one would hide a value.
  for (const Value& old : values_)
    if (old.name == name) row("value name " + name + " is unique", "repeated", "unique", false);
  values_.push_back({std::move(name), v});
}

void Recorder::row(std::string what, std::string measured, std::string expected,
                   std::optional<bool> ok) {
  rows_.push_back({std::move(what), std::move(measured), std::move(expected), ok});
}

bool Recorder::near(const std::string& name, const std::string& what, double measured,
                    double expected, double tol) {
  // Written so that a NaN measurement fails.
  const bool ok = std::fabs(measured - expected) <= tol;
  value(name, measured);
  row(what, fmt(measured), fmt(expected) + " ± " + fmt(tol, 2), ok);
  return ok;
}

bool Recorder::at_most(const std::string& name, const std::string& what, double measured,
                       double bound) {
  const bool ok = measured <= bound;
  value(name, measured);
  row(what, fmt(measured, 3), "≤ " + fmt(bound, 3), ok);
  return ok;
}

bool Recorder::at_least(const std::string& name, const std::string& what, double measured,
                        double bound) {
  const bool ok = measured >= bound;
  value(name, measured);
  row(what, fmt(measured, 3), "≥ " + fmt(bound, 3), ok);
  return ok;
}

bool Recorder::is_true(const std::string& name, const std::string& what, bool measured,
                       std::string expected) {
  value(name, measured ? 1.0 : 0.0);
  row(what, measured ? "yes" : "no", std::move(expected), measured);
  return measured;
}

void Recorder::note(const std::string& name, const std::string& what, double measured,
                    std::string context) {
  value(name, measured);
  row(what, fmt(measured), std::move(context), std::nullopt);
}

bool Recorder::all_ok() const {
  for (const Row& r : rows_)
    if (r.ok.has_value() && !*r.ok) return false;
  return true;
}

namespace {

// The value `name` of r with three significant digits.
std::string v(const Result& r, std::string_view name) { return fmt(r.value(name), 3); }

// How many of the values named claim_*_holds are 1.
std::string claims_holding(const Result& r) {
  int n = 0, held = 0;
  for (const Value& x : r.values)
    if (x.name.starts_with("claim_") && x.name.ends_with("_holds")) {
      ++n;
      held += x.value == 1 ? 1 : 0;
    }
  return std::to_string(held) + " of " + std::to_string(n) + " claims hold here (-v lists them)";
}

}  // namespace

std::string headline(const Check& check, const Result& r) {
  if (!check.headline) return "";
  try {
    return check.headline(r);
  } catch (const std::out_of_range&) {
    return "";
  }
}

const std::vector<Check>& all_checks() {
  static const std::vector<Check> checks = {
      {"worked_examples",
       "The texts' hand-worked vectors come out of the library as the texts computed them, in every "
       "dtype.",
       check_worked_examples,
       [](const Result& r) {
         return "LayerNorm(1,2,3,4) = [" + v(r, "ln_1234_f32_0") + ", " + v(r, "ln_1234_f32_1") + ", " +
                v(r, "ln_1234_f32_2") + ", " + v(r, "ln_1234_f32_3") + "] in f32";
       }},
      {"shift_scale",
       "LayerNorm ignores a common shift and RMSNorm does not; both ignore a positive scale up to the "
       "effect of eps, and a negative scale flips the sign.",
       check_shift_scale,
       [](const Result& r) {
         return "a shift moves RMSNorm's output by " + v(r, "rms_shift_f32") + ", LayerNorm's by " +
                v(r, "ln_shift_f32") + " (f32)";
       }},
      {"feature_axis_causality",
       "Each token's output depends only on that token's features, so changing later positions "
       "leaves earlier outputs bitwise unchanged, while a norm over (T, D) is caught leaking.",
       check_feature_axis_causality,
       [](const Result& r) {
         return v(r, "ln_prefix_rows_unchanged_f32") + " earlier rows bitwise unchanged; a (T, D) norm changes " +
                v(r, "ln_control_prefix_rows_leaked_f32");
       }},
      {"low_precision_reference",
       "f16 and bf16 outputs agree with an f32 reference even where squares overflow f16, and a "
       "norm that squares in f16 returns a finite but wrong vector that an isfinite check misses.",
       check_low_precision_reference,
       [](const Result& r) {
         return "f16 past its squares' range: off by " + v(r, "rms_1000_4000_f16_vs_f32") +
                "; squaring in f16: off by " + v(r, "rms_control_vs_f32");
       }},
      {"gain_is_trained",
       "The backward gives the gain (and LayerNorm's bias) their gradient, an SGD step changes them "
       "and lowers the loss, and the next forward uses the new values.",
       check_gain_is_trained,
       [](const Result& r) {
         return "an SGD step on the gain: loss " + v(r, "ln_loss_before_f32") + " -> " + v(r, "ln_loss_after_f32") +
                " (LayerNorm, f32)";
       }},
      {"zero_branch_jacobian",
       "With a zero sublayer a post-norm block still normalizes: it returns the text's vector for [1,2,3,4], "
       "its Jacobian annihilates the all-ones direction and a common shift disappears.",
       check_zero_branch_jacobian,
       [](const Result& r) {
         return "post-norm |J·1| = " + v(r, "post_norm_jacobian_ones_f32") + " (f32)";
       }},
      {"block_jacobian",
       "With the model's real attention and MLP sublayers, a pre-norm block's Jacobian is I + J_S·J_N and a "
       "post-norm block's is J_N·(I + J_S), against finite differences of the block, and no output reads a "
       "later token.",
       check_block_jacobian,
       [](const Result& r) {
         return "pre-norm MLP block: |J − (I + J_S·J_N)| = " + v(r, "pre_ln_mlp_jacobian") + " with ‖J_S·J_N‖_F = " +
                v(r, "pre_ln_mlp_branch_norm");
       }},
      {"model_causality",
       "In the whole language model, changing later tokens leaves every earlier position's logits bitwise "
       "unchanged, and a norm over (T, D) is caught.",
       check_model_causality,
       [](const Result& r) {
         return v(r, "pre_ln_earlier_logits_unchanged") + " of 10 earlier positions unchanged (pre-norm LayerNorm)";
       }},
      {"residual_growth",
       "A pre-norm residual stream can grow while every normalized branch input stays the same.",
       check_residual_growth,
       [](const Result& r) {
         return "residual RMS " + v(r, "residual_rms_k0_f64") + " -> " + v(r, "residual_rms_k3_f64") +
                ", branch input unchanged";
       }},
      {"normalization_geometry",
       "The backward's Jacobians match finite differences and the closed form, erase exactly the "
       "directions the geometry predicts (rank D−1 for RMSNorm, D−2 for LayerNorm), and eps turns "
       "the radial null direction into a gain of eps/s³.",
       check_normalization_geometry,
       [](const Result& r) {
         return "rank of J at D = 6: RMSNorm " + v(r, "rms_rank_eps0_f64") + ", LayerNorm " + v(r, "ln_rank_eps0_f64");
       }},
      {"residual_update_angle",
       "A fixed orthogonal update turns a larger residual less (45° at c = 1, 5.71° at c = 10) while "
       "the branch sees the same normalized input.",
       check_residual_update_angle,
       [](const Result& r) {
         return "after RMSNorm the update still turns " + v(r, "final_norm_angle_c1_f32") + "° at c = 1, " +
                v(r, "final_norm_angle_c10_f32") + "° at c = 10";
       }},
      {"runtime_arithmetic",
       "Amdahl's law turns a norm's time share into a speed-up ceiling; on this machine the norms' "
       "share of a model training step's time, as `normkit profile` measures it, is many times (at "
       "least 2×) their share of the FLOPs, timing norms whose output matches the oracle.",
       check_runtime_arithmetic,
       [](const Result& r) {
         return "time share / FLOP share of the norm: LayerNorm " + v(r, "ln_time_over_flop_share") + "x, RMSNorm " +
                v(r, "rms_time_over_flop_share") + "x";
       }},
      {"seed_claims",
       "Each quantitative claim of the texts that this machine can measure is measured and reported "
       "as holding or not.",
       check_seed_claims,
       claims_holding},
  };
  return checks;
}

const Check* find_check(std::string_view id) {
  for (const Check& c : all_checks())
    if (c.id == id) return &c;
  return nullptr;
}

Result run_check(const Check& check, const Norms& norms) {
  Result r;
  r.id = check.id;
  r.establishes = check.establishes;
  Recorder rec;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    check.run(norms, rec);
  } catch (const std::exception& e) {
    rec.row("the check ran to completion", std::string("threw: ") + e.what(), "no exception", false);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Every value is a measured number; NaN or Inf means the measurement broke
  // (and JSON could not carry it).
  for (const Value& v : rec.values())
    if (!std::isfinite(v.value)) rec.row("value " + v.name + " is finite", fmt(v.value), "a finite number", false);
  r.passed = rec.all_ok();
  r.rows = rec.take_rows();
  r.values = rec.take_values();
  return r;
}

}  // namespace normkit::lab
