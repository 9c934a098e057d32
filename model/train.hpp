// normkit model — the training loop: AdamW, warmup then cosine decay,
// optional gradient clipping, validation, per-step metrics and divergence.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/text_data.hpp"

namespace normkit::model {

struct TrainOptions {
  std::int64_t steps = 200;
  std::int64_t batch = 16;
  std::int64_t seq = 64;      // window length, <= the model's context
  double lr = 1e-3;           // peak learning rate
  double min_lr_ratio = 0.1;  // the cosine ends at lr·min_lr_ratio
  std::int64_t warmup = 0;    // linear warmup steps; 0: none
  AdamWConfig adamw;
  double clip = 1.0;  // rescale the gradient to this global norm when above it; 0: no clipping
  std::uint64_t seed = 1;  // batch sampling (the model's init takes its own call)
  std::int64_t eval_every = 50;    // validation loss every K steps and at the last
  std::int64_t eval_windows = 64;  // validation windows: the first ones of the split, back to back
  double max_loss = 0;             // divergence bound on the training loss; 0: 3·ln(vocab)
};

// What one step measured, before its update.
struct StepReport {
  std::int64_t step = 0;  // 0-based
  double lr = 0;
  double loss = 0;
  double grad_norm = 0;                  // global, before clipping
  std::vector<double> block_grad_norms;  // per block
  std::vector<NormInput> norm_inputs;    // RMS of each norm's input in this step's forward
  double update_ratio = 0;               // ||Δθ|| / ||θ|| of this step's update
  std::optional<double> val_loss;
};

struct TrainResult {
  std::int64_t steps_done = 0;  // updates applied
  bool diverged = false;
  std::string message;  // why the run stopped early, naming the step; empty when it did not
  double first_loss = 0;
  double last_loss = 0;
  std::optional<double> last_val_loss;
};

// The 2-norm of the gradient of each block's parameters (per block) and of
// all parameters (total), from m.grads().
struct GradNorms {
  std::vector<double> per_block;
  double total = 0;
};
GradNorms grad_norms(const Model<float>& m);

// Mean cross-entropy over the first `windows` back-to-back windows of
// `tokens` (as many as fit), evaluated `batch` at a time.
double evaluate(Model<float>& m, std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq,
                std::int64_t windows);

// Trains m (already initialized) on data's training split. Calls on_step
// after each step's metrics are complete. Divergence — a non-finite loss or
// gradient, or a loss above the bound — stops the run before that step's
// update, with diverged set and a message that names the step.
TrainResult train(Model<float>& m, const TextData& data, const TrainOptions& o,
                  const std::function<void(const StepReport&)>& on_step = {});

}  // namespace normkit::model
