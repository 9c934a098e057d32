// The op observer (normkit/observer.hpp) and `normkit profile`'s counting:
// every op call reported exactly once, FLOPs and bytes of a small model step
// against hand-computed values, shares that sum to 100 %.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "measure/op_cost.hpp"
#include "model/observe.hpp"
#include "normkit/observer.hpp"
#include "normkit/ops.hpp"
#include "profile_run.hpp"

namespace {

using normkit::OpArg;
using normkit::OpRecord;
namespace np = normkit::profile;
namespace nm = normkit::model;

// rows = 3, D = 5, f32, contiguous.
struct Buffers {
  static constexpr std::int64_t rows = 3, D = 5;
  std::vector<float> x = std::vector<float>(rows * D), r = x, h = x, y = x, dy = x, dx = x;
  std::vector<float> w = std::vector<float>(D, 1.0f), b = std::vector<float>(D, 0.0f), dw = w, db = b;
  std::vector<float> mean = std::vector<float>(rows), rstd = mean;
  Buffers() {
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i % 7) - 3.0f;
      r[i] = static_cast<float>(i % 3);
      dy[i] = static_cast<float>(i % 5) - 2.0f;
    }
  }
};

// The eight public ops, once each, with the statistics saved.
void call_every_op(Buffers& t) {
  using normkit::matrix;
  using normkit::vector;
  const auto R = Buffers::rows, D = Buffers::D;
  normkit::layer_norm(matrix(t.x.data(), R, D), vector(t.w.data(), D), vector(t.b.data(), D), 1e-5,
                      matrix(t.y.data(), R, D), vector(t.mean.data(), R), vector(t.rstd.data(), R));
  normkit::layer_norm_backward(matrix(t.dy.data(), R, D), matrix(t.x.data(), R, D), vector(t.mean.data(), R),
                               vector(t.rstd.data(), R), vector(t.w.data(), D), matrix(t.dx.data(), R, D),
                               vector(t.dw.data(), D), vector(t.db.data(), D));
  normkit::rms_norm(matrix(t.x.data(), R, D), vector(t.w.data(), D), 1e-5, matrix(t.y.data(), R, D),
                    vector(t.rstd.data(), R));
  normkit::rms_norm_backward(matrix(t.dy.data(), R, D), matrix(t.x.data(), R, D), vector(t.rstd.data(), R),
                             vector(t.w.data(), D), matrix(t.dx.data(), R, D), vector(t.dw.data(), D));
  normkit::add_layer_norm(matrix(t.x.data(), R, D), matrix(t.r.data(), R, D), vector(t.w.data(), D),
                          vector(t.b.data(), D), 1e-5, matrix(t.h.data(), R, D), matrix(t.y.data(), R, D),
                          vector(t.mean.data(), R), vector(t.rstd.data(), R));
  normkit::add_layer_norm_backward(matrix(t.dy.data(), R, D), matrix(t.r.data(), R, D), matrix(t.h.data(), R, D),
                                   vector(t.mean.data(), R), vector(t.rstd.data(), R), vector(t.w.data(), D),
                                   matrix(t.dx.data(), R, D), vector(t.dw.data(), D), vector(t.db.data(), D));
  normkit::add_rms_norm(matrix(t.x.data(), R, D), matrix(t.r.data(), R, D), vector(t.w.data(), D), 1e-5,
                        matrix(t.h.data(), R, D), matrix(t.y.data(), R, D), vector(t.rstd.data(), R));
  normkit::add_rms_norm_backward(matrix(t.dy.data(), R, D), {}, matrix(t.h.data(), R, D), vector(t.rstd.data(), R),
                                 vector(t.w.data(), D), matrix(t.dx.data(), R, D), vector(t.dw.data(), D));
}

std::uint32_t bits(std::initializer_list<OpArg> args) {
  std::uint32_t b = 0;
  for (OpArg a : args) b |= normkit::bit_of(a);
  return b;
}

TEST(Observer, SeesEveryLibraryCallOnceWithWhatItWasGiven) {
  Buffers t;
  np::Recorder rec;
  {
    const np::ScopedObserver on(&rec);
    EXPECT_EQ(normkit::op_observer(), &rec);
    call_every_op(t);
    // A call that fails validation ran nothing and is not reported.
    EXPECT_THROW(normkit::rms_norm(normkit::matrix(t.x.data(), 3, 5), normkit::vector(t.w.data(), 4), 1e-5,
                                   normkit::matrix(t.y.data(), 3, 5), {}),
                 std::exception);
  }
  EXPECT_EQ(normkit::op_observer(), nullptr);
  call_every_op(t);  // with none installed: nothing reaches the recorder
  const std::vector<OpRecord> r = rec.take();
  const char* names[] = {"layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward",
                         "add_layer_norm", "add_layer_norm_backward", "add_rms_norm", "add_rms_norm_backward"};
  ASSERT_EQ(r.size(), std::size(names));
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_STREQ(r[i].op, names[i]);
    EXPECT_STREQ(r[i].label, "");
    EXPECT_EQ(r[i].shape[0], 3);
    EXPECT_EQ(r[i].shape[1], 5);
    EXPECT_EQ(r[i].dtype, normkit::DType::f32);
    EXPECT_EQ(r[i].device, normkit::Device::cpu);
    EXPECT_LE(r[i].start_ns, r[i].end_ns);
    if (i > 0) {
      EXPECT_LE(r[i - 1].end_ns, r[i].start_ns);
    }
  }
  EXPECT_EQ(r[0].args, bits({OpArg::x, OpArg::y, OpArg::weight, OpArg::bias, OpArg::mean, OpArg::rstd}));
  EXPECT_EQ(r[3].args, bits({OpArg::dy, OpArg::x, OpArg::dx, OpArg::rstd, OpArg::weight, OpArg::dweight}));
  EXPECT_EQ(r[6].args, bits({OpArg::x, OpArg::residual, OpArg::h, OpArg::y, OpArg::weight, OpArg::rstd}));
  EXPECT_EQ(r[5].args, bits({OpArg::dy, OpArg::dh_out, OpArg::h, OpArg::dx, OpArg::mean, OpArg::rstd,
                             OpArg::weight, OpArg::dweight, OpArg::dbias}));
  EXPECT_EQ(r[7].args & normkit::bit_of(OpArg::dh_out), 0u);  // dh_out absent
}

TEST(Observer, SetReturnsThePreviousAndObservedOpReportsOnlyWhenInstalled) {
  np::Recorder a, b;
  EXPECT_EQ(normkit::set_op_observer(&a), nullptr);
  EXPECT_EQ(normkit::set_op_observer(&b), &a);
  {
    OpRecord desc;
    desc.op = "gelu";
    desc.label = "mlp.act";
    desc.shape[0] = 10;
    const normkit::ObservedOp op(desc);
  }
  EXPECT_EQ(normkit::set_op_observer(nullptr), &b);
  { const normkit::ObservedOp op(OpRecord{}); }
  EXPECT_TRUE(a.take().empty());
  const auto r = b.take();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_STREQ(r[0].op, "gelu");
  EXPECT_EQ(r[0].shape[0], 10);
}

// rows = B·T = 4, D = 8, H = 2 (dh = 4), F = 16, V = 11, one pre-norm
// LayerNorm block with a final norm: small enough to count by hand.
np::StepConfig small_step(bool fused) {
  np::StepConfig c;
  c.model.vocab = 11;
  c.model.context = 4;
  c.model.width = 8;
  c.model.heads = 2;
  c.model.ffn = 16;
  c.model.depth = 1;
  c.batch = 1;
  c.seq = 4;
  c.fused = fused;
  return c;
}

std::vector<OpRecord> one_step(np::Step& step) {
  np::Recorder rec;
  const np::ScopedObserver on(&rec);
  step.run();
  return rec.take();
}

const np::Row& row(const np::StepProfile& p, const std::string& name) {
  for (const np::Row& r : p.ops)
    if (r.name == name) return r;
  throw std::runtime_error("no row " + name);
}

TEST(ProfileCounts, FlopsAndBytesOfASmallStepMatchTheHandCount) {
  np::Step step(small_step(true));
  const np::StepProfile p = np::summarize({one_step(step), one_step(step)});
  const auto cls = [&](np::OpClass c) { return p.classes[static_cast<std::size_t>(c)]; };

  // Matrix products, 2·M·N·K each (+ M·N where a weight gradient accumulates):
  // forward qkv 2·4·24·8 = 1536, proj 2·4·8·8 = 512, fc and fc2 2·4·16·8 = 1024
  // each; backward proj dx 512, dw 512 + 64, qkv dx 1536, dw 1536 + 192,
  // fc2 dx 1024, dw 1024 + 128, fc dx 1024, dw 1024 + 128: 4096 + 8704.
  EXPECT_DOUBLE_EQ(cls(np::OpClass::matmul).flops, 12800.0);
  EXPECT_EQ(cls(np::OpClass::matmul).calls, 12);
  // Attention, per head (T = 4, dh = 4, 10 unmasked scores): scores and
  // context 2·4·4·4 = 128 each, softmax 5·10; backward four products of 128
  // and the softmax's 4·10. Two heads: 2·(306 + 552).
  EXPECT_DOUBLE_EQ(cls(np::OpClass::attention).flops, 1716.0);
  // Norms, per element of (4, 8): the first layer_norm 7, two add_layer_norm
  // 8, the final norm's backward (no dh_out) 13, the MLP norm's fused
  // backward with dh_out 14, the first norm's backward 13: 32·63.
  EXPECT_DOUBLE_EQ(cls(np::OpClass::normalization).flops, 2016.0);
  EXPECT_EQ(cls(np::OpClass::normalization).calls, 6);

  // Bytes: the qkv product reads u (4, 8) and W (8, 24), writes (4, 24);
  // the first layer_norm reads x (4, 8), weight and bias (8), writes y and
  // the two statistics (4): f32.
  EXPECT_DOUBLE_EQ(row(p, "matmul attn.qkv").bytes, 4.0 * (32 + 192 + 96));
  EXPECT_DOUBLE_EQ(row(p, "layer_norm").bytes, 4.0 * (32 + 8 + 8) + 4.0 * (32 + 4 + 4));
  EXPECT_DOUBLE_EQ(row(p, "matmul attn.qkv").flops, 1536.0);
  EXPECT_EQ(row(p, "matmul attn.scores").calls, 2);  // one per head
  EXPECT_TRUE(p.unknown_ops.empty());
}

TEST(ProfileCounts, SharesSumToOne) {
  np::Step step(small_step(true));
  const np::StepProfile p = np::summarize({one_step(step), one_step(step), one_step(step)});
  for (const auto* rows : {&p.ops, &p.classes}) {
    double f = 0, t = 0, flops = 0, seconds = 0;
    for (const np::Row& r : *rows) {
      f += r.flop_share;
      t += r.time_share;
      flops += r.flops;
      seconds += r.seconds;
    }
    EXPECT_NEAR(f, 1.0, 1e-12);
    EXPECT_NEAR(t, 1.0, 1e-12);
    EXPECT_DOUBLE_EQ(flops, p.flops);
    EXPECT_NEAR(seconds, p.recorded_s, 1e-12 * p.recorded_s);
  }
}

// Every norm the model calls goes through its NormOps table; counting the
// table's calls independently shows the library reported each exactly once,
// and the model's own records come once per op (two identical steps).
TEST(ProfileCounts, TheObserverSeesEveryModelOpExactlyOnce) {
  int norm_calls = 0;
  nm::NormOps ops = np::norm_ops(true);
  const auto count = [&norm_calls](auto f) {
    return [&norm_calls, f](auto... args) {
      ++norm_calls;
      f(args...);
    };
  };
  ops.layer_norm = count(ops.layer_norm);
  ops.add_layer_norm = count(ops.add_layer_norm);
  ops.layer_norm_backward = count(ops.layer_norm_backward);
  ops.add_layer_norm_backward = count(ops.add_layer_norm_backward);
  const np::StepConfig c = small_step(true);
  nm::Model<float> m(c.model, ops);
  m.init(3);
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  np::Recorder rec;
  for (int step = 0; step < 2; ++step) {
    const np::ScopedObserver on(&rec);
    m.forward(tokens, 1, 4);
    m.loss(targets);
    m.backward();
  }
  const std::vector<OpRecord> r = rec.take();
  std::map<std::string, int> by_name;
  int library = 0;
  for (const OpRecord& x : r) {
    by_name[std::string(x.op) + " " + x.label] += 1;
    if (x.label[0] == '\0') ++library;
  }
  EXPECT_EQ(library, norm_calls);
  EXPECT_EQ(norm_calls, 2 * 6);
  EXPECT_EQ(by_name["matmul attn.qkv"], 2);
  EXPECT_EQ(by_name["matmul attn.scores"], 2 * 2);
  EXPECT_EQ(by_name["softmax attn.softmax"], 2 * 2);
  EXPECT_EQ(by_name["softmax_backward attn.softmax"], 2 * 2);
  EXPECT_EQ(by_name["embedding embedding"], 2);
  EXPECT_EQ(by_name["cross_entropy loss"], 2);
  EXPECT_EQ(by_name["embedding_backward embedding"], 2);
  EXPECT_EQ(r.size() % 2, 0u);
  for (std::size_t i = 0; i < r.size() / 2; ++i) {
    EXPECT_STREQ(r[i].op, r[i + r.size() / 2].op);
    EXPECT_STREQ(r[i].label, r[i + r.size() / 2].label);
  }
}

// Unfused, each add+norm is an add and the plain norm: the same FLOPs of
// normalization less one per element per fused call, and the adds reported.
TEST(ProfileCounts, UnfusedStepsReportTheAddsApart) {
  np::Step fused(small_step(true)), unfused(small_step(false));
  const np::StepProfile a = np::summarize({one_step(fused)}), b = np::summarize({one_step(unfused)});
  EXPECT_EQ(row(b, "add residual.unfused").calls, 3);  // two forward, one backward with dh_out
  EXPECT_DOUBLE_EQ(a.classes[static_cast<std::size_t>(np::OpClass::normalization)].flops -
                       b.classes[static_cast<std::size_t>(np::OpClass::normalization)].flops,
                   3.0 * 32);
  EXPECT_THROW(row(a, "add residual.unfused"), std::runtime_error);
}

TEST(ProfileCounts, StepsWithDifferentOpsAreRefused) {
  np::Step step(small_step(true));
  std::vector<OpRecord> s1 = one_step(step), s2 = s1;
  s2.pop_back();
  EXPECT_THROW(np::summarize({s1, s2}), std::logic_error);
  EXPECT_THROW(np::summarize({}), std::logic_error);
}

TEST(ProfileCounts, MedianOrFastestOfEachOp) {
  OpRecord r;
  r.op = "copy";
  r.label = "x";
  r.shape[0] = 4;
  std::vector<std::vector<OpRecord>> steps;
  for (const std::int64_t ns : {5000, 3000, 9000}) {
    r.start_ns = 1000;
    r.end_ns = 1000 + ns;
    steps.push_back({r});
  }
  EXPECT_DOUBLE_EQ(np::summarize(steps).recorded_s, 5e-6);
  EXPECT_DOUBLE_EQ(np::summarize(steps, np::Statistic::fastest).recorded_s, 3e-6);
}

// The embedding's gradient goes into wte's rows, and wpe's unless the
// positions are fixed sinusoids: (4, 8) f32 rows, one or two tables.
TEST(OpCost, EmbeddingBackwardCountsTheTablesItWrites) {
  const auto cost = [](std::int64_t tables) {
    return normkit::measure::op_cost(nm::op_record<float>("embedding_backward", "embedding", 4, 8, tables));
  };
  EXPECT_DOUBLE_EQ(cost(2).flops, 64.0);
  EXPECT_EQ(cost(2).bytes_written, 2 * 32 * 4);
  EXPECT_DOUBLE_EQ(cost(1).flops, 32.0);
  EXPECT_EQ(cost(1).bytes_read, 2 * 32 * 4);
  EXPECT_EQ(cost(1).bytes_written, 32 * 4);
}

TEST(OpCost, UnknownOpsAreFlaggedNotGuessed) {
  OpRecord r;
  r.op = "conv2d";
  r.label = "x";
  const normkit::measure::OpCost c = normkit::measure::op_cost(r);
  EXPECT_FALSE(c.known);
  EXPECT_EQ(c.flops, 0.0);
  EXPECT_EQ(c.bytes(), 0);
}

}  // namespace
