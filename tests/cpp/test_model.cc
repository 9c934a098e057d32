// The language model of model/: its hand-written backward against finite
// differences for every placement and norm kind, causality, and the
// rejection of bad configurations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "model/config.hpp"
#include "model/model.hpp"
#include "model/rng.hpp"

namespace {

using normkit::model::Config;
using normkit::model::Model;
using normkit::NormKind;
using normkit::model::norm_kind_name;
using normkit::model::Placement;
using normkit::model::Rng;

Config tiny_config(Placement p, NormKind k, bool final_norm) {
  Config c;
  c.vocab = 7;
  c.context = 6;
  c.width = 8;
  c.heads = 2;
  c.ffn = 12;
  c.depth = 2;
  c.placement = p;
  c.norm = k;
  c.final_norm = final_norm;
  c.tie_embeddings = !final_norm;  // both head variants are covered
  return c;
}

std::vector<std::int32_t> random_tokens(Rng& rng, std::size_t n, std::int64_t vocab) {
  std::vector<std::int32_t> t(n);
  for (auto& v : t) v = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return t;
}

// The message of the std::invalid_argument that f throws.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

using GradCase = std::tuple<Placement, NormKind, bool>;

class ModelGradient : public ::testing::TestWithParam<GradCase> {};

// f64 throughout: normkit's ops take f64 activations and weights, so the
// central difference is limited by its truncation (h² · f''' ≈ 1e-11) and
// rounding (2⁻⁵³ · loss / h ≈ 1e-11) terms, and any mistake in the backward
// (a missed path, a wrong transpose) shows as an error many orders above the
// tolerance below.
void check_gradient(const Config& c) {
  Model<double> m(c);
  m.init(7);
  // Move every parameter off its initial value so that gains are not 1 and
  // biases are not 0, which would hide terms of their gradients.
  Rng rng(11);
  for (double& p : m.params()) p += 0.1 * rng.normal();
  const std::int64_t batch = 2, seq = 5;  // seq < context: a shorter sequence than the model's
  const auto tokens = random_tokens(rng, batch * seq, m.config().vocab);
  const auto targets = random_tokens(rng, batch * seq, m.config().vocab);

  auto loss_at = [&] {
    m.forward(tokens, batch, seq);
    return m.loss(targets);
  };
  loss_at();
  m.backward();
  const std::vector<double> analytic(m.grads().begin(), m.grads().end());

  const double h = 1e-5, atol = 1e-8, rtol = 1e-6;
  double worst = 0;  // (|fd − analytic|) / (atol + rtol·|fd|); passes when <= 1
  std::string worst_where;
  double worst_fd = 0, worst_an = 0;
  for (const auto& t : m.tensors()) {
    double norm = 0;
    for (std::int64_t i = 0; i < t.size; ++i) {
      const std::size_t k = static_cast<std::size_t>(t.offset + i);
      double& p = m.params()[k];
      const double saved = p;
      p = saved + h;
      const double up = loss_at();
      p = saved - h;
      const double down = loss_at();
      p = saved;
      const double fd = (up - down) / (2 * h);
      const double ratio = std::abs(fd - analytic[k]) / (atol + rtol * std::abs(fd));
      if (!(ratio <= worst)) {
        worst = ratio;
        worst_where = t.name + "[" + std::to_string(i) + "]";
        worst_fd = fd;
        worst_an = analytic[k];
      }
      norm += analytic[k] * analytic[k];
    }
    EXPECT_GT(norm, 0.0) << t.name << " gets no gradient";
  }
  EXPECT_LE(worst, 1.0) << "worst element " << worst_where << ": analytic " << worst_an
                        << ", central difference " << worst_fd << ", " << worst
                        << "× the tolerance atol 1e-8 + rtol 1e-6·|fd|";
}

TEST_P(ModelGradient, MatchesCentralDifferences) {
  const auto [placement, kind, final_norm] = GetParam();
  check_gradient(tiny_config(placement, kind, final_norm));
}

INSTANTIATE_TEST_SUITE_P(
    EveryPlacementAndNorm, ModelGradient,
    ::testing::Combine(::testing::ValuesIn(normkit::model::kPlacements),
                       ::testing::ValuesIn(normkit::kNormKinds), ::testing::Bool()),
    [](const ::testing::TestParamInfo<GradCase>& p) {
      return std::string(placement_name(std::get<0>(p.param))) + "_" +
             std::string(norm_kind_name(std::get<1>(p.param))) +
             (std::get<2>(p.param) ? "_final_norm" : "_tied_no_final_norm");
    });

using CausalCase = std::tuple<Placement, NormKind>;

std::string case_name(const ::testing::TestParamInfo<CausalCase>& p) {
  return std::string(placement_name(std::get<0>(p.param))) + "_" + std::string(norm_kind_name(std::get<1>(p.param)));
}

// QK-norm under every placement; with RMSNorm also Gemma's gain offset of 1
// (weights that start at 0), so that both options' gradients are checked.
class ModelGradientQkNorm : public ::testing::TestWithParam<CausalCase> {};

TEST_P(ModelGradientQkNorm, MatchesCentralDifferences) {
  const auto [placement, kind] = GetParam();
  Config c = tiny_config(placement, kind, true);
  c.qk_norm = true;
  if (kind == NormKind::rms_norm) c.weight_offset = 1;
  check_gradient(c);
}

INSTANTIATE_TEST_SUITE_P(EveryPlacementAndNorm, ModelGradientQkNorm,
                         ::testing::Combine(::testing::ValuesIn(normkit::model::kPlacements),
                                            ::testing::ValuesIn(normkit::kNormKinds)),
                         case_name);

// The SwiGLU MLP in place of GELU, under every placement and norm kind.
class ModelGradientSwiGLU : public ::testing::TestWithParam<CausalCase> {};

TEST_P(ModelGradientSwiGLU, MatchesCentralDifferences) {
  const auto [placement, kind] = GetParam();
  Config c = tiny_config(placement, kind, true);
  c.ffn_kind = normkit::model::FfnKind::swiglu;
  check_gradient(c);
}

INSTANTIATE_TEST_SUITE_P(EveryPlacementAndNorm, ModelGradientSwiGLU,
                         ::testing::Combine(::testing::ValuesIn(normkit::model::kPlacements),
                                            ::testing::ValuesIn(normkit::kNormKinds)),
                         case_name);

// Fixed sinusoidal positions in place of the learned table.
class ModelGradientSinusoidal : public ::testing::TestWithParam<CausalCase> {};

TEST_P(ModelGradientSinusoidal, MatchesCentralDifferences) {
  const auto [placement, kind] = GetParam();
  Config c = tiny_config(placement, kind, true);
  c.positions = normkit::model::Positions::sinusoidal;
  check_gradient(c);
}

INSTANTIATE_TEST_SUITE_P(PreAndPost, ModelGradientSinusoidal,
                         ::testing::Combine(::testing::Values(Placement::pre, Placement::post),
                                            ::testing::ValuesIn(normkit::kNormKinds)),
                         case_name);

TEST(ModelPositions, SinusoidsAreFixedAndDistinguishPositions) {
  Config c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.positions = normkit::model::Positions::sinusoidal;
  Model<double> m(c);
  for (const auto& t : m.tensors()) EXPECT_NE(t.name, "wpe") << "sinusoidal positions have no parameters";
  m.init(1);
  // The same token at two positions reaches the head differently.
  const std::vector<std::int32_t> same(6, 3);
  m.forward(same, 1, 6);
  const auto l = m.logits();
  const std::size_t V = static_cast<std::size_t>(c.vocab);
  EXPECT_NE(std::vector<double>(l.begin(), l.begin() + V), std::vector<double>(l.begin() + V, l.begin() + 2 * V));
  EXPECT_EQ(error_of([] { normkit::model::parse_positions("rotary"); }),
            "unknown positions 'rotary' (expected learned or sinusoidal)");
}

class ModelCausality : public ::testing::TestWithParam<CausalCase> {};

// Changing the tokens from position k on leaves the logits of positions
// before k bitwise unchanged, in the f32 model that trains.
TEST_P(ModelCausality, LaterTokensLeaveEarlierLogitsBitwiseUnchanged) {
  const auto [placement, kind] = GetParam();
  for (const bool qk_norm : {false, true}) {
  SCOPED_TRACE(qk_norm ? "with QK-norm" : "without QK-norm");
  Config c = tiny_config(placement, kind, true);
  c.context = 12;
  c.vocab = 11;
  c.qk_norm = qk_norm;
  Model<float> m(c);
  m.init(3);
  Rng rng(5);
  const std::int64_t batch = 2, seq = 12, k = 7;
  const auto a = random_tokens(rng, batch * seq, c.vocab);
  auto b = a;
  for (std::int64_t r = 0; r < batch; ++r)
    for (std::int64_t t = k; t < seq; ++t) {
      auto& v = b[static_cast<std::size_t>(r * seq + t)];
      v = static_cast<std::int32_t>((v + 1 + static_cast<std::int32_t>(rng.below(9))) % c.vocab);
    }
  m.forward(a, batch, seq);
  const std::vector<float> la(m.logits().begin(), m.logits().end());
  m.forward(b, batch, seq);
  const std::vector<float> lb(m.logits().begin(), m.logits().end());
  const std::size_t V = static_cast<std::size_t>(c.vocab);
  for (std::int64_t r = 0; r < batch; ++r) {
    for (std::int64_t t = 0; t < seq; ++t) {
      const std::size_t row = static_cast<std::size_t>(r * seq + t) * V;
      const bool same = std::memcmp(la.data() + row, lb.data() + row, V * sizeof(float)) == 0;
      if (t < k)
        EXPECT_TRUE(same) << "sequence " << r << ", position " << t << " changed";
      else
        EXPECT_FALSE(same) << "sequence " << r << ", position " << t << " did not see its changed tokens";
    }
  }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPlacementAndNorm, ModelCausality,
                         ::testing::Combine(::testing::ValuesIn(normkit::model::kPlacements),
                                            ::testing::ValuesIn(normkit::kNormKinds)),
                         case_name);

class ModelBlocks : public ::testing::TestWithParam<CausalCase> {};

// block() applied sublayer after sublayer to the embedding reproduces the
// residual streams of forward() bitwise (pre-norm's add, fused there and
// plain here, rounds the same sum once), and sublayer() is S alone: for the
// placement none, block(x) = x + sublayer(x) exactly.
TEST_P(ModelBlocks, ChainToTheForwardStreams) {
  const auto [placement, kind] = GetParam();
  Config c = tiny_config(placement, kind, true);
  c.qk_norm = kind == NormKind::rms_norm;
  Model<float> m(c);
  m.init(4);
  Rng rng(8);
  const std::int64_t batch = 2, seq = 5, D = c.width;
  const auto tokens = random_tokens(rng, batch * seq, c.vocab);
  m.forward(tokens, batch, seq);
  const std::vector<double> expected = m.stream_rms();

  std::int64_t wte = -1, wpe = -1;
  for (const auto& t : m.tensors()) {
    if (t.name == "wte") wte = t.offset;
    if (t.name == "wpe") wpe = t.offset;
  }
  std::vector<float> x(static_cast<std::size_t>(batch * seq * D)), y(x.size()), s(x.size());
  for (std::int64_t n = 0; n < batch * seq; ++n)
    for (std::int64_t d = 0; d < D; ++d)
      x[static_cast<std::size_t>(n * D + d)] = m.params()[static_cast<std::size_t>(wte + tokens[n] * D + d)] +
                                               m.params()[static_cast<std::size_t>(wpe + (n % seq) * D + d)];
  auto rms = [](const std::vector<float>& v) {
    double q = 0;
    for (const float e : v) q += static_cast<double>(e) * static_cast<double>(e);
    return std::sqrt(q / static_cast<double>(v.size()));
  };
  ASSERT_EQ(expected.size(), m.sublayer_count() + 1);
  EXPECT_EQ(rms(x), expected[0]);
  for (std::size_t j = 0; j < m.sublayer_count(); ++j) {
    m.block(j, x, batch, seq, y);
    EXPECT_EQ(rms(y), expected[j + 1]) << "stream after sublayer " << j;
    if (placement == Placement::none) {
      m.sublayer(j, x, batch, seq, s);
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] + s[i]) << "sublayer " << j << ", element " << i;
    }
    x = y;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPlacementAndNorm, ModelBlocks,
                         ::testing::Combine(::testing::ValuesIn(normkit::model::kPlacements),
                                            ::testing::ValuesIn(normkit::kNormKinds)),
                         case_name);


TEST(ModelConfig, BadConfigurationsNameTheArgument) {
  Config c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.heads = 3;
  EXPECT_EQ(error_of([&] { Model<float> m(c); }), "model config: heads = 3 does not divide width = 8");
  c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.context = 0;
  EXPECT_EQ(error_of([&] { Model<float> m(c); }), "model config: context = 0, expected at least 1");
  c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.placement = static_cast<Placement>(42);
  EXPECT_EQ(error_of([&] { Model<float> m(c); }), "model config: unknown placement (enum value 42)");
  EXPECT_EQ(error_of([] { normkit::model::parse_placement("prenorm"); }),
            "unknown placement 'prenorm' (expected pre, post, sandwich, output, none or deepnorm)");
  EXPECT_EQ(error_of([] { normkit::model::parse_norm_kind("batchnorm"); }),
            "unknown norm 'batchnorm' (expected layernorm or rmsnorm)");
  EXPECT_EQ(error_of([] { normkit::model::parse_ffn_kind("relu"); }),
            "unknown ffn kind 'relu' (expected gelu or swiglu)");
  c = tiny_config(Placement::pre, NormKind::rms_norm, true);
  c.weight_offset = 0.5;
  EXPECT_EQ(error_of([&] { Model<float> m(c); }), "model config: weight_offset = 0.500000, expected 0 or 1");
  c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.weight_offset = 1;
  EXPECT_EQ(error_of([&] { Model<float> m(c); }),
            "model config: weight_offset = 1 needs norm = rmsnorm (LayerNorm's gain has no offset)");
}

TEST(ModelBlocksArgs, RejectBadSublayerAndShapes) {
  Model<float> m(tiny_config(Placement::post, NormKind::layer_norm, true));
  m.init(1);
  std::vector<float> x(16), y(16), short_y(8);
  EXPECT_EQ(error_of([&] { m.block(4, x, 1, 2, y); }), "model block: sublayer 4, the model has 4");
  EXPECT_EQ(error_of([&] { m.sublayer(0, x, 1, 2, short_y); }),
            "model sublayer: input has 16 and output 8 elements, expected batch·seq·width = 16");
  EXPECT_EQ(error_of([&] { m.block(0, x, 1, 7, y); }),
            "model block: batch = 1, seq = 7; expected batch >= 1 and 1 <= seq <= context = 6");
}

TEST(ModelConfig, NamesRoundTrip) {
  for (Placement p : normkit::model::kPlacements)
    EXPECT_EQ(normkit::model::parse_placement(placement_name(p)), p);
  for (NormKind k : normkit::kNormKinds) EXPECT_EQ(normkit::model::parse_norm_kind(norm_kind_name(k)), k);
}

TEST(ModelForward, RejectsBadShapesAndIds) {
  Model<float> m(tiny_config(Placement::pre, NormKind::rms_norm, true));
  m.init(1);
  const std::vector<std::int32_t> seven(7, 1);
  EXPECT_EQ(error_of([&] { m.forward(seven, 1, 7); }),
            "model forward: batch = 1, seq = 7; expected batch >= 1 and 1 <= seq <= context = 6");
  EXPECT_EQ(error_of([&] { m.forward(seven, 2, 3); }), "model forward: tokens has 7 ids, expected batch·seq = 6");
  const std::vector<std::int32_t> bad = {0, 1, 7};
  EXPECT_EQ(error_of([&] { m.forward(bad, 1, 3); }), "model forward: token id 7 outside [0, vocab = 7)");
}

// The sample standard deviation of each tensor after init() is the scheme's.
TEST(ModelInit, SchemesDrawTheirStandardDeviations) {
  Config c = tiny_config(Placement::pre, NormKind::layer_norm, true);
  c.width = 64;
  c.heads = 4;
  c.ffn = 128;
  c.vocab = 50;
  c.context = 32;
  c.depth = 2;
  auto stddev_of = [](const Model<float>& m, const std::string& name) {
    for (const auto& t : m.tensors())
      if (t.name == name) {
        double s = 0;
        for (std::int64_t i = 0; i < t.size; ++i) {
          const double v = m.params()[static_cast<std::size_t>(t.offset + i)];
          s += v * v;
        }
        return std::sqrt(s / static_cast<double>(t.size));
      }
    ADD_FAILURE() << "no tensor " << name;
    return 0.0;
  };
  const double D = 64, F = 128;
  struct Expect {
    const char* name;
    double gpt2, xavier;
  };
  const Expect expect[] = {{"wte", 0.02, std::sqrt(0.5)},
                           {"wpe", 0.02, std::sqrt(0.5)},
                           {"block0.attn.qkv.weight", 0.02, std::sqrt(2 / (2 * D))},
                           {"block0.attn.proj.weight", 0.02 / 2, std::sqrt(2 / (2 * D))},  // 1/√(2·depth) = 1/2
                           {"block1.mlp.fc.weight", 0.02, std::sqrt(2 / (D + F))},
                           {"block1.mlp.fc2.weight", 0.02 / 2, std::sqrt(2 / (D + F))},
                           {"head.weight", 0.02, std::sqrt(2 / (D + 50))}};
  for (const auto scheme : {normkit::model::InitScheme::gpt2, normkit::model::InitScheme::xavier}) {
    c.init = scheme;
    Model<float> m(c);
    m.init(9);
    for (const Expect& e : expect) {
      const double want = scheme == normkit::model::InitScheme::gpt2 ? e.gpt2 : e.xavier;
      // Thousands of draws: the sample std is within 5% of the true one.
      EXPECT_NEAR(stddev_of(m, e.name), want, 0.05 * want) << e.name << ", " << init_scheme_name(scheme);
    }
  }
  EXPECT_EQ(error_of([] { normkit::model::parse_init_scheme("kaiming"); }),
            "unknown init 'kaiming' (expected gpt2 or xavier)");
}

// DeepNet's table 1, decoder-only: α = (2N)^(1/4), β = (8N)^(-1/4).
TEST(ModelConfig, DeepNormConstants) {
  Config c = tiny_config(Placement::deepnorm, NormKind::layer_norm, true);
  c.depth = 8;
  EXPECT_DOUBLE_EQ(normkit::model::deepnorm_alpha(c), 2.0);
  EXPECT_DOUBLE_EQ(normkit::model::deepnorm_beta(c), 0.125 * std::sqrt(8.0));
  c.depth = 2;
  EXPECT_DOUBLE_EQ(normkit::model::deepnorm_alpha(c), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(normkit::model::deepnorm_beta(c), 0.5);
}

}  // namespace
