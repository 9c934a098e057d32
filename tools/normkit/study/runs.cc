// The study's measurements: training runs, gradients and activations at
// initialization.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "model/model.hpp"
#include "study/stats.hpp"
#include "study/study.hpp"

namespace normkit::study {

namespace {

// The first `batch` back-to-back windows of tokens as inputs and targets.
void first_windows(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq,
                   std::vector<std::int32_t>& in, std::vector<std::int32_t>& out) {
  in.resize(static_cast<std::size_t>(batch * seq));
  out.resize(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    in[i] = tokens[i];
    out[i] = tokens[i + 1];
  }
}

// Per-token RMS of the (rows, D) head input: its standard deviation over
// its mean. 0 when every token reaches the head at the same scale.
double row_rms_cv(std::span<const float> z, std::int64_t D) {
  std::vector<double> r;
  for (std::size_t i = 0; i + static_cast<std::size_t>(D) <= z.size(); i += static_cast<std::size_t>(D)) {
    double q = 0;
    for (std::int64_t d = 0; d < D; ++d) q += static_cast<double>(z[i + d]) * z[i + d];
    r.push_back(std::sqrt(q / static_cast<double>(D)));
  }
  const double m = mean(r);
  return m > 0 ? stddev(r) / m : 0.0;
}

}  // namespace

Preset quick_preset() {
  Preset p;
  p.name = "quick";
  return p;
}

Preset full_preset() {
  Preset p;
  p.name = "full";
  p.grad_depths = {6, 12, 24, 48};
  p.grad_seeds = 10;
  p.steps = 1000;
  p.seeds = 5;
  p.warmup = 200;
  p.probe_lrs = {3e-3, 6e-3, 1e-2, 2e-2, 3e-2};
  p.probe_steps = 300;
  p.stack_depths = {6, 12, 24, 48};
  p.stack_train_depth = 24;
  p.stack_steps = 1000;
  return p;
}

Preset tiny_preset() {
  Preset p;
  p.name = "tiny";
  p.width = 16;
  p.heads = 2;
  p.ffn = 32;
  p.context = 16;
  p.batch = 4;
  p.grad_depths = {2, 4};
  p.grad_seeds = 2;
  p.depth = 2;
  p.steps = 30;
  p.seeds = 2;
  p.warmup = 10;
  p.probe_lrs = {1e-2, 3e-2};
  p.probe_steps = 20;
  p.stack_depths = {2, 4};
  p.stack_train_depth = 3;
  p.stack_steps = 20;
  return p;
}

Run train_run(const std::string& label, const model::Config& config, model::TrainOptions o, std::uint64_t seed,
              const model::TextData& data) {
  Run r;
  r.label = label;
  r.config = config;
  r.seed = seed;
  o.seed = seed;
  o.eval_every = o.steps;  // one validation, at the end
  r.train = o;
  model::Model<float> m(config);
  m.init(seed);
  using clock = std::chrono::steady_clock;
  std::vector<double> step_ms;
  auto t0 = clock::now();
  const model::TrainResult res = model::train(m, data, o, [&](const model::StepReport& s) {
    const auto t = clock::now();
    step_ms.push_back(std::chrono::duration<double, std::milli>(t - t0).count());
    t0 = t;
    r.loss.push_back(s.loss);
  });
  r.diverged = res.diverged;
  r.message = res.message;
  r.steps_done = res.steps_done;
  r.val_loss = !res.diverged && res.last_val_loss ? *res.last_val_loss : std::numeric_limits<double>::quiet_NaN();
  const std::size_t tail = std::max<std::size_t>(1, r.loss.size() / 10);
  r.tail_loss = r.loss.empty() ? std::numeric_limits<double>::quiet_NaN()
                               : mean(std::vector<double>(r.loss.end() - static_cast<std::ptrdiff_t>(std::min(tail, r.loss.size())), r.loss.end()));
  if (!step_ms.empty()) step_ms.pop_back();  // the last step also ran the validation
  r.median_step_ms = step_ms.empty() ? 0.0 : median(step_ms);
  if (!res.diverged) {
    std::vector<std::int32_t> in, out;
    first_windows(data.val(), o.batch, o.seq, in, out);
    m.forward(in, o.batch, o.seq);
    r.stream_rms = m.stream_rms();
    r.head_rms_cv = row_rms_cv(m.head_input(), config.width);
  }
  return r;
}

AtInit at_init(const model::Config& config, std::uint64_t seed, const model::TextData& data, std::int64_t batch) {
  model::Model<float> m(config);
  m.init(seed);
  std::vector<std::int32_t> in, out;
  first_windows(data.train(), batch, config.context, in, out);
  m.forward(in, batch, config.context);
  m.loss(out);
  AtInit a;
  a.stream_rms = m.stream_rms();
  m.backward();
  a.block_grads = model::grad_norms(m).per_block;
  return a;
}

}  // namespace normkit::study
