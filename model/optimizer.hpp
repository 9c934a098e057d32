// normkit model — AdamW and the learning-rate schedule.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.hpp"

namespace normkit::model {

// Learning rate at step s (0-based) of a run of `steps`: a linear warmup over
// the first `warmup` steps (lr·(s + 1)/warmup; warmup 0 starts at lr), then a
// cosine decay from lr to min_lr that reaches min_lr at the last step.
double scheduled_lr(double lr, double min_lr, std::int64_t warmup, std::int64_t steps, std::int64_t s);

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // decoupled (Loshchilov & Hutter), on tensors with decay set
};

// AdamW over a model's flat parameter array, with bias-corrected moments.
class AdamW {
 public:
  AdamW(std::size_t n, const AdamWConfig& config);
  // One update at learning rate lr; returns ||Δθ||₂, the update's norm.
  double step(std::span<float> params, std::span<const float> grads, const std::vector<ParamInfo>& tensors,
              double lr);

 private:
  AdamWConfig config_;
  std::vector<float> m_, v_;
  std::int64_t t_ = 0;
};

}  // namespace normkit::model
