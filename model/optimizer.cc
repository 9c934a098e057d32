#include "model/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace normkit::model {

double scheduled_lr(double lr, double min_lr, std::int64_t warmup, std::int64_t steps, std::int64_t s) {
  if (s < warmup) return lr * static_cast<double>(s + 1) / static_cast<double>(warmup);
  const std::int64_t decay_steps = steps - warmup - 1;
  if (decay_steps <= 0) return lr;
  const double progress = static_cast<double>(s - warmup) / static_cast<double>(decay_steps);
  return min_lr + 0.5 * (lr - min_lr) * (1 + std::cos(std::numbers::pi * std::min(progress, 1.0)));
}

AdamW::AdamW(std::size_t n, const AdamWConfig& config) : config_(config), m_(n, 0.0f), v_(n, 0.0f) {}

double AdamW::step(std::span<float> params, std::span<const float> grads, const std::vector<ParamInfo>& tensors,
                   double lr) {
  ++t_;
  const double b1 = config_.beta1, b2 = config_.beta2;
  const double c1 = 1 - std::pow(b1, static_cast<double>(t_)), c2 = 1 - std::pow(b2, static_cast<double>(t_));
  double update_sq = 0;
  for (const ParamInfo& t : tensors) {
    const double decay = t.decay ? lr * config_.weight_decay : 0.0;
    for (std::int64_t i = t.offset; i < t.offset + t.size; ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      const double g = grads[k];
      const double m = b1 * m_[k] + (1 - b1) * g;
      const double v = b2 * v_[k] + (1 - b2) * g * g;
      m_[k] = static_cast<float>(m);
      v_[k] = static_cast<float>(v);
      const double p = params[k];
      const double delta = -decay * p - lr * (m / c1) / (std::sqrt(v / c2) + config_.eps);
      params[k] = static_cast<float>(p + delta);
      update_sq += delta * delta;
    }
  }
  return std::sqrt(update_sq);
}

}  // namespace normkit::model
