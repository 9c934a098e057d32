// Bad input: every invalid argument raises normkit::Error naming the
// function, the argument and what was expected — and leaves every output
// exactly as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "buffers.hpp"
#include "normkit/device.hpp"
#include "normkit/ops.hpp"

namespace normkit::test {
namespace {

constexpr std::int64_t kRowsN = 4, kD = 16;

// Valid arguments for every op; a case breaks one of them.
struct Args {
  Array x{DType::f32, kRowsN, kD}, residual{DType::f32, kRowsN, kD}, dy{DType::f32, kRowsN, kD};
  Array y{DType::f32, kRowsN, kD}, h{DType::f32, kRowsN, kD}, dx{DType::f32, kRowsN, kD};
  Array weight{DType::f32, 1, kD}, bias{DType::f32, 1, kD};
  Array mean{DType::f32, 1, kRowsN}, rstd{DType::f32, 1, kRowsN};
  Array dweight{DType::f32, 1, kD}, dbias{DType::f32, 1, kD};
  Args() {
    std::mt19937_64 rng(0);
    for (Array* b : {&x, &residual, &dy, &weight, &bias}) fill_normal(*b, rng);
    for (std::int64_t r = 0; r < kRowsN; ++r) {
      mean.set(0, r, 0.0);
      rstd.set(0, r, 1.0);
    }
  }
  std::vector<std::vector<unsigned char>> outputs() const {
    return {y.bytes(), h.bytes(), dx.bytes(), mean.bytes(), rstd.bytes(), dweight.bytes(), dbias.bytes()};
  }
};

// Runs f, which must throw normkit::Error whose message contains each of
// `needles`, and checks that no output changed.
void expect_error(Args& a, const std::function<void(Args&)>& f, std::initializer_list<std::string> needles) {
  const auto before = a.outputs();
  try {
    f(a);
    ADD_FAILURE() << "no error thrown; expected one mentioning '" << *needles.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg;
  }
  EXPECT_EQ(a.outputs(), before) << "an output was written before the error";
}

TEST(Errors, ShapeMismatches) {
  Args a;
  expect_error(a, [](Args& s) {
    Array w(DType::f32, 1, kD - 1);
    rms_norm(s.x.cmat(), w.cvec(), 1e-5, s.y.mat());
  }, {"rms_norm: weight has 15 elements, expected D = 16"});
  expect_error(a, [](Args& s) {
    Array b(DType::f32, 1, kD + 1);
    layer_norm(s.x.cmat(), s.weight.cvec(), b.cvec(), 1e-5, s.y.mat());
  }, {"layer_norm: bias has 17 elements, expected D = 16"});
  expect_error(a, [](Args& s) {
    Array y(DType::f32, kRowsN - 1, kD);
    layer_norm(s.x.cmat(), {}, {}, 1e-5, y.mat());
  }, {"layer_norm: y has shape (3, 16), expected (4, 16)"});
  expect_error(a, [](Args& s) {
    Array m(DType::f32, 1, kRowsN + 1);
    layer_norm(s.x.cmat(), {}, {}, 1e-5, s.y.mat(), m.vec());
  }, {"layer_norm: mean has 5 elements, expected rows = 4"});
  expect_error(a, [](Args& s) {
    Array r(DType::f32, 1, 2);
    rms_norm_backward(s.dy.cmat(), s.x.cmat(), r.cvec(), {}, s.dx.mat());
  }, {"rms_norm_backward: rstd has 2 elements, expected rows = 4"});
  expect_error(a, [](Args& s) {
    Array r(DType::f32, kRowsN, kD + 1);
    add_rms_norm(s.x.cmat(), r.cmat(), {}, 1e-5, s.h.mat(), s.y.mat());
  }, {"add_rms_norm: residual has shape (4, 17)"});
  expect_error(a, [](Args& s) {
    Array dw(DType::f32, 1, 3);
    layer_norm_backward(s.dy.cmat(), s.x.cmat(), s.mean.cvec(), s.rstd.cvec(), {}, s.dx.mat(), dw.vec());
  }, {"dweight has 3 elements, expected D = 16"});
}

TEST(Errors, MissingRequiredArguments) {
  Args a;
  expect_error(a, [](Args& s) {
    layer_norm_backward(s.dy.cmat(), s.x.cmat(), {}, s.rstd.cvec(), {}, s.dx.mat());
  }, {"layer_norm_backward: mean is missing"});
  expect_error(a, [](Args& s) { rms_norm_backward(s.dy.cmat(), s.x.cmat(), {}, {}, s.dx.mat()); },
               {"rms_norm_backward: rstd is missing"});
  expect_error(a, [](Args& s) { rms_norm(s.x.cmat(), {}, 1e-5, Matrix{}); }, {"rms_norm: y is missing"});
}

TEST(Errors, Dtypes) {
  Args a;
  expect_error(a, [](Args& s) {
    Array y(DType::bf16, kRowsN, kD);
    rms_norm(s.x.cmat(), {}, 1e-5, y.mat());
  }, {"rms_norm: y has dtype bf16, expected f32"});
  expect_error(a, [](Args&) {
    Array x(DType::bf16, kRowsN, kD), y(DType::bf16, kRowsN, kD), w(DType::f16, 1, kD);
    rms_norm(x.cmat(), w.cvec(), 1e-5, y.mat());
  }, {"weight has dtype f16, expected bf16 or f32"});
  expect_error(a, [](Args& s) {
    Array x(DType::f64, kRowsN, kD), y(DType::f64, kRowsN, kD);
    layer_norm(x.cmat(), s.weight.cvec(), {}, 1e-5, y.mat());
  }, {"weight has dtype f32, expected f64"});
  expect_error(a, [](Args& s) {
    Array b(DType::f16, 1, kD);
    layer_norm(s.x.cmat(), s.weight.cvec(), b.cvec(), 1e-5, s.y.mat());
  }, {"bias has dtype f16"});
  expect_error(a, [](Args&) {
    Array x(DType::bf16, kRowsN, kD), y(DType::bf16, kRowsN, kD), m(DType::bf16, 1, kRowsN);
    layer_norm(x.cmat(), {}, {}, 1e-5, y.mat(), m.vec());
  }, {"mean has dtype bf16, expected f32"});
  expect_error(a, [](Args& s) {
    Array r(DType::f16, kRowsN, kD);
    add_rms_norm(s.x.cmat(), r.cmat(), {}, 1e-5, s.h.mat(), s.y.mat());
  }, {"residual has dtype f16, expected f32"});
  expect_error(a, [](Args& s) {
    Array x(DType::bf16, kRowsN, kD), r(DType::bf16, kRowsN, kD), y(DType::bf16, kRowsN, kD);
    add_rms_norm(x.cmat(), r.cmat(), {}, 1e-5, s.h.mat(), y.mat());  // h f32, residual bf16
  }, {"h has dtype f32, expected bf16"});
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.dtype = static_cast<DType>(9);
    rms_norm(x, {}, 1e-5, s.y.mat());
  }, {"rms_norm: x has dtype ?"});
}

// A dtype problem is the DTypeError subclass, so bindings can map it to
// their type error; any other problem is a plain Error.
TEST(Errors, DtypeProblemsAreDTypeErrors) {
  Args a;
  Array y(DType::bf16, kRowsN, kD);
  EXPECT_THROW(rms_norm(a.x.cmat(), {}, 1e-5, y.mat()), DTypeError);
  try {
    rms_norm(a.x.cmat(), {}, -1.0, a.y.mat());
    ADD_FAILURE() << "no error";
  } catch (const DTypeError&) {
    ADD_FAILURE() << "an eps problem is not a dtype problem";
  } catch (const Error&) {
  }
}

TEST(Errors, Eps) {
  Args a;
  for (double eps : {-1e-5, std::nan(""), std::numeric_limits<double>::infinity()})
    expect_error(a, [eps](Args& s) { layer_norm(s.x.cmat(), {}, {}, eps, s.y.mat()); },
                 {"layer_norm: eps is", "expected a finite value >= 0"});
  // An eps that f32 arithmetic cannot hold would become Inf there.
  expect_error(a, [](Args& s) { rms_norm(s.x.cmat(), {}, 1e39, s.y.mat()); },
               {"rms_norm: eps is 1e+39", "at most 3.40282e+38"});
  // eps = 0 is allowed.
  EXPECT_NO_THROW(layer_norm(a.x.cmat(), {}, {}, 0.0, a.y.mat()));
}

TEST(Errors, WeightOffset) {
  Args a;
  expect_error(a, [](Args& s) { rms_norm(s.x.cmat(), {}, 1e-5, s.y.mat(), {}, 1.0); },
               {"rms_norm: weight_offset is 1", "weight is absent"});
  expect_error(a, [](Args& s) { rms_norm(s.x.cmat(), s.weight.cvec(), 1e-5, s.y.mat(), {}, std::nan("")); },
               {"weight_offset is nan"});
  expect_error(a, [](Args& s) { rms_norm(s.x.cmat(), s.weight.cvec(), 1e-5, s.y.mat(), {}, 1e39); },
               {"weight_offset is 1e+39", "at most 3.40282e+38"});
}

TEST(Errors, NullPointersAndStrides) {
  Args a;
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.data = nullptr;
    layer_norm(x, {}, {}, 1e-5, s.y.mat());
  }, {"layer_norm: x has a null data pointer but 64 elements"});
  expect_error(a, [](Args& s) {
    ConstVector w{nullptr, DType::f32, kD, Device::cpu};
    rms_norm(s.x.cmat(), w, 1e-5, s.y.mat());
  }, {"weight has a null data pointer"});
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.row_stride = kD - 1;
    rms_norm(x, {}, 1e-5, s.y.mat());
  }, {"rms_norm: x has row_stride 15, expected >= D = 16"});
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.rows = -1;
    rms_norm(x, {}, 1e-5, s.y.mat());
  }, {"x has negative shape"});
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.device = Device::cuda;
    rms_norm(x, {}, 1e-5, s.y.mat());
  }, {"y is on device cpu, expected cuda:0 (the device of x)"});
}

// A call on CUDA views where CUDA cannot run names x and says why: this
// build has no CUDA backend, or this machine no such device. Nothing is
// written (expect_error checks y).
TEST(Errors, CudaViewsWhereNoGpuRuns) {
  Args a;
  const bool no_device_0 = cuda_device_count() == 0;
  expect_error(a, [&](Args& s) {
    const int index = no_device_0 ? 0 : 63;
    rms_norm(on_device(s.x.cmat(), Device::cuda, index), {}, 1e-5, on_device(s.y.mat(), Device::cuda, index));
  }, {no_device_0 ? "rms_norm: x is on device cuda:0, expected cpu (" : "rms_norm: x is on device cuda:63",
      !has_cuda_backend()  ? "(this build has no CUDA backend)"
      : no_device_0        ? "no CUDA device is available"
                           : "this machine has "});
}

TEST(Errors, Overlap) {
  Args a;
  // y shifted by one element into x: partial overlap.
  expect_error(a, [](Args&) {
    Array buf(DType::f32, kRowsN + 1, kD);
    ConstMatrix x = buf.cmat();
    x.rows = kRowsN;
    Matrix y = buf.mat();
    y.rows = kRowsN;
    y.data = static_cast<float*>(buf.data()) + 1;
    rms_norm(x, {}, 1e-5, y);
  }, {"rms_norm: y overlaps input x", "exactly the same view"});
  expect_error(a, [](Args& s) {
    Matrix y{s.weight.data(), DType::f32, 1, kD, kD, Device::cpu};
    Array x(DType::f32, 1, kD);
    layer_norm(x.cmat(), s.weight.cvec(), {}, 1e-5, y);
  }, {"y overlaps input weight, expected separate memory"});
  expect_error(a, [](Args& s) {
    Vector rstd{s.mean.data(), DType::f32, kRowsN, Device::cpu};
    layer_norm(s.x.cmat(), {}, {}, 1e-5, s.y.mat(), s.mean.vec(), rstd);
  }, {"mean overlaps output rstd"});
  expect_error(a, [](Args& s) {
    add_rms_norm(s.x.cmat(), s.residual.cmat(), {}, 1e-5, s.h.mat(), s.h.mat());
  }, {"h overlaps output y"});
  // Interleaved rows of one buffer share no element: not an overlap.
  Array buf(DType::f32, 2 * kRowsN, kD);
  std::mt19937_64 rng(1);
  fill_normal(buf, rng);
  ConstMatrix even{buf.data(), DType::f32, kRowsN, kD, 2 * kD, Device::cpu};
  Matrix odd{static_cast<float*>(buf.data()) + kD, DType::f32, kRowsN, kD, 2 * kD, Device::cpu};
  EXPECT_NO_THROW(rms_norm(even, {}, 1e-5, odd));
}

TEST(Errors, EmptyAndZeroWidth) {
  Args a;
  expect_error(a, [](Args& s) {
    ConstMatrix x = s.x.cmat();
    x.cols = 0;
    Matrix y = s.y.mat();
    y.cols = 0;
    layer_norm(x, {}, {}, 1e-5, y);
  }, {"layer_norm: x has D = 0 with 4 rows, expected D >= 1"});
  // rows = 0 is a no-op, even with null pointers; a backward zeroes dweight.
  const auto before = a.outputs();
  layer_norm(ConstMatrix{nullptr, DType::f32, 0, kD, kD}, {}, {}, 1e-5, Matrix{nullptr, DType::f32, 0, kD, kD});
  EXPECT_EQ(a.outputs(), before);
  Array dw(DType::f32, 1, kD);
  rms_norm_backward(ConstMatrix{nullptr, DType::f32, 0, kD, kD}, ConstMatrix{nullptr, DType::f32, 0, kD, kD},
                    ConstVector{nullptr, DType::f32, 0}, {}, Matrix{nullptr, DType::f32, 0, kD, kD}, dw.vec());
  for (std::int64_t j = 0; j < kD; ++j) EXPECT_EQ(dw.get(0, j), 0.0);
}

}  // namespace
}  // namespace normkit::test
