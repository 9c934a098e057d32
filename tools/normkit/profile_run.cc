#include "profile_run.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "measure/timing.hpp"
#include "model/observe.hpp"
#include "normkit/ops.hpp"

namespace normkit::profile {

const char* class_name(OpClass c) {
  switch (c) {
    case OpClass::matmul: return "matrix products";
    case OpClass::attention: return "attention";
    case OpClass::normalization: return "normalization";
    case OpClass::elementwise: return "element-wise";
    case OpClass::ends: return "embedding/head/loss";
  }
  return "?";
}

OpClass class_of(const OpRecord& r) {
  const std::string_view label = r.label, op = r.op;
  if (label.empty() && measure::norm_flops_per_element(r.op, false, false) > 0) return OpClass::normalization;
  if (label.starts_with("attn.scores") || label.starts_with("attn.softmax") || label.starts_with("attn.context"))
    return OpClass::attention;
  if (label.starts_with("embedding") || label.starts_with("head") || label.starts_with("loss")) return OpClass::ends;
  if (op == "matmul") return OpClass::matmul;
  return OpClass::elementwise;
}

void Recorder::on_op(const OpRecord& r) {
  const std::lock_guard<std::mutex> lock(mutex_);
  records_.push_back(r);
}

std::vector<OpRecord> Recorder::take() {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpRecord> out;
  out.swap(records_);
  records_.reserve(out.size());
  return out;
}

namespace {

// h = x + residual, row by row (the views' strides), f32 or f64.
template <class T>
void add_rows(ConstMatrix x, ConstMatrix r, Matrix h) {
  const auto* px = static_cast<const T*>(x.data);
  const auto* pr = static_cast<const T*>(r.data);
  auto* ph = static_cast<T*>(h.data);
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = 0; j < x.cols; ++j)
      ph[i * h.row_stride + j] = px[i * x.row_stride + j] + pr[i * r.row_stride + j];
}

// The add of an unfused add+norm, reported like the model's own adds.
void residual_add(ConstMatrix x, ConstMatrix r, Matrix h) {
  OpRecord rec;
  rec.op = "add";
  rec.label = "residual.unfused";
  rec.shape[0] = x.rows * x.cols;
  rec.dtype = rec.param_dtype = rec.stream_dtype = x.dtype;
  const ObservedOp op(rec);
  if (x.dtype == DType::f32) add_rows<float>(x, r, h);
  else if (x.dtype == DType::f64) add_rows<double>(x, r, h);
  else throw std::invalid_argument("profile: the unfused add takes f32 or f64");
}

}  // namespace

model::NormOps norm_ops(bool fused) {
  model::NormOps ops = model::library_norm_ops();
  if (fused) return ops;
  ops.add_layer_norm = [](ConstMatrix x, ConstMatrix r, ConstVector w, ConstVector b, double eps, Matrix h, Matrix y,
                          Vector mean, Vector rstd) {
    residual_add(x, r, h);
    normkit::layer_norm(h, w, b, eps, y, mean, rstd);
  };
  ops.add_rms_norm = [](ConstMatrix x, ConstMatrix r, ConstVector w, double eps, Matrix h, Matrix y, Vector rstd,
                        double offset) {
    residual_add(x, r, h);
    normkit::rms_norm(h, w, eps, y, rstd, offset);
  };
  // dh = norm_backward(dy) + dh_out: the norm's backward into dh, then the add.
  ops.add_layer_norm_backward = [](ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector mean,
                                   ConstVector rstd, ConstVector w, Matrix dh, Vector dw, Vector db) {
    normkit::layer_norm_backward(dy, h, mean, rstd, w, dh, dw, db);
    if (dh_out.data) residual_add(dh, dh_out, dh);
  };
  ops.add_rms_norm_backward = [](ConstMatrix dy, ConstMatrix dh_out, ConstMatrix h, ConstVector rstd, ConstVector w,
                                 Matrix dh, Vector dw, double offset) {
    normkit::rms_norm_backward(dy, h, rstd, w, dh, dw, offset);
    if (dh_out.data) residual_add(dh, dh_out, dh);
  };
  return ops;
}

Step::Step(const StepConfig& c) : Step(c, norm_ops(c.fused)) {}

Step::Step(const StepConfig& c, model::NormOps norms) : config_(c), model_(c.model, std::move(norms)) {
  model_.init(c.seed);
  std::mt19937 rng(static_cast<std::uint32_t>(c.seed));
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(c.model.vocab - 1));
  const auto n = static_cast<std::size_t>(c.batch * c.seq);
  tokens_.resize(n);
  targets_.resize(n);
  for (auto& t : tokens_) t = id(rng);
  for (auto& t : targets_) t = id(rng);
}

void Step::run() {
  model_.forward(tokens_, config_.batch, config_.seq);
  model_.loss(targets_);
  model_.backward();
}

namespace {

std::string row_name(const OpRecord& r) {
  return r.label[0] ? std::string(r.op) + " " + r.label : std::string(r.op);
}

void set_shares(std::vector<Row>& rows, double flops, double seconds) {
  for (Row& r : rows) {
    r.flop_share = flops > 0 ? r.flops / flops : 0;
    r.time_share = seconds > 0 ? r.seconds / seconds : 0;
  }
}

}  // namespace

StepProfile summarize(const std::vector<std::vector<OpRecord>>& steps, Statistic stat) {
  if (steps.empty() || steps[0].empty()) throw std::logic_error("profile: no records to summarize");
  const std::vector<OpRecord>& first = steps[0];
  for (const auto& s : steps) {
    bool same = s.size() == first.size();
    for (std::size_t i = 0; same && i < s.size(); ++i)
      same = std::strcmp(s[i].op, first[i].op) == 0 && std::strcmp(s[i].label, first[i].label) == 0;
    if (!same) throw std::logic_error("profile: steps reported different sequences of ops");
  }
  StepProfile p;
  p.records_per_step = static_cast<std::int64_t>(first.size());
  p.repeats = static_cast<int>(steps.size());
  std::map<std::string, std::size_t> index;
  p.classes.resize(std::size(kClasses));
  for (std::size_t c = 0; c < std::size(kClasses); ++c) {
    p.classes[c].cls = kClasses[c];
    p.classes[c].name = class_name(kClasses[c]);
  }
  std::vector<double> times(steps.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    for (std::size_t s = 0; s < steps.size(); ++s)
      times[s] = static_cast<double>(steps[s][i].end_ns - steps[s][i].start_ns) * 1e-9;
    const double t =
        stat == Statistic::median ? measure::median(times) : *std::min_element(times.begin(), times.end());
    const measure::OpCost cost = measure::op_cost(first[i]);
    if (!cost.known && std::find(p.unknown_ops.begin(), p.unknown_ops.end(), first[i].op) == p.unknown_ops.end())
      p.unknown_ops.emplace_back(first[i].op);
    const std::string name = row_name(first[i]);
    auto [it, added] = index.emplace(name, p.ops.size());
    if (added) {
      Row r;
      r.name = name;
      r.cls = class_of(first[i]);
      p.ops.push_back(r);
    }
    for (Row* r : {&p.ops[it->second], &p.classes[static_cast<std::size_t>(class_of(first[i]))]}) {
      r->calls += 1;
      r->flops += cost.flops;
      r->bytes += static_cast<double>(cost.bytes());
      r->seconds += t;
    }
    p.flops += cost.flops;
    p.bytes += static_cast<double>(cost.bytes());
    p.recorded_s += t;
  }
  set_shares(p.ops, p.flops, p.recorded_s);
  set_shares(p.classes, p.flops, p.recorded_s);
  return p;
}

StepProfile profile_step(Step& step, int warmup, int repeats, Statistic stat) {
  Recorder recorder;
  std::vector<std::vector<OpRecord>> steps;
  const auto profiled = [&] {
    const ScopedObserver on(&recorder);
    step.run();
  };
  const auto plain = [&] { step.run(); };
  // Warm-up runs both kinds (the records of its profiled steps are dropped).
  const measure::Interleaved t = measure::time_interleaved(
      {[&] {
         profiled();
         steps.push_back(recorder.take());
       },
       plain},
      warmup, repeats);
  steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() - t.seconds[0].size()));
  StepProfile p = summarize(steps, stat);
  p.wall_profiled_s = t.median_s(0);
  p.wall_unprofiled_s = t.median_s(1);
  return p;
}

}  // namespace normkit::profile
