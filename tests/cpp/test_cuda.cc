// The CUDA backend through the public API: every op, dtype and option on the
// GPU against the fp64 oracle with the CPU path's budget (tolerance.hpp).
// Each test copies host buffers (sentinel padding included) to the device,
// calls normkit on device views, and copies the outputs back to check them
// exactly as the CPU tests do. Without a GPU every test here skips, saying so.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "cases.hpp"
#include "normkit/device.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorName(e) << ": " << cudaGetErrorString(e);
}

// A device copy of a host Array, with the same shape, stride and padding.
class OnGpu {
 public:
  explicit OnGpu(Array& host) : host_(&host) {
    cuda_ok(cudaMalloc(&d_, host.bytes().size()), "cudaMalloc");
    cuda_ok(cudaMemcpy(d_, host.data(), host.bytes().size(), cudaMemcpyHostToDevice), "to device");
  }
  ~OnGpu() { cudaFree(d_); }
  OnGpu(const OnGpu&) = delete;
  OnGpu& operator=(const OnGpu&) = delete;

  Matrix mat() { return on_device(with_data(host_->mat()), Device::cuda, 0); }
  ConstMatrix cmat() { return mat(); }
  Vector vec() { return on_device(with_data(host_->vec()), Device::cuda, 0); }
  ConstVector cvec() { return vec(); }
  // Waits for the device and copies its bytes back into the host buffer.
  void back() {
    cuda_ok(cudaDeviceSynchronize(), "kernel");
    cuda_ok(cudaMemcpy(host_->data(), d_, host_->bytes().size(), cudaMemcpyDeviceToHost), "to host");
  }

 private:
  template <class View>
  View with_data(View v) {
    v.data = d_;
    return v;
  }
  Array* host_;
  void* d_ = nullptr;
};

// Parameters on the device: absent ones stay absent.
struct GpuParams {
  explicit GpuParams(Params& p) {
    if (p.has_weight) weight = std::make_unique<OnGpu>(p.weight);
    if (p.has_bias) bias = std::make_unique<OnGpu>(p.bias);
  }
  ConstVector w() { return weight ? weight->cvec() : ConstVector{}; }
  ConstVector b() { return bias ? bias->cvec() : ConstVector{}; }
  std::unique_ptr<OnGpu> weight, bias;
};

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device here: the GPU tests did not run";
  }
};

// Shapes that reach every mapping (warp, block, split row) and remainders of
// the 16-byte packs; rows × D stays small enough for the fp64 oracle.
const std::vector<std::pair<std::int64_t, std::int64_t>> kShapes = {
    {1, 1}, {3, 7}, {5, 33}, {1000, 64}, {300, 768}, {64, 4097}, {3, 16384}, {3, 65537}, {2, 262147}};

class CudaCases : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device here: the GPU tests did not run";
  }
};

TEST_P(CudaCases, ForwardMatchesOracle) {
  const Case c = GetParam();
  std::mt19937_64 rng(42);
  const double eps = 1e-5;
  for (auto [rows, D] : kShapes)
    for (int layout = 0; layout < 3; ++layout) {  // contiguous, strided (unaligned), in place
      SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + " layout=" + std::to_string(layout));
      const std::int64_t stride = layout == 0 ? D : D + 5;
      Array x(c.x, rows, D, stride), y(c.x, rows, D, stride);
      fill_normal(x, rng, 0.5, 2.0);
      Params p = make_params(c, D, rng);
      const std::vector<double> xv = x.values();
      const reference::Forward ref = reference_forward(c, x.cmat(), p, eps);
      Array mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
      OnGpu gx(x), gy(y), gmean(mean), grstd(rstd);
      GpuParams gp(p);
      OnGpu& out = layout == 2 ? gx : gy;
      if (c.op == NormKind::layer_norm)
        layer_norm(gx.cmat(), gp.w(), gp.b(), eps, out.mat(), gmean.vec(), grstd.vec());
      else
        rms_norm(gx.cmat(), gp.w(), eps, out.mat(), grstd.vec(), p.offset);
      out.back();
      grstd.back();
      Array& yh = layout == 2 ? x : y;
      const Scales s = scales(xv, nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm);
      EXPECT_TRUE(within_budget(yh.values(), ref.y, s.y, c.x, c.x, growth(D), "y"));
      EXPECT_TRUE(yh.padding_intact()) << "y was written outside its rows";
      EXPECT_TRUE(within_budget(rstd.values(), ref.rstd, ref.rstd, stat_dtype(c.x), c.x, growth(D), "rstd"));
      if (::testing::Test::HasFailure()) return;
    }
}

TEST_P(CudaCases, BackwardMatchesOracle) {
  const Case c = GetParam();
  std::mt19937_64 rng(7);
  const double eps = 1e-5;
  for (auto [rows, D] : kShapes)
    for (bool strided : {false, true}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " D=" + std::to_string(D) + (strided ? " strided" : ""));
      const std::int64_t stride = strided ? D + 3 : D;
      Array x(c.x, rows, D, stride), dy(c.x, rows, D, stride), dx(c.x, rows, D, stride);
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng, 0.0, 1.0);
      Params p = make_params(c, D, rng);
      const std::vector<double> xv = x.values(), dyv = dy.values();
      const reference::Forward fwd = reference_forward(c, x.cmat(), p, eps);
      const reference::Backward ref = reference_backward(c, dy.cmat(), x.cmat(), p, eps);
      Array y(c.x, rows, D, stride), mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
      Array dweight(c.w, 1, D), dbias(c.w, 1, D);
      OnGpu gx(x), gdy(dy), gdx(dx), gy(y), gmean(mean), grstd(rstd), gdw(dweight), gdb(dbias);
      GpuParams gp(p);
      // Saved statistics come from the device's own forward, as in training.
      if (c.op == NormKind::layer_norm) {
        layer_norm(gx.cmat(), gp.w(), gp.b(), eps, gy.mat(), gmean.vec(), grstd.vec());
        layer_norm_backward(gdy.cmat(), gx.cmat(), gmean.cvec(), grstd.cvec(), gp.w(), gdx.mat(), gdw.vec(),
                            gdb.vec());
      } else {
        rms_norm(gx.cmat(), gp.w(), eps, gy.mat(), grstd.vec(), p.offset);
        rms_norm_backward(gdy.cmat(), gx.cmat(), grstd.cvec(), gp.w(), gdx.mat(), gdw.vec(), p.offset);
      }
      gdx.back();
      gdw.back();
      gdb.back();
      const Scales s = scales(xv, &dyv, rows, D, p.gain_size, p.shift, fwd, c.op == NormKind::layer_norm);
      EXPECT_TRUE(within_budget(dx.values(), ref.dx, s.dx, c.x, c.x, growth(D), "dx"));
      EXPECT_TRUE(dx.padding_intact());
      const double g_rows = growth(D) + growth(rows);
      EXPECT_TRUE(within_budget(dweight.values(), ref.dweight, s.dweight, c.w, c.x, g_rows, "dweight"));
      if (c.op == NormKind::layer_norm) {
        EXPECT_TRUE(within_budget(dbias.values(), ref.dbias, s.dbias, c.w, c.x, growth(rows), "dbias"));
      }
      if (::testing::Test::HasFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(AllCases, CudaCases, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& tp) { return name_of(tp.param); });

// The fused residual add: h is one f32 addition rounded to h's dtype, the
// same bits as the CPU's; y is the norm of that h.
TEST_F(Cuda, FusedAddMatchesCpuStreamAndOracleNorm) {
  std::mt19937_64 rng(3);
  const double eps = 1e-6;
  for (NormKind op : kNormKinds)
    for (auto [xd, rd] : {std::pair{DType::f32, DType::f32}, {DType::bf16, DType::f32}, {DType::f16, DType::f16}})
      for (auto [rows, D] : kShapes) {
        SCOPED_TRACE(std::string(dtype_name(xd)) + "/" + std::string(dtype_name(rd)) + " rows=" +
                     std::to_string(rows) + " D=" + std::to_string(D));
        const Case c{op, xd, rd, op == NormKind::layer_norm ? Affine::both : Affine::weight};
        Array x(xd, rows, D), res(rd, rows, D), h(rd, rows, D), y(xd, rows, D), h_cpu(rd, rows, D),
            y_cpu(xd, rows, D);
        Array mean(DType::f32, 1, rows), rstd(DType::f32, 1, rows);
        fill_normal(x, rng, 0.0, 1.0);
        fill_normal(res, rng, 0.5, 3.0);
        Params p = make_params(c, D, rng);
        OnGpu gx(x), gres(res), gh(h), gy(y), gmean(mean), grstd(rstd);
        GpuParams gp(p);
        if (op == NormKind::layer_norm) {
          add_layer_norm(gx.cmat(), gres.cmat(), gp.w(), gp.b(), eps, gh.mat(), gy.mat(), gmean.vec(), grstd.vec());
          add_layer_norm(x.cmat(), res.cmat(), p.w(), p.b(), eps, h_cpu.mat(), y_cpu.mat());
        } else {
          add_rms_norm(gx.cmat(), gres.cmat(), gp.w(), eps, gh.mat(), gy.mat(), grstd.vec());
          add_rms_norm(x.cmat(), res.cmat(), p.w(), eps, h_cpu.mat(), y_cpu.mat());
        }
        gh.back();
        gy.back();
        EXPECT_EQ(h.bytes(), h_cpu.bytes()) << "h differs from the CPU's one f32 addition";
        // y's oracle is the norm of the h that was written.
        const reference::Forward ref = reference_forward(c, h.cmat(), p, eps);
        const Scales s = scales(h.values(), nullptr, rows, D, p.gain_size, p.shift, ref, op == NormKind::layer_norm);
        EXPECT_TRUE(within_budget(y.values(), ref.y, s.y, xd, xd, growth(D), "y"));
        if (::testing::Test::HasFailure()) return;
      }
}

// dweight/dbias are reduced over a fixed partition of rows, never atomics:
// two runs give the same bits.
TEST_F(Cuda, ParameterGradientsAreBitwiseReproducible) {
  std::mt19937_64 rng(11);
  const std::int64_t rows = 50000, D = 768;
  Array x(DType::bf16, rows, D), dy(DType::bf16, rows, D), dx(DType::bf16, rows, D);
  Array w(DType::f32, 1, D), rstd(DType::f32, 1, rows), dw1(DType::f32, 1, D), dw2(DType::f32, 1, D);
  fill_normal(x, rng);
  fill_normal(dy, rng);
  fill_normal(w, rng, 1.0, 0.5);
  OnGpu gx(x), gdy(dy), gdx(dx), gw(w), grstd(rstd), gdw1(dw1), gdw2(dw2);
  rms_norm(gx.cmat(), gw.cvec(), 1e-6, gdx.mat(), grstd.vec());
  rms_norm_backward(gdy.cmat(), gx.cmat(), grstd.cvec(), gw.cvec(), gdx.mat(), gdw1.vec());
  rms_norm_backward(gdy.cmat(), gx.cmat(), grstd.cvec(), gw.cvec(), gdx.mat(), gdw2.vec());
  gdw1.back();
  gdw2.back();
  EXPECT_EQ(dw1.bytes(), dw2.bytes());
}

// A call is queued on the calling thread's stream (StreamGuard) and gives the
// same bits there as on the default stream.
TEST_F(Cuda, RunsOnTheCallersStream) {
  std::mt19937_64 rng(5);
  Array x(DType::f32, 300, 4096), y1(DType::f32, 300, 4096), y2(DType::f32, 300, 4096);
  fill_normal(x, rng);
  OnGpu gx(x), gy1(y1), gy2(y2);
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  rms_norm(gx.cmat(), {}, 1e-6, gy1.mat());
  {
    const StreamGuard on(0, s);
    EXPECT_EQ(current_stream(0), static_cast<StreamHandle>(s));
    rms_norm(gx.cmat(), {}, 1e-6, gy2.mat());
  }
  EXPECT_EQ(current_stream(0), nullptr);
  cuda_ok(cudaStreamSynchronize(s), "stream");
  cudaStreamDestroy(s);
  gy1.back();
  gy2.back();
  EXPECT_EQ(y1.bytes(), y2.bytes());
}

// A backward over no rows still writes the parameter gradients (zero), on
// the device.
TEST_F(Cuda, BackwardOverNoRowsZeroesParameterGradients) {
  Array x(DType::f32, 0, 16), dy(DType::f32, 0, 16), dx(DType::f32, 0, 16), mean(DType::f32, 1, 0),
      rstd(DType::f32, 1, 0), w(DType::f32, 1, 16), dw(DType::f32, 1, 16), db(DType::f32, 1, 16);
  for (std::int64_t j = 0; j < 16; ++j) {
    w.set(0, j, 1.0);
    dw.set(0, j, 7.0);
    db.set(0, j, 7.0);
  }
  OnGpu gx(x), gdy(dy), gdx(dx), gmean(mean), grstd(rstd), gw(w), gdw(dw), gdb(db);
  layer_norm_backward(gdy.cmat(), gx.cmat(), gmean.cvec(), grstd.cvec(), gw.cvec(), gdx.mat(), gdw.vec(), gdb.vec());
  gdw.back();
  gdb.back();
  for (std::int64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(dw.get(0, j), 0.0);
    EXPECT_EQ(db.get(0, j), 0.0);
  }
}

// Host memory in a view that says CUDA is refused before anything runs.
TEST_F(Cuda, HostPointerInACudaViewIsAnError) {
  Array x(DType::f32, 2, 8), y(DType::f32, 2, 8);
  OnGpu gy(y);
  try {
    rms_norm(on_device(x.cmat(), Device::cuda, 0), {}, 1e-6, gy.mat());
    FAIL() << "host memory was accepted as a CUDA view";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rms_norm: x is on device cuda:0 but its data pointer"), std::string::npos)
        << e.what();
  }
}

// A tensor above 2^31 elements: offsets are 64-bit. The rows around 2^31
// and the last row are checked against the oracle.
TEST_F(Cuda, TensorAbove2To31Elements) {
  const std::int64_t D = 4096, rows = ((std::int64_t{1} << 31) + (std::int64_t{1} << 20)) / D;
  const std::size_t bytes = static_cast<std::size_t>(rows * D) * 2;
  std::size_t free = 0, total = 0;
  cuda_ok(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  if (free < 2 * bytes + (std::size_t{1} << 30)) GTEST_SKIP() << "needs " << 2 * bytes << " bytes of device memory";
  // 16 random rows, repeated over the tensor.
  std::mt19937_64 rng(9);
  Array pattern(DType::bf16, 16, D);
  fill_normal(pattern, rng, 0.5, 2.0);
  void *dx = nullptr, *dy = nullptr;
  cuda_ok(cudaMalloc(&dx, bytes), "cudaMalloc x");
  cuda_ok(cudaMalloc(&dy, bytes), "cudaMalloc y");
  const std::size_t row_bytes = static_cast<std::size_t>(D) * 2;
  for (std::int64_t r = 0; r < rows; r += 16) {
    const std::int64_t n = std::min<std::int64_t>(16, rows - r);
    cuda_ok(cudaMemcpy(static_cast<char*>(dx) + static_cast<std::size_t>(r) * row_bytes, pattern.data(),
                       static_cast<std::size_t>(n) * row_bytes, cudaMemcpyHostToDevice),
            "fill");
  }
  rms_norm(on_device(ConstMatrix{dx, DType::bf16, rows, D, D}, Device::cuda, 0), {}, 1e-6,
           on_device(Matrix{dy, DType::bf16, rows, D, D}, Device::cuda, 0));
  cuda_ok(cudaDeviceSynchronize(), "kernel");
  const reference::Forward ref = reference::rms_norm(pattern.cmat(), {}, 1e-6, 0.0);
  for (std::int64_t r : {(std::int64_t{1} << 31) / D - 1, (std::int64_t{1} << 31) / D, rows - 1}) {
    Array got(DType::bf16, 1, D);
    cuda_ok(cudaMemcpy(got.data(), static_cast<char*>(dy) + static_cast<std::size_t>(r) * row_bytes, row_bytes,
                       cudaMemcpyDeviceToHost),
            "row back");
    const std::int64_t pr = r % 16;
    std::vector<double> want(ref.y.begin() + pr * D, ref.y.begin() + (pr + 1) * D);
    const std::vector<double> ones(static_cast<std::size_t>(D), 1.0);
    Array xrow(DType::bf16, 1, D);
    std::memcpy(xrow.data(), static_cast<const char*>(pattern.data()) + static_cast<std::size_t>(pr) * row_bytes,
                row_bytes);
    const reference::Forward rref = reference::rms_norm(xrow.cmat(), {}, 1e-6, 0.0);
    const Scales s = scales(xrow.values(), nullptr, 1, D, ones, std::vector<double>(D, 0.0), rref, false);
    EXPECT_TRUE(within_budget(got.values(), want, s.y, DType::bf16, DType::bf16, growth(D), "y")) << "row " << r;
  }
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace
}  // namespace normkit::test
