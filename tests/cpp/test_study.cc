// `normkit study` at a tiny size: every table is built, consistent and
// decided by one of its rules; a run that diverges is reported, not fatal.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "model/text_data.hpp"
#include "study/study.hpp"

namespace {

namespace ns = normkit::study;
namespace nm = normkit::model;

const nm::TextData& text() {
  static const nm::TextData data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  return data;
}

const ns::Study& tiny_study() {
  static const ns::Study s = ns::run_study(ns::tiny_preset(), text(), NORMKIT_TEST_TEXT);
  return s;
}

TEST(Study, EveryTableIsBuiltAndDecided) {
  const ns::Study& s = tiny_study();
  std::vector<std::string> ids;
  for (const auto& t : s.tables) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"gradients_at_init", "warmup_probe", "warmup", "unnormalized_stack",
                                           "final_norm", "layernorm_vs_rmsnorm", "placements"}));
  const std::set<std::string> outcomes = {"holds", "does not hold", "unclear", "negligible", "holds (RMSNorm better)"};
  std::size_t verdicts = 0;
  for (const auto& t : s.tables) {
    EXPECT_FALSE(t.rows.empty()) << t.id;
    for (const auto& r : t.rows) EXPECT_EQ(r.size(), t.columns.size()) << t.id;
    for (const auto& v : t.verdicts) {
      EXPECT_TRUE(outcomes.count(v.outcome)) << t.id << ": " << v.outcome;
      EXPECT_FALSE(v.rule.empty() || v.measured.empty() || v.source.empty()) << t.id << ": " << v.claim;
    }
    verdicts += t.verdicts.size();
  }
  EXPECT_EQ(verdicts, 17u);
}

TEST(Study, TablesHoldTheirRunsAndProfiles) {
  const ns::Study& s = tiny_study();
  const ns::Preset p = ns::tiny_preset();
  // 4 placements at each depth, a gradient norm per block, finite and > 0.
  ASSERT_EQ(s.gradients.size(), 2 * 4 * p.grad_depths.size());  // two inits, four placements
  for (const auto& g : s.gradients) {
    ASSERT_EQ(static_cast<std::int64_t>(g.per_block.size()), g.depth);
    for (const double v : g.per_block) EXPECT_TRUE(std::isfinite(v) && v > 0);
    EXPECT_EQ(g.first_over_last.size(), static_cast<std::size_t>(p.grad_seeds));
  }
  for (const auto& sp : s.stack_init) EXPECT_EQ(static_cast<std::int64_t>(sp.stream_rms.size()), 2 * sp.depth + 1);
  // Shared configurations ran once: no two runs have the same label and seed.
  std::set<std::string> keys;
  for (const auto& r : s.runs) EXPECT_TRUE(keys.insert(r.label + "/" + std::to_string(r.seed)).second) << r.label;
  std::int64_t block_steps = 0;
  for (const auto& r : s.runs) {
    block_steps += r.train.steps * r.config.depth;
    if (!r.diverged) {
      EXPECT_EQ(r.steps_done, r.train.steps) << r.label;
      EXPECT_EQ(static_cast<std::int64_t>(r.stream_rms.size()), 2 * r.config.depth + 1) << r.label;
      EXPECT_TRUE(std::isfinite(r.val_loss)) << r.label;
    }
  }
  EXPECT_LE(block_steps, ns::planned_steps(p)) << "the time estimate must bound what runs";
  EXPECT_GT(s.stress_lr, 0.0);
  // The report names every table and the JSON carries every run.
  const std::string md = ns::markdown(s, false), js = ns::json(s);
  for (const auto& t : s.tables) EXPECT_NE(md.find(t.title), std::string::npos) << t.id;
  EXPECT_EQ(md.find(".png"), std::string::npos) << "no plot links without plots";
  std::size_t labels = 0;
  for (std::size_t at = js.find("\"label\":"); at != std::string::npos; at = js.find("\"label\":", at + 1)) ++labels;
  EXPECT_EQ(labels, s.runs.size());
}

TEST(Study, ADivergingRunIsReportedWithItsStep) {
  nm::Config c;
  c.vocab = text().vocab();
  c.context = 16;
  c.width = 16;
  c.heads = 2;
  c.ffn = 32;
  c.depth = 2;
  c.placement = nm::Placement::none;
  nm::TrainOptions o;
  o.steps = 40;
  o.batch = 4;
  o.seq = 16;
  o.lr = 50;  // far past any stable rate
  o.clip = 0;
  const ns::Run r = ns::train_run("too fast", c, o, 1, text());
  EXPECT_TRUE(r.diverged);
  EXPECT_NE(r.message.find("diverged at step"), std::string::npos) << r.message;
  EXPECT_TRUE(std::isnan(r.val_loss));
  EXPECT_LT(r.steps_done, o.steps);
}

}  // namespace
