// normkit study — the texts' claims about normalization inside a model, each
// measured as a table on the model of model/.
//
// Every table trains or differentiates small byte-level models whose norms
// are normkit's kernels, and compares what it measured with what the texts
// (and the papers they cite) say. A verdict is "holds", "does not hold",
// "unclear" (the seeds disagree) or "negligible" (they agree, on an effect
// too small to matter), with the rule that decided it written beside it;
// every figure says how many seeds it rests on.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/text_data.hpp"
#include "model/train.hpp"

namespace normkit::study {

// The sizes of one whole study.
struct Preset {
  std::string name;  // "quick", "full", or "tiny" for the tests
  // The model every table starts from (placement and norm vary per table).
  std::int64_t width = 64, heads = 4, ffn = 256, context = 32;
  std::int64_t batch = 8;
  // Gradients at initialization: these depths, this many seeds each.
  std::vector<std::int64_t> grad_depths = {6, 12, 24};
  int grad_seeds = 3;
  // The training tables: depth, steps and seeds per configuration.
  std::int64_t depth = 6;
  std::int64_t steps = 300;
  int seeds = 3;
  double base_lr = 3e-3;  // the final-norm and LayerNorm/RMSNorm tables
  std::int64_t warmup = 60;
  // The warmup probe: the learning rates tried, in order, and its steps.
  std::vector<double> probe_lrs = {3e-3, 1e-2, 3e-2};
  std::int64_t probe_steps = 150;
  // The unnormalized stack: depths of the initial activation profile, and
  // the depth and steps trained.
  std::vector<std::int64_t> stack_depths = {6, 12, 24};
  std::int64_t stack_train_depth = 12;
  std::int64_t stack_steps = 200;
};

Preset quick_preset();  // every table in minutes on 2 cores
Preset full_preset();   // more seeds, depths and steps
Preset tiny_preset();   // seconds: for the tests

// What one training run measured.
struct Run {
  std::string label;
  model::Config config;
  model::TrainOptions train;
  std::uint64_t seed = 0;
  std::vector<double> loss;  // training loss per step done
  bool diverged = false;
  std::string message;        // why it stopped early; empty when it did not
  std::int64_t steps_done = 0;
  double val_loss = 0;        // at the last step; NaN when the run diverged first
  double tail_loss = 0;       // mean training loss over the last 10% of steps done
  double median_step_ms = 0;  // wall time per step, median over the steps
  // After training, on the validation windows: the residual stream's RMS by
  // sublayer (model::Model::stream_rms) and the spread of the LM head's
  // input over tokens (std/mean of the per-token RMS).
  std::vector<double> stream_rms;
  double head_rms_cv = 0;
};

// Trains config from init(seed) with o (its seed set to seed too).
Run train_run(const std::string& label, const model::Config& config, model::TrainOptions o, std::uint64_t seed,
              const model::TextData& data);

// One forward and backward at initialization on the first `batch` training
// windows: the per-block gradient norms and the stream's RMS by sublayer.
struct AtInit {
  std::vector<double> block_grads, stream_rms;
};
AtInit at_init(const model::Config& config, std::uint64_t seed, const model::TextData& data, std::int64_t batch);

// Gradients at initialization: for each init scheme, placement and depth,
// the per-block gradient norm (geometric mean over seeds) of one forward and
// backward on the first `batch` training windows.
struct GradientProfile {
  model::InitScheme init;
  model::Placement placement;
  std::int64_t depth;
  std::vector<double> per_block;       // geometric mean over seeds
  std::vector<double> first_over_last;  // per seed: block 0's norm / the last block's
};

// The six tables.
struct Verdict {
  std::string claim;    // what the texts say, in a line
  std::string source;   // where they say it
  std::string outcome;  // "holds", "does not hold", "unclear", "negligible"
  std::string rule;     // how the outcome was decided
  std::string measured;  // the figures the rule read
};

struct Table {
  std::string id;     // "gradients_at_init", …
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<Verdict> verdicts;
  std::vector<std::string> notes;  // what the reader must know to read it
};

struct Study {
  Preset preset;
  std::string data_path;
  std::int64_t vocab = 0, train_tokens = 0, val_tokens = 0;
  double seconds = 0;
  std::vector<GradientProfile> gradients;
  double stress_lr = 0;      // the warmup probe's choice
  std::string stress_reason;
  // Every training run, in the order it ran; a deque, so that the tables'
  // pointers to earlier runs stay valid as runs are added.
  std::deque<Run> runs;
  struct StackProfile {
    model::InitScheme init;
    model::Placement placement;
    std::int64_t depth;
    std::vector<double> stream_rms;  // at initialization, geometric mean over seeds
  };
  std::vector<StackProfile> stack_init;
  std::vector<Table> tables;
};

// The number of training steps the preset runs (for the time estimate).
std::int64_t planned_steps(const Preset& p);

// Runs every table. progress(text, fraction done) is called before each run.
Study run_study(const Preset& p, const model::TextData& data, const std::string& data_path,
                const std::function<void(const std::string&, double)>& progress = {});

// The report: Markdown (with the PNG names that plot_study.py draws from the
// JSON), the JSON of every measured number, and a screenful for the terminal.
std::string markdown(const Study& s, bool with_plots);
std::string json(const Study& s);
std::string summary(const Study& s);

}  // namespace normkit::study
