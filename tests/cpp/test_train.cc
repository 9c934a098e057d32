// Training the model of model/: the schedule, AdamW's first step, seeded
// determinism, divergence, and a short run on the shipped text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/text_data.hpp"
#include "model/train.hpp"

namespace {

namespace nm = normkit::model;

TEST(Schedule, WarmupThenCosineToTheFloor) {
  // 10 warmup steps of 110: lr·(s+1)/10, then cosine from lr (step 10) to min_lr (step 109).
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(1.0, 0.1, 10, 110, 0), 0.1);
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(1.0, 0.1, 10, 110, 4), 0.5);
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(1.0, 0.1, 10, 110, 10), 1.0);
  EXPECT_NEAR(nm::scheduled_lr(1.0, 0.1, 10, 110, 10 + 99 / 2), 0.55, 0.02);
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(1.0, 0.1, 10, 110, 109), 0.1);
  // No warmup: the first step runs at the peak.
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(2.0, 0.2, 0, 50, 0), 2.0);
  EXPECT_DOUBLE_EQ(nm::scheduled_lr(2.0, 0.2, 0, 50, 49), 0.2);
}

// With bias-corrected moments, AdamW's first step moves each weight by
// lr·g/(|g| + eps) against its gradient, after the decoupled decay lr·wd·θ
// (matrices only).
TEST(AdamW, FirstStepIsSignedLearningRatePlusDecay) {
  std::vector<nm::ParamInfo> tensors = {{"w", 0, 2, 0, true}, {"gain", 2, 2, 0, false}};
  std::vector<float> p = {1.0f, -2.0f, 1.0f, 1.0f}, g = {0.5f, -3.0f, 1e-3f, -2.0f};
  nm::AdamWConfig c;
  c.eps = 0;
  c.weight_decay = 0.1;
  nm::AdamW opt(p.size(), c);
  opt.step(p, g, tensors, 0.01);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.01f * 0.1f - 0.01f);
  EXPECT_FLOAT_EQ(p[1], -2.0f + 0.01f * 0.1f * 2.0f + 0.01f);
  EXPECT_FLOAT_EQ(p[2], 1.0f - 0.01f);
  EXPECT_FLOAT_EQ(p[3], 1.0f + 0.01f);
}

nm::Config small_config(const nm::TextData& data) {
  nm::Config c;
  c.vocab = data.vocab();
  c.context = 32;
  c.width = 48;
  c.heads = 4;
  c.ffn = 192;
  c.depth = 2;
  return c;
}

TEST(Training, SameSeedSameRun) {
  const auto data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  nm::TrainOptions o;
  o.steps = 5;
  o.seq = 32;
  o.eval_every = 5;
  std::vector<double> losses[2];
  for (auto& l : losses) {
    nm::Model<float> m(small_config(data));
    m.init(4);
    nm::train(m, data, o, [&](const nm::StepReport& r) { l.push_back(r.loss); });
  }
  ASSERT_EQ(losses[0].size(), 5u);
  EXPECT_EQ(losses[0], losses[1]);
}

TEST(Training, DivergenceStopsAndNamesTheStep) {
  const auto data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  nm::TrainOptions o;
  o.steps = 10;
  o.seq = 32;
  o.max_loss = 1.0;  // below the initial ln(vocab): the first step is over the bound
  nm::Model<float> m(small_config(data));
  m.init(1);
  auto r = nm::train(m, data, o);
  EXPECT_TRUE(r.diverged);
  EXPECT_EQ(r.steps_done, 0);
  EXPECT_EQ(r.message.rfind("diverged at step 0: training loss ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find("is above the bound 1"), std::string::npos) << r.message;

  // A NaN weight: a non-finite loss, reported as such, and no crash.
  o.max_loss = 0;
  m.init(1);
  m.params()[m.tensors()[2].offset] = std::numeric_limits<float>::quiet_NaN();
  r = nm::train(m, data, o);
  EXPECT_TRUE(r.diverged);
  EXPECT_EQ(r.message, "diverged at step 0: training loss nan");
}

// 300 steps of the default pre-norm model on the shipped text (a few
// seconds): the validation loss ends far below ln(vocab), the loss of a
// uniform guess, and below the ≈ 3 nats of a unigram (letter-frequency) model,
// so the model uses its context.
TEST(Training, LossFallsWellBelowLnVocabOnShippedText) {
  const auto data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  nm::Model<float> m(small_config(data));
  m.init(1);
  nm::TrainOptions o;
  o.steps = 300;
  o.batch = 16;
  o.seq = 32;
  o.lr = 3e-3;
  o.warmup = 20;
  o.eval_every = 100;
  o.eval_windows = 32;
  const auto r = nm::train(m, data, o);
  ASSERT_FALSE(r.diverged) << r.message;
  ASSERT_TRUE(r.last_val_loss.has_value());
  const double ln_vocab = std::log(static_cast<double>(data.vocab()));
  std::printf("vocab %lld (ln %.3f): training loss %.3f -> %.3f, validation loss %.3f\n",
              static_cast<long long>(data.vocab()), ln_vocab, r.first_loss, r.last_loss, *r.last_val_loss);
  EXPECT_NEAR(r.first_loss, ln_vocab, 0.3);
  EXPECT_LT(*r.last_val_loss, 2.5);
}

}  // namespace
