// The study's report: Markdown for a reader, JSON for the plots, and the
// screenful the command prints.
#include <cmath>
#include <sstream>

#include "study/stats.hpp"
#include "study/study.hpp"

namespace normkit::study {

namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string q(const std::string& s) {
  std::string o = "\"";
  o += escape(s);
  o += '"';
  return o;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string nums(const std::vector<double>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) o += ',';
    o += num(v[i]);
  }
  return o + "]";
}

std::string strs(const std::vector<std::string>& v) {
  std::string o = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) o += ',';
    o += q(v[i]);
  }
  return o + "]";
}

std::string run_json(const Run& r) {
  const model::Config& c = r.config;
  std::ostringstream o;
  o << "{\"label\":" << q(r.label) << ",\"seed\":" << r.seed << ",\"placement\":" << q(std::string(model::placement_name(c.placement)))
    << ",\"norm\":" << q(std::string(model::norm_kind_name(c.norm))) << ",\"qk_norm\":" << (c.qk_norm ? "true" : "false")
    << ",\"final_norm\":" << (c.final_norm ? "true" : "false") << ",\"init\":" << q(std::string(model::init_scheme_name(c.init))) << ",\"depth\":" << c.depth << ",\"lr\":" << num(r.train.lr)
    << ",\"warmup\":" << r.train.warmup << ",\"steps\":" << r.train.steps << ",\"steps_done\":" << r.steps_done
    << ",\"diverged\":" << (r.diverged ? "true" : "false") << ",\"message\":" << q(r.message)
    << ",\"val_loss\":" << num(r.val_loss) << ",\"tail_loss\":" << num(r.tail_loss)
    << ",\"median_step_ms\":" << num(r.median_step_ms) << ",\"head_rms_cv\":" << num(r.head_rms_cv)
    << ",\"stream_rms\":" << nums(r.stream_rms) << ",\"loss\":" << nums(r.loss) << "}";
  return o.str();
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string o = "|";
  for (const auto& c : cells) o += " " + c + " |";
  return o + "\n";
}

// The plot each table has, as bench/plot_study.py names it.
std::string plot_of(const std::string& id) {
  if (id == "gradients_at_init") return "gradients_at_init.png";
  if (id == "warmup") return "warmup.png";
  if (id == "unnormalized_stack") return "unnormalized_stack.png";
  if (id == "final_norm" || id == "layernorm_vs_rmsnorm" || id == "placements") return id + ".png";
  return "";
}

std::string setup_line(const Study& s) {
  const Preset& p = s.preset;
  std::ostringstream o;
  o << "Byte-level decoder, width " << p.width << ", " << p.heads << " heads, FFN " << p.ffn << ", context "
    << p.context << ", batch " << p.batch << "; text " << s.data_path << " (vocabulary " << s.vocab << ", "
    << s.train_tokens << " training and " << s.val_tokens << " validation bytes); training tables at depth "
    << p.depth << ", " << p.steps << " steps, " << p.seeds << " seeds per configuration; gradients at init over "
    << p.grad_seeds << " seeds. " << s.runs.size() << " training runs, " << fixed(s.seconds / 60.0, 1) << " min.";
  return o.str();
}

}  // namespace

std::string json(const Study& s) {
  const Preset& p = s.preset;
  std::ostringstream o;
  o << "{\"preset\":{\"name\":" << q(p.name) << ",\"width\":" << p.width << ",\"heads\":" << p.heads << ",\"ffn\":" << p.ffn
    << ",\"context\":" << p.context << ",\"batch\":" << p.batch << ",\"depth\":" << p.depth << ",\"steps\":" << p.steps
    << ",\"seeds\":" << p.seeds << ",\"grad_seeds\":" << p.grad_seeds << ",\"warmup\":" << p.warmup
    << ",\"base_lr\":" << num(p.base_lr) << ",\"stack_train_depth\":" << p.stack_train_depth << ",\"stack_steps\":" << p.stack_steps << "}";
  o << ",\"data\":{\"path\":" << q(s.data_path) << ",\"vocab\":" << s.vocab << ",\"train_tokens\":" << s.train_tokens
    << ",\"val_tokens\":" << s.val_tokens << "},\"seconds\":" << num(s.seconds) << ",\"stress_lr\":" << num(s.stress_lr)
    << ",\"stress_reason\":" << q(s.stress_reason);
  o << ",\"gradients\":[";
  for (std::size_t i = 0; i < s.gradients.size(); ++i) {
    const auto& g = s.gradients[i];
    o << (i ? "," : "") << "{\"init\":" << q(std::string(model::init_scheme_name(g.init)))
      << ",\"placement\":" << q(std::string(model::placement_name(g.placement))) << ",\"depth\":" << g.depth
      << ",\"per_block\":" << nums(g.per_block) << ",\"first_over_last\":" << nums(g.first_over_last) << "}";
  }
  o << "],\"stack_init\":[";
  for (std::size_t i = 0; i < s.stack_init.size(); ++i) {
    const auto& g = s.stack_init[i];
    o << (i ? "," : "") << "{\"init\":" << q(std::string(model::init_scheme_name(g.init)))
      << ",\"placement\":" << q(std::string(model::placement_name(g.placement))) << ",\"depth\":" << g.depth
      << ",\"stream_rms\":" << nums(g.stream_rms) << "}";
  }
  o << "],\"runs\":[";
  for (std::size_t i = 0; i < s.runs.size(); ++i) o << (i ? "," : "") << run_json(s.runs[i]);
  o << "],\"tables\":[";
  for (std::size_t i = 0; i < s.tables.size(); ++i) {
    const Table& t = s.tables[i];
    o << (i ? "," : "") << "{\"id\":" << q(t.id) << ",\"title\":" << q(t.title) << ",\"columns\":" << strs(t.columns)
      << ",\"rows\":[";
    for (std::size_t r = 0; r < t.rows.size(); ++r) o << (r ? "," : "") << strs(t.rows[r]);
    o << "],\"verdicts\":[";
    for (std::size_t v = 0; v < t.verdicts.size(); ++v) {
      const Verdict& x = t.verdicts[v];
      o << (v ? "," : "") << "{\"claim\":" << q(x.claim) << ",\"source\":" << q(x.source) << ",\"outcome\":" << q(x.outcome)
        << ",\"rule\":" << q(x.rule) << ",\"measured\":" << q(x.measured) << "}";
    }
    o << "],\"notes\":" << strs(t.notes) << "}";
  }
  o << "]}\n";
  return o.str();
}

std::string markdown(const Study& s, bool with_plots) {
  std::ostringstream o;
  o << "# normkit study (" << s.preset.name << ")\n\n"
    << "The texts' claims about normalization inside a transformer, each measured on normkit's model "
       "(`model/`), whose every norm is a normkit kernel. " << setup_line(s) << "\n\n"
    << "A verdict is *holds*, *does not hold*, *unclear* (the seeds disagree) or *negligible* (they agree, on "
       "an effect too small to matter) by the rule written beside it; paired comparisons pair runs of the same "
       "seed (the same initialization and batches).\n\n## Verdicts\n\n"
    << md_row({"claim", "source", "outcome", "measured"}) << md_row({"---", "---", "---", "---"});
  for (const Table& t : s.tables)
    for (const Verdict& v : t.verdicts) o << md_row({v.claim, v.source, "**" + v.outcome + "**", v.measured});
  for (const Table& t : s.tables) {
    o << "\n## " << t.title << "\n\n" << md_row(t.columns);
    std::vector<std::string> rule(t.columns.size(), "---");
    o << md_row(rule);
    for (const auto& r : t.rows) o << md_row(r);
    o << "\n";
    for (const Verdict& v : t.verdicts)
      o << "- **" << v.outcome << "**: " << v.claim << " (" << v.source << "). " << v.measured << ". Rule: " << v.rule
        << ".\n";
    for (const std::string& n : t.notes) o << "\n" << n << "\n";
    const std::string png = plot_of(t.id);
    if (with_plots && !png.empty()) o << "\n![" << t.title << "](" << png << ")\n";
  }
  return o.str();
}

std::string summary(const Study& s) {
  std::ostringstream o;
  o << "normkit study (" << s.preset.name << "): " << s.tables.size() << " tables, " << s.runs.size()
    << " training runs in " << fixed(s.seconds / 60.0, 1) << " min; " << s.preset.seeds << " seeds per training figure, "
    << s.preset.grad_seeds << " at init\n\n";
  for (const Table& t : s.tables)
    for (const Verdict& v : t.verdicts) {
      std::string tag = "[" + v.outcome + "]";
      tag.resize(std::max<std::size_t>(tag.size(), 16), ' ');
      o << "  " << tag << " " << v.claim << "\n" << std::string(19, ' ') << v.measured << "\n";
    }
  o << "\n  warmup table's learning rate: " << fmt(s.stress_lr) << " (" << s.stress_reason << ")\n";
  return o.str();
}

}  // namespace normkit::study
