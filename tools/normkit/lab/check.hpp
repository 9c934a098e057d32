// The lab's checks and what a run of one produces.
//
// A check measures numbers through the norms under test, compares each with
// its expected value or bound, and records both: every comparison becomes a
// row (what was compared, the measured value, the expected value or bound,
// ok or not) and every measured number a named value. A check passes when
// all of its rows are ok. Informational rows (ok = nullopt) report a number
// that has no pass/fail meaning, e.g. whether a text's claim holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lab/norms.hpp"
#include "normkit/tensor.hpp"

namespace normkit::lab {

struct Row {
  std::string what;
  std::string measured;
  std::string expected;
  std::optional<bool> ok;  // nullopt: informational
};

struct Value {
  std::string name;
  double value;
};

struct Result {
  std::string id;
  std::string establishes;
  std::vector<Row> rows;
  std::vector<Value> values;
  bool passed = false;
  double seconds = 0;
  // The value named `name`; throws std::out_of_range if the check has none.
  double value(std::string_view name) const;
};

// Collects the rows and values of one check.
class Recorder {
 public:
  void value(std::string name, double v);
  void row(std::string what, std::string measured, std::string expected, std::optional<bool> ok);

  // |measured − expected| ≤ tol; records `name` = measured.
  bool near(const std::string& name, const std::string& what, double measured, double expected,
            double tol);
  // measured ≤ bound, and measured ≥ bound; record `name` = measured.
  bool at_most(const std::string& name, const std::string& what, double measured, double bound);
  bool at_least(const std::string& name, const std::string& what, double measured, double bound);
  // A yes/no finding; records `name` = 1 or 0.
  bool is_true(const std::string& name, const std::string& what, bool measured, std::string expected);
  // A number reported without a pass/fail criterion.
  void note(const std::string& name, const std::string& what, double measured, std::string context);

  bool all_ok() const;
  const std::vector<Value>& values() const { return values_; }
  std::vector<Row> take_rows() { return std::move(rows_); }
  std::vector<Value> take_values() { return std::move(values_); }

 private:
  std::vector<Row> rows_;
  std::vector<Value> values_;
};

struct Check {
  std::string_view id;
  std::string_view establishes;  // one sentence
  void (*run)(const Norms& norms, Recorder& rec);
  // The figure a reader looks at first, from the run's values: one short
  // phrase for the one-line summary (the rows hold the rest).
  std::string (*headline)(const Result& r) = nullptr;
};

// Every check, in the order the lab runs them.
const std::vector<Check>& all_checks();
// The check with this id, or nullptr.
const Check* find_check(std::string_view id);
// Runs one check against `norms`; an exception inside the check is recorded
// as a failing row, not propagated.
Result run_check(const Check& check, const Norms& norms);

// The headline of a run of `check` ("" when it has none or its values are
// missing, as after an exception).
std::string headline(const Check& check, const Result& r);

// Number formatting shared by the checks and the reports.
std::string fmt(double v, int digits = 6);
std::string fmt_vec(const std::vector<double>& v, int digits = 6);

// The dtypes the lab runs a check in, widest first.
inline constexpr DType kAllDtypes[] = {DType::f64, DType::f32, DType::bf16, DType::f16};

// The checks, one function each (defined in checks_*.cc).
void check_worked_examples(const Norms&, Recorder&);
void check_shift_scale(const Norms&, Recorder&);
void check_feature_axis_causality(const Norms&, Recorder&);
void check_low_precision_reference(const Norms&, Recorder&);
void check_gain_is_trained(const Norms&, Recorder&);
void check_zero_branch_jacobian(const Norms&, Recorder&);
void check_residual_growth(const Norms&, Recorder&);
void check_normalization_geometry(const Norms&, Recorder&);
void check_residual_update_angle(const Norms&, Recorder&);
void check_runtime_arithmetic(const Norms&, Recorder&);
void check_seed_claims(const Norms&, Recorder&);
void check_block_jacobian(const Norms&, Recorder&);   // checks_model.cc
void check_model_causality(const Norms&, Recorder&);  // checks_model.cc

// Shape of feature_axis_causality's input, exposed so that tests can build
// the (T, D) negative control for the same T.
inline constexpr std::int64_t kCausalityB = 2, kCausalityT = 8, kCausalityD = 24;

}  // namespace normkit::lab
