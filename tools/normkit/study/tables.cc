// The study's six tables: what each runs, and the rule of each verdict.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "study/stats.hpp"
#include "study/study.hpp"

namespace normkit::study {

namespace {

using model::Placement;

constexpr double kInf = std::numeric_limits<double>::infinity();

model::Config config_of(const Preset& p, std::int64_t vocab, std::int64_t depth, Placement placement,
                        NormKind norm = NormKind::layer_norm, model::InitScheme init = model::InitScheme::gpt2) {
  model::Config c;
  c.vocab = vocab;
  c.context = p.context;
  c.width = p.width;
  c.heads = p.heads;
  c.ffn = p.ffn;
  c.depth = depth;
  c.placement = placement;
  c.norm = norm;
  c.init = init;
  return c;
}

using model::InitScheme;
constexpr InitScheme kInits[] = {InitScheme::gpt2, InitScheme::xavier};
std::string init_name(InitScheme i) { return std::string(model::init_scheme_name(i)); }

// No gradient clipping: the claims are about what the optimizer does with
// the gradients the placement produces, which clipping would bound.
model::TrainOptions options_of(const Preset& p, double lr, std::int64_t warmup, std::int64_t steps) {
  model::TrainOptions o;
  o.steps = steps;
  o.batch = p.batch;
  o.seq = p.context;
  o.lr = lr;
  o.warmup = warmup;
  o.clip = 0;
  return o;
}

std::string name_of(const model::Config& c) {
  std::string n(model::placement_name(c.placement));
  if (c.qk_norm) n += "+qk-norm";
  if (c.norm == NormKind::rms_norm) n += " rmsnorm";
  if (!c.final_norm) n += " no-final-norm";
  if (c.init != InitScheme::gpt2) n += " " + init_name(c.init) + "-init";
  return n;
}

// Runs each distinct (config, options, seed) once: tables that share a
// configuration share its runs.
class Runner {
 public:
  Runner(Study& s, const model::TextData& data, std::function<void(const std::string&, double)> progress)
      : s_(s), data_(data), progress_(std::move(progress)), planned_(static_cast<double>(planned_steps(s.preset))) {}

  const Run& run(const model::Config& c, const model::TrainOptions& o, std::uint64_t seed) {
    const std::string label = name_of(c) + ", depth " + std::to_string(c.depth) + ", lr " + fmt(o.lr) +
                              ", warmup " + std::to_string(o.warmup) + ", " + std::to_string(o.steps) + " steps";
    const std::string key = label + ", seed " + std::to_string(seed);
    if (const auto it = index_.find(key); it != index_.end()) return s_.runs[it->second];
    if (progress_) progress_(key, std::min(1.0, done_ / planned_));
    s_.runs.push_back(train_run(label, c, o, seed, data_));
    done_ += static_cast<double>(o.steps * c.depth);
    index_[key] = s_.runs.size() - 1;
    return s_.runs.back();
  }

  // One run per seed 1..seeds.
  std::vector<const Run*> seeds(const model::Config& c, const model::TrainOptions& o) {
    std::vector<const Run*> out;
    for (int k = 1; k <= s_.preset.seeds; ++k) out.push_back(&run(c, o, static_cast<std::uint64_t>(k)));
    return out;
  }

 private:
  Study& s_;
  const model::TextData& data_;
  std::function<void(const std::string&, double)> progress_;
  std::map<std::string, std::size_t> index_;
  double done_ = 0, planned_;
};

// A diverged run's loss counts as +inf in comparisons.
std::vector<double> vals(const std::vector<const Run*>& runs) {
  std::vector<double> v;
  for (const Run* r : runs) v.push_back(r->diverged || std::isnan(r->val_loss) ? kInf : r->val_loss);
  return v;
}

int diverged(const std::vector<const Run*>& runs) {
  int n = 0;
  for (const Run* r : runs) n += r->diverged ? 1 : 0;
  return n;
}

std::vector<double> finite(const std::vector<double>& v) {
  std::vector<double> out;
  for (const double x : v)
    if (std::isfinite(x)) out.push_back(x);
  return out;
}

// "median (min–max)" over the finite values, with the count when some diverged.
std::string spread(const std::vector<double>& v, int decimals = 3) {
  const std::vector<double> f = finite(v);
  if (f.empty()) return "—";
  std::string s = fixed(median(f), decimals);
  if (f.size() > 1)
    s += " (" + fixed(*std::min_element(f.begin(), f.end()), decimals) + "–" +
         fixed(*std::max_element(f.begin(), f.end()), decimals) + ")";
  if (f.size() < v.size()) s += " of " + std::to_string(f.size());
  return s;
}

double range_of(const std::vector<double>& v) {
  const std::vector<double> f = finite(v);
  return f.size() < 2 ? 0.0 : *std::max_element(f.begin(), f.end()) - *std::min_element(f.begin(), f.end());
}

// The smallest effect a paired verdict calls real: a hundredth of a nat of
// loss, a hundredth of a step's time.
constexpr double kMinLossEffect = 0.01;
constexpr double kMinTimeEffect = 0.01;  // relative

// Paired by seed: "holds" when a < b for every seed and the median of b − a
// is at least min_effect, "negligible" when a < b for every seed by less,
// "does not hold" when a >= b for every seed, else "unclear".
std::string paired_below(const std::vector<double>& a, const std::vector<double>& b, double min_effect) {
  int below = 0;
  std::vector<double> gain;
  for (std::size_t i = 0; i < a.size(); ++i) {
    below += a[i] < b[i] ? 1 : 0;
    gain.push_back(b[i] - a[i]);
  }
  if (below == static_cast<int>(a.size())) return median(gain) >= min_effect ? "holds" : "negligible";
  if (below == 0) return "does not hold";
  return "unclear";
}

// The paired differences a − b over seeds, "median (min–max)".
std::string paired_delta(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d;
  for (std::size_t i = 0; i < a.size(); ++i) d.push_back(a[i] - b[i]);
  return "; paired difference " + spread(d);
}

std::string paired_rule(const std::string& a, const std::string& b, std::size_t n, const std::string& min_effect) {
  return "holds when " + a + " < " + b + " on every one of the " + std::to_string(n) +
         " seeds (paired by seed; a diverged run counts as +∞) by a median of at least " + min_effect +
         " (less: negligible), does not hold when it is not lower on any, unclear otherwise";
}

std::string of_seeds(int diverged_runs, int seeds) {
  return std::to_string(diverged_runs) + " of " + std::to_string(seeds);
}

// Element by element, the geometric mean of one profile per seed.
std::vector<double> geomean_over_seeds(const std::vector<std::vector<double>>& per_seed) {
  std::vector<double> out;
  for (std::size_t i = 0; i < per_seed.front().size(); ++i) {
    std::vector<double> v;
    for (const auto& ps : per_seed) v.push_back(ps[i]);
    out.push_back(geomean(v));
  }
  return out;
}

// Exploding or collapsing: the stream's last/first RMS ratio beyond 10× either way.
bool extreme_ratio(double r) { return !(r <= 10.0 && r >= 0.1); }

double last_over_first(const std::vector<double>& rms) {
  return rms.size() < 2 || !(rms.front() > 0) ? std::numeric_limits<double>::quiet_NaN() : rms.back() / rms.front();
}

// ---------------------------------------------------------------------------

void gradients_at_init(Study& s, const model::TextData& data) {
  const Preset& p = s.preset;
  const Placement placements[] = {Placement::pre, Placement::post, Placement::sandwich, Placement::none};
  Table t;
  t.id = "gradients_at_init";
  t.title = "Gradients at initialization, by block";
  t.columns = {"init", "placement", "depth", "‖∇‖ first block", "‖∇‖ middle block", "‖∇‖ last block",
               "first / last (seeds' range)", "max / min over blocks"};
  for (const InitScheme init : kInits) {
    for (const std::int64_t depth : p.grad_depths) {
      for (const Placement pl : placements) {
        GradientProfile g{init, pl, depth, {}, {}};
        std::vector<std::vector<double>> per_seed;
        for (int k = 1; k <= p.grad_seeds; ++k) {
          const AtInit a = at_init(config_of(p, data.vocab(), depth, pl, NormKind::layer_norm, init),
                                   static_cast<std::uint64_t>(k), data, p.batch);
          per_seed.push_back(a.block_grads);
          g.first_over_last.push_back(a.block_grads.front() / a.block_grads.back());
        }
        g.per_block = geomean_over_seeds(per_seed);
        const auto [lo, hi] = std::minmax_element(g.per_block.begin(), g.per_block.end());
        const auto [rlo, rhi] = std::minmax_element(g.first_over_last.begin(), g.first_over_last.end());
        t.rows.push_back({init_name(init), std::string(model::placement_name(pl)), std::to_string(depth),
                          fmt(g.per_block.front()), fmt(g.per_block[g.per_block.size() / 2]), fmt(g.per_block.back()),
                          fmt(geomean(g.first_over_last)) + " (" + fmt(*rlo) + "–" + fmt(*rhi) + ")", fmt(*hi / *lo)});
        s.gradients.push_back(std::move(g));
      }
    }
    // The claim has a direction (the early blocks get the smaller, badly
    // scaled gradients) and a contrast (pre-norm's are even).
    int early_smaller = 0, early_not_smaller = 0, pre_even = 0;
    std::string post_measured, pre_measured;
    for (const GradientProfile& g : s.gradients) {
      if (g.init != init) continue;
      const std::string at = (post_measured.empty() && g.placement == Placement::post) ||
                                     (pre_measured.empty() && g.placement == Placement::pre)
                                 ? "depth "
                                 : ", depth ";
      if (g.placement == Placement::post) {
        bool all_small = true, none_small = true;
        for (const double r : g.first_over_last) {
          all_small = all_small && r < 0.5;
          none_small = none_small && r >= 1.0;
        }
        early_smaller += all_small ? 1 : 0;
        early_not_smaller += none_small ? 1 : 0;
        post_measured += at + std::to_string(g.depth) + " " + fmt(geomean(g.first_over_last));
      } else if (g.placement == Placement::pre) {
        const auto [lo, hi] = std::minmax_element(g.per_block.begin(), g.per_block.end());
        pre_even += *hi / *lo < 2.0 ? 1 : 0;
        pre_measured += at + std::to_string(g.depth) + " " + fmt(*hi / *lo);
      }
    }
    const int nd = static_cast<int>(p.grad_depths.size());
    const std::string under = ", " + init_name(init) + " init";
    t.verdicts.push_back({"Post-norm's early blocks get smaller, poorly scaled gradients than its last ones" + under,
                          "001 (post-norm); Xiong et al. 2020, fig. 3",
                          early_smaller == nd ? "holds" : early_not_smaller == nd ? "does not hold" : "unclear",
                          "holds when block 1's ‖∇‖ is under half the last block's for every seed at every depth; "
                          "does not hold when it is at least the last block's for every seed at every depth",
                          "post-norm first/last: " + post_measured});
    t.verdicts.push_back({"Pre-norm's gradients are even across blocks" + under, "001 (pre-norm); Xiong et al. 2020",
                          pre_even == nd ? "holds" : "does not hold",
                          "holds when the largest block's ‖∇‖ is under twice the smallest's at every depth",
                          "pre-norm max/min over blocks: " + pre_measured});
  }
  t.notes.push_back("One forward and backward of the untrained model on the first " + std::to_string(p.batch) +
                    " training windows; ‖∇‖ is the 2-norm of the gradient of all of a block's parameters, the "
                    "geometric mean over " + std::to_string(p.grad_seeds) + " seeds.");
  t.notes.push_back("gpt2 init: embeddings and matrices N(0, 0.02²), residual projections 0.02/√(2·depth); xavier "
                    "init: Xavier-normal matrices and a unit-RMS embedding, the setting Xiong et al. analyse. Under "
                    "gpt2 the first block's norm sees the embedding's RMS of about 0.03, and its Jacobian, 1/σ on "
                    "the tangent directions, scales that block's gradient up.");
  s.tables.push_back(std::move(t));
}

void warmup(Study& s, Runner& runner, const model::TextData& data) {
  const Preset& p = s.preset;
  const std::int64_t V = data.vocab();
  // The probe: the first learning rate at which post-norm without warmup
  // ends clearly worse than with it.
  Table probe;
  probe.id = "warmup_probe";
  probe.title = "Warmup probe: post-norm with and without warmup, one seed, " + std::to_string(p.probe_steps) + " steps";
  probe.columns = {"lr", "tail loss, no warmup", "tail loss, warmup " + std::to_string(p.warmup / 2), "gap", "diverged"};
  const model::Config post = config_of(p, V, p.depth, Placement::post), pre = config_of(p, V, p.depth, Placement::pre);
  s.stress_lr = 0;
  for (const double lr : p.probe_lrs) {
    const Run& a = runner.run(post, options_of(p, lr, 0, p.probe_steps), 1);
    const Run& b = runner.run(post, options_of(p, lr, p.warmup / 2, p.probe_steps), 1);
    const double la = a.diverged ? kInf : a.tail_loss, lb = b.diverged ? kInf : b.tail_loss;
    probe.rows.push_back({fmt(lr), a.diverged ? "diverged" : fixed(la), b.diverged ? "diverged" : fixed(lb),
                          std::isfinite(la - lb) ? fixed(la - lb) : "—",
                          std::string(a.diverged ? "no warmup " : "") + (b.diverged ? "warmup" : "")});
    if (!b.diverged && (a.diverged || la - lb > 0.1)) {
      s.stress_lr = lr;
      s.stress_reason = "the first probed lr at which post-norm without warmup ended ≥ 0.1 nats worse (or diverged) "
                        "than with warmup";
      break;
    }
  }
  if (s.stress_lr == 0) {
    s.stress_lr = p.probe_lrs.back();
    s.stress_reason = "no probed lr showed a gap of 0.1 nats; the largest is used";
  }
  probe.notes.push_back("Tail loss: the mean training loss over the last 10% of steps. The probe stops at " + fmt(s.stress_lr) +
                        ": " + s.stress_reason + ".");
  s.tables.push_back(std::move(probe));

  Table t;
  t.id = "warmup";
  t.title = "Warmup: pre- and post-norm at lr " + fmt(s.stress_lr) + ", with and without warmup";
  t.columns = {"placement", "warmup steps", "diverged", "val loss, median (range)", "tail train loss"};
  std::map<std::pair<Placement, bool>, std::vector<const Run*>> runs;
  for (const model::Config* c : {&pre, &post})
    for (const bool w : {false, true}) {
      auto rs = runner.seeds(*c, options_of(p, s.stress_lr, w ? p.warmup : 0, p.steps));
      std::vector<double> tails;
      for (const Run* r : rs) tails.push_back(r->diverged ? kInf : r->tail_loss);
      t.rows.push_back({std::string(model::placement_name(c->placement)), std::to_string(w ? p.warmup : 0),
                        of_seeds(diverged(rs), p.seeds), spread(vals(rs)), spread(tails)});
      runs[{c->placement, w}] = std::move(rs);
    }
  const auto vp0 = vals(runs[{Placement::post, false}]), vp1 = vals(runs[{Placement::post, true}]);
  const auto vr0 = vals(runs[{Placement::pre, false}]), vr1 = vals(runs[{Placement::pre, true}]);
  const std::size_t n = vp0.size();
  t.verdicts.push_back({"Post-norm needs learning-rate warmup", "001 (post-norm), after Xiong et al. 2020",
                        paired_below(vp1, vp0, kMinLossEffect), paired_rule("post's val loss with warmup", "without", n, "0.01 nats"),
                        "post val " + spread(vp0) + " without, " + spread(vp1) + " with warmup" + paired_delta(vp1, vp0)});
  bool pre_learns = true;
  for (const double v : vr0) pre_learns = pre_learns && v < std::log(static_cast<double>(V)) - 1.0;
  t.verdicts.push_back({"Pre-norm trains stably without warmup", "001 (pre-norm)", pre_learns ? "holds" : "does not hold",
                        "holds when no pre-norm seed without warmup diverges and each ends below ln(vocab) − 1 = " +
                            fixed(std::log(static_cast<double>(V)) - 1.0) + " nats",
                        "pre val without warmup " + spread(vr0) + ", " + of_seeds(diverged(runs[{Placement::pre, false}]), p.seeds) +
                            " diverged"});
  std::vector<double> gap_pre, gap_post;
  for (std::size_t i = 0; i < n; ++i) {
    gap_pre.push_back(vr0[i] - vr1[i]);
    gap_post.push_back(vp0[i] - vp1[i]);
  }
  t.verdicts.push_back({"Warmup matters less for pre-norm than for post-norm", "001; Xiong et al. 2020",
                        paired_below(gap_pre, gap_post, kMinLossEffect),
                        paired_rule("pre's gain from warmup (val without − with)", "post's", n, "0.01 nats"),
                        "gain from warmup: pre " + spread(gap_pre) + ", post " + spread(gap_post)});
  t.notes.push_back(std::to_string(p.steps) + " steps of batch " + std::to_string(p.batch) + " × " +
                    std::to_string(p.context) + " tokens, depth " + std::to_string(p.depth) + ", width " +
                    std::to_string(p.width) + ", AdamW without gradient clipping, warmup then cosine decay; " +
                    std::to_string(p.seeds) + " seeds each.");
  s.tables.push_back(std::move(t));
}

void unnormalized_stack(Study& s, Runner& runner, const model::TextData& data) {
  const Preset& p = s.preset;
  const std::int64_t V = data.vocab();
  Table t;
  t.id = "unnormalized_stack";
  t.title = "The unnormalized stack: the residual stream's RMS through the blocks";
  t.columns = {"init", "placement", "depth", "when", "diverged", "RMS after embedding", "RMS in the middle",
               "RMS at the top", "top / embedding"};
  std::map<std::pair<InitScheme, Placement>, std::vector<double>> init_ratio, trained_ratio;
  std::map<std::pair<InitScheme, Placement>, int> trained_diverged;
  for (const InitScheme init : kInits) {
    for (const std::int64_t depth : p.stack_depths)
      for (const Placement pl : {Placement::none, Placement::pre}) {
        std::vector<std::vector<double>> per_seed;
        for (int k = 1; k <= p.grad_seeds; ++k)
          per_seed.push_back(at_init(config_of(p, V, depth, pl, NormKind::layer_norm, init), static_cast<std::uint64_t>(k),
                                     data, p.batch)
                                 .stream_rms);
        Study::StackProfile sp{init, pl, depth, {}};
        sp.stream_rms = geomean_over_seeds(per_seed);
        const auto& r = sp.stream_rms;
        init_ratio[{init, pl}].push_back(last_over_first(r));
        t.rows.push_back({init_name(init), std::string(model::placement_name(pl)), std::to_string(depth), "init", "—",
                          fmt(r.front()), fmt(r[r.size() / 2]), fmt(r.back()), fmt(last_over_first(r))});
        s.stack_init.push_back(std::move(sp));
      }
    for (const Placement pl : {Placement::none, Placement::pre}) {
      auto rs = runner.seeds(config_of(p, V, p.stack_train_depth, pl, NormKind::layer_norm, init),
                             options_of(p, p.base_lr, 0, p.stack_steps));
      std::vector<double> first, mid, top, ratio;
      for (const Run* r : rs) {
        if (r->diverged) {
          ratio.push_back(kInf);
          continue;
        }
        first.push_back(r->stream_rms.front());
        mid.push_back(r->stream_rms[r->stream_rms.size() / 2]);
        top.push_back(r->stream_rms.back());
        ratio.push_back(last_over_first(r->stream_rms));
      }
      t.rows.push_back({init_name(init), std::string(model::placement_name(pl)), std::to_string(p.stack_train_depth),
                        "after " + std::to_string(p.stack_steps) + " steps", of_seeds(diverged(rs), p.seeds),
                        spread(first, 2), spread(mid, 2), spread(top, 2), spread(ratio, 1)});
      trained_ratio[{init, pl}] = ratio;
      trained_diverged[{init, pl}] = diverged(rs);
    }
  }
  for (const InitScheme init : kInits) {
    const double at_init_top = init_ratio[{init, Placement::none}].back();
    const double trained = median(trained_ratio[{init, Placement::none}]);
    const bool extreme = extreme_ratio(at_init_top) || extreme_ratio(trained) ||
                         trained_diverged[{init, Placement::none}] > p.seeds / 2;
    t.verdicts.push_back(
        {"Without normalization the stream's magnitude explodes or collapses through a deep stack, " + init_name(init) +
             " init",
         "001 (introduction)", extreme ? "holds" : "does not hold",
         "holds when none's top/embedding RMS ratio is beyond 10× either way at init (depth " +
             std::to_string(p.stack_depths.back()) + ") or after training (median, depth " +
             std::to_string(p.stack_train_depth) + "), or most seeds diverge",
         "none top/embedding: " + fmt(at_init_top) + " at init, " + fmt(trained) + " after training (" +
             of_seeds(trained_diverged[{init, Placement::none}], p.seeds) + " diverged); pre-norm beside it " +
             fmt(init_ratio[{init, Placement::pre}].back()) + " and " + fmt(median(trained_ratio[{init, Placement::pre}]))});
  }
  bool grows = true;
  std::string measured;
  for (const InitScheme init : kInits) {
    const double trained = median(trained_ratio[{init, Placement::pre}]);
    grows = grows && trained > 1;
    measured += (measured.empty() ? "" : "; ") + init_name(init) + ": at init ";
    for (std::size_t i = 0; i < p.stack_depths.size(); ++i) {
      grows = grows && init_ratio[{init, Placement::pre}][i] > 1;
      measured += (i ? ", " : "") + fmt(init_ratio[{init, Placement::pre}][i]);
    }
    measured += " (depths " + std::to_string(p.stack_depths.front()) + "…" + std::to_string(p.stack_depths.back()) +
                "), after training " + fmt(trained);
  }
  t.verdicts.push_back({"Pre-norm normalizes each branch's input, not the residual stream: its RMS grows through the blocks",
                        "000 §2.1 (optional depth)", grows ? "holds" : "does not hold",
                        "holds when pre-norm's top/embedding RMS ratio exceeds 1 at every depth, at init and after "
                        "training, under both inits",
                        "pre top/embedding, " + measured});
  t.notes.push_back("RMS over every element of the stream after the embedding, the middle sublayer and the last one; at init "
                    "the geometric mean over " + std::to_string(p.grad_seeds) + " seeds, after training the median over " +
                    std::to_string(p.seeds) + " (on the validation windows). Both placements keep the final norm before "
                    "the head, so only the blocks differ.");
  s.tables.push_back(std::move(t));
}

void final_norm(Study& s, Runner& runner, const model::TextData& data) {
  const Preset& p = s.preset;
  Table t;
  t.id = "final_norm";
  t.title = "The final norm: pre-norm with and without a norm before the LM head";
  t.columns = {"final norm", "diverged", "val loss, median (range)", "head input: per-token RMS std/mean",
               "stream RMS at the top"};
  std::map<bool, std::vector<const Run*>> runs;
  std::map<bool, std::vector<double>> cv;
  for (const bool with : {true, false}) {
    model::Config c = config_of(p, data.vocab(), p.depth, Placement::pre);
    c.final_norm = with;
    auto rs = runner.seeds(c, options_of(p, p.base_lr, 0, p.steps));
    std::vector<double> top;
    for (const Run* r : rs)
      if (!r->diverged) {
        cv[with].push_back(r->head_rms_cv);
        top.push_back(r->stream_rms.back());
      }
    t.rows.push_back({with ? "yes" : "no", of_seeds(diverged(rs), p.seeds), spread(vals(rs)), spread(cv[with]),
                      spread(top, 2)});
    runs[with] = std::move(rs);
  }
  const auto v1 = vals(runs[true]), v0 = vals(runs[false]);
  const int collapsed = diverged(runs[false]);
  t.verdicts.push_back({"Removing a norm (here the final one) makes training collapse within hundreds of steps",
                        "001 (Llama's three norms)",
                        collapsed > p.seeds / 2 ? "holds" : collapsed == 0 ? "does not hold" : "unclear",
                        "holds when most seeds without the final norm diverge within the " + std::to_string(p.steps) +
                            " steps, does not hold when none does",
                        of_seeds(collapsed, p.seeds) + " diverged without it; val " + spread(v0) + " without, " +
                            spread(v1) + " with"});
  t.verdicts.push_back({"A pre-norm model trains better with the final norm", "001 (Llama's three norms); 000 §2.1",
                        paired_below(v1, v0, kMinLossEffect),
                        paired_rule("val loss with the final norm", "without", v1.size(), "0.01 nats"),
                        "val " + spread(v1) + " with, " + spread(v0) + " without" + paired_delta(v1, v0)});
  const double c1 = median(cv[true]), c0 = median(cv[false]);
  t.verdicts.push_back({"Without it the head's input has a scale that varies from token to token", "001 (Llama's three norms)",
                        cv[true].empty() || cv[false].empty() ? "unclear" : c0 > 2 * c1 ? "holds" : "does not hold",
                        "holds when the median per-token RMS spread (std/mean) of the head's input without the final norm "
                        "is over twice the spread with it",
                        "spread " + fixed(c0) + " without, " + fixed(c1) + " with"});
  s.tables.push_back(std::move(t));
}

void layernorm_vs_rmsnorm(Study& s, Runner& runner, const model::TextData& data) {
  const Preset& p = s.preset;
  Table t;
  t.id = "layernorm_vs_rmsnorm";
  t.title = "LayerNorm against RMSNorm at equal settings (pre-norm, lr " + fmt(p.base_lr) + ")";
  t.columns = {"norm", "diverged", "val loss, median (range)", "step time ms, median (range)"};
  std::map<NormKind, std::vector<const Run*>> runs;
  std::map<NormKind, std::vector<double>> ms;
  // Seed by seed, alternating the two, so a slow spell of the host falls on both.
  for (int k = 1; k <= p.seeds; ++k)
    for (const NormKind kind : kNormKinds)
      runner.run(config_of(p, data.vocab(), p.depth, Placement::pre, kind), options_of(p, p.base_lr, 0, p.steps),
                 static_cast<std::uint64_t>(k));
  for (const NormKind kind : kNormKinds) {
    auto rs = runner.seeds(config_of(p, data.vocab(), p.depth, Placement::pre, kind), options_of(p, p.base_lr, 0, p.steps));
    for (const Run* r : rs) ms[kind].push_back(r->median_step_ms);
    t.rows.push_back({std::string(model::norm_kind_name(kind)), of_seeds(diverged(rs), p.seeds), spread(vals(rs)),
                      spread(ms[kind], 2)});
    runs[kind] = std::move(rs);
  }
  const auto vl = vals(runs[NormKind::layer_norm]), vr = vals(runs[NormKind::rms_norm]);
  const double gap = median(finite(vr)) - median(finite(vl));
  const double noise = std::max(range_of(vl), range_of(vr));
  t.verdicts.push_back({"RMSNorm trains as well as LayerNorm", "001 (RMSNorm); Zhang & Sennrich 2019",
                        std::fabs(gap) <= noise ? "holds" : gap < 0 ? "holds (RMSNorm better)" : "does not hold",
                        "holds when the medians' difference is within the larger of the two seed ranges",
                        "val RMSNorm − LayerNorm = " + fixed(gap) + ", seed range " + fixed(noise)});
  t.verdicts.push_back({"RMSNorm makes a training step faster", "001 (RMSNorm)",
                        paired_below(ms[NormKind::rms_norm], ms[NormKind::layer_norm],
                                     kMinTimeEffect * median(ms[NormKind::layer_norm])),
                        paired_rule("RMSNorm's median step time", "LayerNorm's", ms[NormKind::rms_norm].size(),
                                    "1% of LayerNorm's"),
                        "ms per step: RMSNorm " + spread(ms[NormKind::rms_norm], 2) + ", LayerNorm " +
                            spread(ms[NormKind::layer_norm], 2) + paired_delta(ms[NormKind::rms_norm], ms[NormKind::layer_norm])});
  t.notes.push_back("At this width the norms are a small part of a step, so the step-time difference is small beside "
                    "the matrix products; `normkit profile` and `normkit bench` measure the norms themselves.");
  s.tables.push_back(std::move(t));
}

void placements(Study& s, Runner& runner, const model::TextData& data) {
  const Preset& p = s.preset;
  Table t;
  t.id = "placements";
  t.title = "Placements at lr " + fmt(s.stress_lr) + " without warmup (the warmup table's learning rate)";
  t.columns = {"placement", "diverged", "val loss, median (range)", "tail train loss"};
  struct Variant {
    Placement placement;
    bool qk;
  };
  const Variant variants[] = {{Placement::pre, false},      {Placement::post, false},   {Placement::sandwich, false},
                              {Placement::output, false},   {Placement::deepnorm, false}, {Placement::pre, true}};
  std::map<std::string, std::vector<double>> v;
  for (const Variant& var : variants) {
    model::Config c = config_of(p, data.vocab(), p.depth, var.placement);
    c.qk_norm = var.qk;
    auto rs = runner.seeds(c, options_of(p, s.stress_lr, 0, p.steps));
    std::vector<double> tails;
    for (const Run* r : rs) tails.push_back(r->diverged ? kInf : r->tail_loss);
    t.rows.push_back({name_of(c), of_seeds(diverged(rs), p.seeds), spread(vals(rs)), spread(tails)});
    v[name_of(c)] = vals(rs);
  }
  t.verdicts.push_back({"DeepNorm's scaled residual (α·x) and β-initialization stabilize post-norm without warmup",
                        "Wang et al. 2022 (DeepNet)", paired_below(v["deepnorm"], v["post"], kMinLossEffect),
                        paired_rule("DeepNorm's val loss", "post-norm's", v["post"].size(), "0.01 nats"),
                        "val deepnorm " + spread(v["deepnorm"]) + ", post " + spread(v["post"]) +
                            paired_delta(v["deepnorm"], v["post"])});
  t.verdicts.push_back({"QK-norm helps pre-norm at a high learning rate", "Dehghani et al. 2023; Wortsman et al. 2023",
                        paired_below(v["pre+qk-norm"], v["pre"], kMinLossEffect),
                        paired_rule("pre+QK-norm's val loss", "pre's", v["pre"].size(), "0.01 nats"),
                        "val pre+qk-norm " + spread(v["pre+qk-norm"]) + ", pre " + spread(v["pre"]) +
                            paired_delta(v["pre+qk-norm"], v["pre"])});
  t.notes.push_back("Sandwich and output norm leave the residual bypass outside normalization as pre-norm does (000 "
                    "§2.1); the texts make no claim about their loss, so their rows are measured without a verdict.");
  s.tables.push_back(std::move(t));
}

}  // namespace

std::int64_t planned_steps(const Preset& p) {
  const std::int64_t d = p.depth, S = p.steps, n = p.seeds;
  std::int64_t total = static_cast<std::int64_t>(p.probe_lrs.size()) * 2 * p.probe_steps * d;  // at most
  total += 4 * n * S * d;                       // warmup: pre and post, with and without
  total += 4 * n * p.stack_steps * p.stack_train_depth;  // the unnormalized stack: none and pre, two inits
  total += 2 * n * S * d;                       // final norm: pre (LayerNorm) with and without
  total += 1 * n * S * d;                       // RMSNorm (its LayerNorm twin is the final-norm run)
  total += 4 * n * S * d;                       // sandwich, output, deepnorm, pre+QK-norm
  return total;
}

Study run_study(const Preset& p, const model::TextData& data, const std::string& data_path,
                const std::function<void(const std::string&, double)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  Study s;
  s.preset = p;
  s.data_path = data_path;
  s.vocab = data.vocab();
  s.train_tokens = static_cast<std::int64_t>(data.train().size());
  s.val_tokens = static_cast<std::int64_t>(data.val().size());
  Runner runner(s, data, progress);
  gradients_at_init(s, data);
  warmup(s, runner, data);
  unnormalized_stack(s, runner, data);
  final_norm(s, runner, data);
  layernorm_vs_rmsnorm(s, runner, data);
  placements(s, runner, data);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace normkit::study
