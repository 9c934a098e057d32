// Training the model of model/: the schedule, AdamW's first step, seeded
// determinism, divergence, a short run on the shipped text, checkpoints and
// sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "model/checkpoint.hpp"
#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/sample.hpp"
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

namespace {

// A trained model saved and loaded back gives bitwise the same logits, with
// its config and vocabulary; broken files are refused with the reason.
TEST(Checkpoint, RoundTripAndBrokenFiles) {
  const auto data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  nm::Config c = small_config(data);
  c.placement = nm::Placement::sandwich;
  c.norm = normkit::NormKind::rms_norm;
  c.tie_embeddings = true;
  c.ffn_kind = nm::FfnKind::swiglu;
  c.qk_norm = true;
  c.weight_offset = 1;
  c.positions = nm::Positions::sinusoidal;
  nm::Model<float> m(c);
  m.init(2);
  nm::TrainOptions o;
  o.steps = 3;
  o.seq = 32;
  nm::train(m, data, o);
  const std::string path = ::testing::TempDir() + "normkit_model_checkpoint.bin";
  nm::save_checkpoint(path, m, data.vocabulary());

  const nm::Checkpoint ck = nm::load_checkpoint(path);
  EXPECT_EQ(ck.vocabulary, data.vocabulary());
  EXPECT_EQ(ck.config.placement, nm::Placement::sandwich);
  EXPECT_EQ(ck.config.norm, normkit::NormKind::rms_norm);
  EXPECT_TRUE(ck.config.tie_embeddings);
  EXPECT_EQ(ck.config.ffn_kind, nm::FfnKind::swiglu);
  EXPECT_TRUE(ck.config.qk_norm);
  EXPECT_EQ(ck.config.weight_offset, 1.0);
  EXPECT_EQ(ck.config.positions, nm::Positions::sinusoidal);
  EXPECT_EQ(ck.config.width, c.width);
  nm::Model<float> back = nm::model_from(ck);
  const auto tokens = std::vector<std::int32_t>(data.train().begin(), data.train().begin() + 64);
  m.forward(tokens, 2, 32);
  back.forward(tokens, 2, 32);
  ASSERT_EQ(m.logits().size(), back.logits().size());
  EXPECT_EQ(std::memcmp(m.logits().data(), back.logits().data(), m.logits().size() * sizeof(float)), 0);

  // Truncated by one byte, and a file that is not a checkpoint.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 1));
  }
  try {
    nm::load_checkpoint(path);
    ADD_FAILURE() << "a truncated checkpoint was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bytes, its header describes"), std::string::npos) << e.what();
  }
  try {
    nm::load_checkpoint(NORMKIT_TEST_TEXT);
    ADD_FAILURE() << "a text file was read as a checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a normkit model checkpoint"), std::string::npos) << e.what();
  }
}

// Sampling at a low temperature from the trained model of the shipped text
// continues a prompt with bytes of the text's vocabulary; the same seed gives
// the same text.
TEST(Sample, SeededAndWithinTheVocabulary) {
  const auto data = nm::TextData::load(NORMKIT_TEST_TEXT, 0.1);
  nm::Model<float> m(small_config(data));
  m.init(1);
  const std::vector<std::int32_t> prompt(data.train().begin(), data.train().begin() + 40);  // longer than context
  nm::Rng a(9), b(9);
  const auto x = nm::sample(m, prompt, 20, 0.5, a);
  const auto y = nm::sample(m, prompt, 20, 0.5, b);
  ASSERT_EQ(x.size(), 20u);
  EXPECT_EQ(x, y);
  for (std::int32_t id : x) EXPECT_TRUE(id >= 0 && id < data.vocab());
}

}  // namespace
