#include "model/train.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace normkit::model {

namespace {

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

double norm_of(std::span<const float> v, std::int64_t offset, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = offset; i < offset + n; ++i) s += static_cast<double>(v[static_cast<std::size_t>(i)]) * v[static_cast<std::size_t>(i)];
  return s;
}

}  // namespace

double evaluate(Model<float>& m, std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq,
                std::int64_t windows) {
  const std::int64_t fit = (static_cast<std::int64_t>(tokens.size()) - 1) / seq;
  windows = std::min(windows, fit);
  if (windows < 1)
    throw std::invalid_argument("evaluate: " + std::to_string(tokens.size()) +
                                " tokens cannot hold a window of seq + 1 = " + std::to_string(seq + 1));
  std::vector<std::int32_t> in, out;
  double total = 0;
  for (std::int64_t w0 = 0; w0 < windows; w0 += batch) {
    const std::int64_t b = std::min(batch, windows - w0);
    in.resize(static_cast<std::size_t>(b * seq));
    out.resize(in.size());
    for (std::int64_t i = 0; i < b * seq; ++i) {
      const std::size_t src = static_cast<std::size_t>(w0 * seq + i);
      in[static_cast<std::size_t>(i)] = tokens[src];
      out[static_cast<std::size_t>(i)] = tokens[src + 1];
    }
    m.forward(in, b, seq);
    total += m.loss(out) * static_cast<double>(b);
  }
  return total / static_cast<double>(windows);
}

GradNorms grad_norms(const Model<float>& m) {
  GradNorms g;
  g.per_block.assign(static_cast<std::size_t>(m.config().depth), 0.0);
  double total_sq = 0;
  for (const ParamInfo& t : m.tensors()) {
    const double sq = norm_of(m.grads(), t.offset, t.size);
    total_sq += sq;
    if (t.layer >= 0) g.per_block[static_cast<std::size_t>(t.layer)] += sq;
  }
  for (double& b : g.per_block) b = std::sqrt(b);
  g.total = std::sqrt(total_sq);
  return g;
}

TrainResult train(Model<float>& m, const TextData& data, const TrainOptions& o,
                  const std::function<void(const StepReport&)>& on_step) {
  if (o.steps < 1 || o.batch < 1 || o.seq < 1 || o.seq > m.config().context || o.warmup < 0 ||
      o.eval_every < 1 || o.eval_windows < 1 || !(o.lr > 0) || !(o.clip >= 0))
    throw std::invalid_argument("train: steps, batch, eval_every and eval_windows must be >= 1, warmup >= 0, "
                                "lr > 0, clip >= 0 and 1 <= seq <= context = " +
                                std::to_string(m.config().context));
  if (data.vocab() != m.config().vocab)
    throw std::invalid_argument("train: the text has " + std::to_string(data.vocab()) +
                                " distinct bytes, the model's vocab is " + std::to_string(m.config().vocab));
  const double max_loss = o.max_loss > 0 ? o.max_loss : 3 * std::log(static_cast<double>(data.vocab()));
  Rng rng(o.seed);
  AdamW adamw(m.params().size(), o.adamw);
  std::vector<std::int32_t> inputs, targets;
  TrainResult result;
  StepReport r;
  for (std::int64_t s = 0; s < o.steps; ++s) {
    r = StepReport{};
    r.step = s;
    r.lr = scheduled_lr(o.lr, o.lr * o.min_lr_ratio, o.warmup, o.steps, s);
    sample_windows(data.train(), o.batch, o.seq, rng, inputs, targets);
    m.forward(inputs, o.batch, o.seq);
    r.loss = m.loss(targets);
    if (s == 0) result.first_loss = r.loss;
    result.last_loss = r.loss;
    if (!std::isfinite(r.loss) || r.loss > max_loss) {
      result.diverged = true;
      result.message = "diverged at step " + std::to_string(s) + ": training loss " + format_double(r.loss) +
                       (std::isfinite(r.loss) ? " is above the bound " + format_double(max_loss) : "");
      break;
    }
    r.norm_inputs = m.norm_inputs();
    m.backward();

    GradNorms norms = grad_norms(m);
    r.block_grad_norms = std::move(norms.per_block);
    r.grad_norm = norms.total;
    if (!std::isfinite(r.grad_norm)) {
      result.diverged = true;
      result.message = "diverged at step " + std::to_string(s) + ": gradient norm " + format_double(r.grad_norm);
      break;
    }
    if (o.clip > 0 && r.grad_norm > o.clip) {
      const float scale = static_cast<float>(o.clip / r.grad_norm);
      for (float& g : m.grads()) g *= scale;
    }
    const double weight_norm = std::sqrt(norm_of(m.params(), 0, static_cast<std::int64_t>(m.params().size())));
    const double update_norm = adamw.step(m.params(), m.grads(), m.tensors(), r.lr);
    r.update_ratio = weight_norm > 0 ? update_norm / weight_norm : 0.0;
    result.steps_done = s + 1;

    if ((s + 1) % o.eval_every == 0 || s + 1 == o.steps) {
      r.val_loss = evaluate(m, data.val(), o.batch, o.seq, o.eval_windows);
      result.last_val_loss = r.val_loss;
      if (!std::isfinite(*r.val_loss)) {
        result.diverged = true;
        result.message = "diverged at step " + std::to_string(s) + ": validation loss " + format_double(*r.val_loss);
      }
    }
    if (on_step) on_step(r);
    if (result.diverged) break;
  }
  return result;
}

}  // namespace normkit::model
