// normkit profile — one training step of the model (model/), op by op.
//
// An op observer (normkit/observer.hpp) records every op of a step: the
// library reports the norms, the model its matrix products, attention,
// element-wise ops, embedding and loss (model/observe.hpp). A step is
// forward, loss and backward (no optimizer update: it is the same for every
// norm). Each op is counted analytically (measure/op_cost.hpp) and timed as
// the median over repeated steps after warm-up; ops of the same name and
// label (every block's "mlp.fc", say) are summed into one row.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "measure/op_cost.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "normkit/observer.hpp"

namespace normkit::profile {

// The operator classes of the tables, after Ivanov et al. 2021's (tensor
// contractions, statistical normalizations, element-wise), with attention's
// score and context products and softmax split out of the first two, and
// the model's ends (embedding, LM head, loss) apart.
enum class OpClass : std::uint8_t { matmul, attention, normalization, elementwise, ends };
inline constexpr OpClass kClasses[] = {OpClass::matmul, OpClass::attention, OpClass::normalization,
                                       OpClass::elementwise, OpClass::ends};
const char* class_name(OpClass c);

// The class of a record: the library's norms are normalization; by label,
// "attn.scores*", "attn.softmax", "attn.context*" attention and "embedding*",
// "head*", "loss*" the model's ends; other matrix products are matmul; the
// rest element-wise.
OpClass class_of(const OpRecord& r);

// Records every op reported, in order. Safe to share between threads.
class Recorder : public OpObserver {
 public:
  void on_op(const OpRecord& r) override;
  std::vector<OpRecord> take();  // the records so far, and a fresh start

 private:
  std::mutex mutex_;
  std::vector<OpRecord> records_;
};

// Installs an observer for its lifetime, and puts back the one before.
class ScopedObserver {
 public:
  explicit ScopedObserver(OpObserver* o) noexcept : previous_(set_op_observer(o)) {}
  ~ScopedObserver() { set_op_observer(previous_); }
  ScopedObserver(const ScopedObserver&) = delete;
  ScopedObserver& operator=(const ScopedObserver&) = delete;

 private:
  OpObserver* previous_;
};

struct StepConfig {
  model::Config model;
  std::int64_t batch = 1, seq = 1;
  bool fused = true;  // false: each add+norm as an add, then the plain norm (and likewise backward)
  std::uint64_t seed = 1;
};

// The norm table a model uses for `fused`: normkit's own, or one whose
// add+norm ops run as two calls, an add (reported as op "add", label
// "residual.unfused") and the plain norm; backward likewise.
model::NormOps norm_ops(bool fused);

// A model at a configuration with random tokens and targets: run() is one
// forward, loss and backward.
class Step {
 public:
  explicit Step(const StepConfig& c);
  // The same with the model's norms from `norms` (the lab's implementation
  // under test); c.fused is then not used.
  Step(const StepConfig& c, model::NormOps norms);
  void run();
  const StepConfig& config() const { return config_; }

 private:
  StepConfig config_;
  model::Model<float> model_;
  std::vector<std::int32_t> tokens_, targets_;
};

// One row of a table: the ops of one name and label, or a class.
struct Row {
  std::string name;   // "matmul mlp.fc", "add_layer_norm"; or a class name
  OpClass cls = OpClass::matmul;
  std::int64_t calls = 0;  // per step
  double flops = 0;
  double bytes = 0;
  double seconds = 0;  // per step: the sum of its ops' median times
  double flop_share = 0, time_share = 0;  // of the step's recorded ops, 0..1
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

struct StepProfile {
  std::vector<Row> ops;      // by name and label, in order of first appearance
  std::vector<Row> classes;  // every class, in kClasses order
  double flops = 0, bytes = 0;
  double recorded_s = 0;     // the sum of every op's median time
  double wall_profiled_s = 0, wall_unprofiled_s = 0;  // medians of whole steps with and without the observer
  std::int64_t records_per_step = 0;
  int repeats = 0;
  std::vector<std::string> unknown_ops;  // names op_cost does not count (0 FLOPs, 0 bytes)
};

// Each op's time over the steps: the median (the profile), or the fastest,
// what the op takes undisturbed. On a shared machine the step's long matrix
// products absorb the preemptions that its short norm calls mostly escape,
// so a share from medians moves with the load; the lab's bound uses the
// fastest.
enum class Statistic : std::uint8_t { median, fastest };

// The tables from the records of `repeats` steps (each step's records in the
// same order: a model step is deterministic).
StepProfile summarize(const std::vector<std::vector<OpRecord>>& steps, Statistic stat = Statistic::median);

// Runs `warmup` steps, then `repeats` pairs of steps in alternating order:
// one with a Recorder installed, one with no observer (the wall time the
// profile must agree with); the wall times are medians.
StepProfile profile_step(Step& step, int warmup, int repeats, Statistic stat = Statistic::median);

}  // namespace normkit::profile
