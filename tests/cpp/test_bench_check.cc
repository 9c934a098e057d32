// `normkit bench` times nothing it has not checked against the fp64 oracle
// (tools/normkit/bench_check.hpp). These tests run the check on the naive
// baseline's outputs, then on the same outputs with one thing wrong that
// only the parameter gradients show, and ask that it is named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_impls.hpp"
#include "measure/memory.hpp"
#include "normkit/half.hpp"

namespace {

namespace nb = normkit::bench;
using nb::Array;
using normkit::NormKind;
using nb::Pass;
using normkit::DType;

// One buffer set of op at (rows, D), its inputs filled as the bench fills
// them and its statistics the oracle's.
struct Cell {
  const nb::Op& op;
  nb::Shape s;
  nb::Arena arena;
  std::vector<nb::Tensors> sets;
  Cell(NormKind norm, Pass pass, std::int64_t rows, std::int64_t D, DType dt)
      : op(nb::find_op(norm, pass)), s{rows, D, dt, dt}, sets(nb::carve(arena, op, s, 1)) {
    nb::fill_inputs(op, s, sets, false);
    nb::write_oracle_stats(op, s, sets[0], false);
  }
  void run() const { nb::kNaiveImpl.prepare(op, s, sets)(0); }
  std::string check() const { return nb::check_outputs(op, s, sets[0]); }
  float* f32(Array a) const { return reinterpret_cast<float*>(sets[0][a]); }
};

// Rows of D = 768 at the bench's in-cache size: 85.
constexpr std::int64_t kRows = 85, kD = 768;

TEST(BenchCheck, TheNaiveBackwardPasses) {
  for (NormKind norm : {NormKind::layer_norm, NormKind::rms_norm})
    for (Pass pass : {Pass::backward, Pass::backward_dx, Pass::fused_backward, Pass::backward_then_add})
      for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
        const Cell c(norm, pass, kRows, kD, dt);
        c.run();
        EXPECT_EQ(c.check(), "") << c.op.name << " " << normkit::dtype_name(dt);
      }
}

// dweight 0.1 % off: the error of a float sum of 85 terms is far smaller.
TEST(BenchCheck, NamesAWrongDweight) {
  const Cell c(NormKind::layer_norm, Pass::backward, kRows, kD, DType::f32);
  c.run();
  c.f32(Array::dweight)[5] *= 1.001f;
  EXPECT_EQ(c.check().rfind("dweight[5] = ", 0), 0u) << c.check();
}

TEST(BenchCheck, NamesAWrongDbias) {
  const Cell c(NormKind::layer_norm, Pass::fused_backward, kRows, kD, DType::f32);
  c.run();
  c.f32(Array::dbias)[kD - 1] += 1.0f;
  EXPECT_EQ(c.check().rfind("dbias[767] = ", 0), 0u) << c.check();
}

// A row past the checked ones given the wrong statistics: its dx is not
// compared, but its terms of dweight are off, and every row's count.
TEST(BenchCheck, SeesTheStatisticsOfEveryRow) {
  const Cell c(NormKind::rms_norm, Pass::backward, kRows, kD, DType::f32);
  c.f32(Array::rstd)[kRows / 2] *= 2.0f;
  c.run();
  EXPECT_EQ(c.check().rfind("dweight[", 0), 0u) << c.check();
}

// dx alone writes no gradients, and none is asked for.
TEST(BenchCheck, DxAloneHasNoGradientsToCheck) {
  const Cell c(NormKind::layer_norm, Pass::backward_dx, kRows, kD, DType::f32);
  EXPECT_EQ(c.sets[0][Array::dweight], nullptr);
  c.run();
  EXPECT_EQ(c.check(), "");
}

}  // namespace
