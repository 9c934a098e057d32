// Prints the table of docs/reliability.md: every kind of bad argument, the
// call that makes it, and the exact normkit::Error message the user gets.
// The test `bad_inputs.table_in_docs` checks that the document shows exactly
// this output, so the table can never drift from what the library says.
// Exits non-zero if a call does not throw normkit::Error, or writes an
// output before throwing.
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "normkit/normkit.hpp"

namespace nk = normkit;
using nk::DType;
using nk::test::Array;

namespace {

constexpr std::int64_t R = 4, D = 16;

// Valid arguments for every op (f32, 4 × 16); each case breaks one thing.
struct Args {
  Array x{DType::f32, R, D}, residual{DType::f32, R, D}, dy{DType::f32, R, D}, dh_out{DType::f32, R, D};
  Array y{DType::f32, R, D}, h{DType::f32, R, D}, dx{DType::f32, R, D};
  Array weight{DType::f32, 1, D}, bias{DType::f32, 1, D}, mean{DType::f32, 1, R}, rstd{DType::f32, 1, R};
  Array dweight{DType::f32, 1, D}, dbias{DType::f32, 1, D};
  std::vector<std::vector<unsigned char>> outputs() const {
    return {y.bytes(), h.bytes(), dx.bytes(), mean.bytes(), rstd.bytes(), dweight.bytes(), dbias.bytes()};
  }
};

struct Row {
  const char* input;
  const char* call;
  std::function<void(Args&)> f;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

int main() {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::int64_t big = std::int64_t{1} << 62;
  const std::vector<Row> rows = {
      {"weight of the wrong length", "`rms_norm(x, weight[15], …)`",
       [](Args& a) { Array w(DType::f32, 1, D - 1); nk::rms_norm(a.x.cmat(), w.cvec(), 1e-5, a.y.mat()); }},
      {"bias of the wrong length", "`layer_norm(x, w, bias[17], …)`",
       [](Args& a) { Array b(DType::f32, 1, D + 1); nk::layer_norm(a.x.cmat(), a.weight.cvec(), b.cvec(), 1e-5, a.y.mat()); }},
      {"output of the wrong shape", "`layer_norm(…, y (3, 16))`",
       [](Args& a) { Array y(DType::f32, R - 1, D); nk::layer_norm(a.x.cmat(), {}, {}, 1e-5, y.mat()); }},
      {"statistic of the wrong length", "`layer_norm(…, mean[5])`",
       [](Args& a) { Array m(DType::f32, 1, R + 1); nk::layer_norm(a.x.cmat(), {}, {}, 1e-5, a.y.mat(), m.vec()); }},
      {"saved rstd of the wrong length", "`rms_norm_backward(dy, x, rstd[2], …)`",
       [](Args& a) { Array r(DType::f32, 1, 2); nk::rms_norm_backward(a.dy.cmat(), a.x.cmat(), r.cvec(), {}, a.dx.mat()); }},
      {"residual of the wrong shape", "`add_rms_norm(x, residual (4, 17), …)`",
       [](Args& a) { Array r(DType::f32, R, D + 1); nk::add_rms_norm(a.x.cmat(), r.cmat(), {}, 1e-5, a.h.mat(), a.y.mat()); }},
      {"dh_out of the wrong shape", "`add_layer_norm_backward(dy, dh_out (5, 16), …)`",
       [](Args& a) {
         Array d(DType::f32, R + 1, D);
         nk::add_layer_norm_backward(a.dy.cmat(), d.cmat(), a.h.cmat(), a.mean.cvec(), a.rstd.cvec(), {}, a.dx.mat());
       }},
      {"gradient output of the wrong length", "`layer_norm_backward(…, dweight[3])`",
       [](Args& a) {
         Array dw(DType::f32, 1, 3);
         nk::layer_norm_backward(a.dy.cmat(), a.x.cmat(), a.mean.cvec(), a.rstd.cvec(), {}, a.dx.mat(), dw.vec());
       }},
      {"missing saved mean", "`layer_norm_backward(dy, x, {}, rstd, …)`",
       [](Args& a) { nk::layer_norm_backward(a.dy.cmat(), a.x.cmat(), {}, a.rstd.cvec(), {}, a.dx.mat()); }},
      {"missing saved rstd", "`rms_norm_backward(dy, x, {}, …)`",
       [](Args& a) { nk::rms_norm_backward(a.dy.cmat(), a.x.cmat(), {}, {}, a.dx.mat()); }},
      {"missing output", "`rms_norm(x, {}, eps, Matrix{})`",
       [](Args& a) { nk::rms_norm(a.x.cmat(), {}, 1e-5, nk::Matrix{}); }},
      {"output dtype differs from x", "`rms_norm(x f32, …, y bf16)`",
       [](Args& a) { Array y(DType::bf16, R, D); nk::rms_norm(a.x.cmat(), {}, 1e-5, y.mat()); }},
      {"parameter dtype not allowed", "`rms_norm(x bf16, weight f16, …)`",
       [](Args&) {
         Array x(DType::bf16, R, D), y(DType::bf16, R, D), w(DType::f16, 1, D);
         nk::rms_norm(x.cmat(), w.cvec(), 1e-5, y.mat());
       }},
      {"f32 parameters with f64 activations", "`layer_norm(x f64, weight f32, …)`",
       [](Args& a) {
         Array x(DType::f64, R, D), y(DType::f64, R, D);
         nk::layer_norm(x.cmat(), a.weight.cvec(), {}, 1e-5, y.mat());
       }},
      {"weight and bias of different dtypes", "`layer_norm(x bf16, weight bf16, bias f32, …)`",
       [](Args& a) {
         Array x(DType::bf16, R, D), y(DType::bf16, R, D), w(DType::bf16, 1, D);
         nk::layer_norm(x.cmat(), w.cvec(), a.bias.cvec(), 1e-5, y.mat());
       }},
      {"statistic in a 16-bit dtype", "`layer_norm(x bf16, …, mean bf16)`",
       [](Args&) {
         Array x(DType::bf16, R, D), y(DType::bf16, R, D), m(DType::bf16, 1, R);
         nk::layer_norm(x.cmat(), {}, {}, 1e-5, y.mat(), m.vec());
       }},
      {"16-bit residual with f32 activations", "`add_rms_norm(x f32, residual f16, …)`",
       [](Args& a) { Array r(DType::f16, R, D); nk::add_rms_norm(a.x.cmat(), r.cmat(), {}, 1e-5, a.h.mat(), a.y.mat()); }},
      {"h in a different dtype from residual", "`add_rms_norm(x bf16, residual bf16, …, h f32, …)`",
       [](Args& a) {
         Array x(DType::bf16, R, D), r(DType::bf16, R, D), y(DType::bf16, R, D);
         nk::add_rms_norm(x.cmat(), r.cmat(), {}, 1e-5, a.h.mat(), y.mat());
       }},
      {"gradient dtype differs from weight", "`rms_norm_backward(x bf16, weight bf16, …, dweight f32)`",
       [](Args& a) {
         Array x(DType::bf16, R, D), dy(DType::bf16, R, D), dx(DType::bf16, R, D), w(DType::bf16, 1, D);
         nk::rms_norm_backward(dy.cmat(), x.cmat(), a.rstd.cvec(), w.cvec(), dx.mat(), a.dweight.vec());
       }},
      {"dtype value outside the enum", "`x.dtype = DType(9)`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.dtype = static_cast<DType>(9);
         nk::rms_norm(x, {}, 1e-5, a.y.mat());
       }},
      {"negative eps", "`layer_norm(…, eps = -1e-5, …)`",
       [](Args& a) { nk::layer_norm(a.x.cmat(), {}, {}, -1e-5, a.y.mat()); }},
      {"NaN eps", "`layer_norm(…, eps = NaN, …)`",
       [nan](Args& a) { nk::layer_norm(a.x.cmat(), {}, {}, nan, a.y.mat()); }},
      {"infinite eps", "`rms_norm(…, eps = Inf, …)`",
       [inf](Args& a) { nk::rms_norm(a.x.cmat(), {}, inf, a.y.mat()); }},
      {"eps beyond f32 arithmetic", "`rms_norm(x f32, …, eps = 1e39, …)`",
       [](Args& a) { nk::rms_norm(a.x.cmat(), {}, 1e39, a.y.mat()); }},
      {"weight_offset without a weight", "`rms_norm(x, {}, eps, y, {}, 1.0)`",
       [](Args& a) { nk::rms_norm(a.x.cmat(), {}, 1e-5, a.y.mat(), {}, 1.0); }},
      {"non-finite weight_offset", "`rms_norm(x, w, eps, y, {}, NaN)`",
       [nan](Args& a) { nk::rms_norm(a.x.cmat(), a.weight.cvec(), 1e-5, a.y.mat(), {}, nan); }},
      {"weight_offset beyond f32 arithmetic", "`rms_norm(x f32, w, eps, y, {}, -1e39)`",
       [](Args& a) { nk::rms_norm(a.x.cmat(), a.weight.cvec(), 1e-5, a.y.mat(), {}, -1e39); }},
      {"null data with a non-zero size", "`x.data = nullptr`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.data = nullptr;
         nk::layer_norm(x, {}, {}, 1e-5, a.y.mat());
       }},
      {"null vector with a size", "`ConstVector{nullptr, f32, 16}` as weight",
       [](Args& a) {
         const nk::ConstVector w{nullptr, DType::f32, D, nk::Device::cpu};
         nk::rms_norm(a.x.cmat(), w, 1e-5, a.y.mat());
       }},
      {"null data with a size no memory could hold", "`x = {nullptr, f32, 2^62, 3·2^20}`",
       [](Args& a) {
         const nk::ConstMatrix x{nullptr, DType::f32, big, std::int64_t{3} << 20, std::int64_t{3} << 20, nk::Device::cpu};
         nk::rms_norm(x, {}, 1e-5, a.y.mat());
       }},
      {"row_stride smaller than D", "`x.row_stride = 15`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.row_stride = D - 1;
         nk::rms_norm(x, {}, 1e-5, a.y.mat());
       }},
      {"negative rows", "`x.rows = -1`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.rows = -1;
         nk::rms_norm(x, {}, 1e-5, a.y.mat());
       }},
      {"negative vector size", "`weight.size = -3`",
       [](Args& a) {
         nk::ConstVector w = a.weight.cvec();
         w.size = -3;
         nk::rms_norm(a.x.cmat(), w, 1e-5, a.y.mat());
       }},
      {"D = 0 with rows", "`x (4, 0)`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.cols = 0;
         nk::Matrix y = a.y.mat();
         y.cols = 0;
         nk::layer_norm(x, {}, {}, 1e-5, y);
       }},
      {"a view on another device", "`x.device = Device::cuda`",
       [](Args& a) {
         nk::ConstMatrix x = a.x.cmat();
         x.device = nk::Device::cuda;
         nk::rms_norm(x, {}, 1e-5, a.y.mat());
       }},
      {"output partly overlapping an input", "`y = x shifted by one element`",
       [](Args&) {
         Array buf(DType::f32, R + 1, D);
         nk::ConstMatrix x = buf.cmat();
         x.rows = R;
         nk::Matrix y = buf.mat();
         y.rows = R;
         y.data = static_cast<float*>(buf.data()) + 1;
         nk::rms_norm(x, {}, 1e-5, y);
       }},
      {"in place with a different stride", "`y = x's memory, row_stride 2·D vs D`",
       [](Args&) {
         Array buf(DType::f32, 2 * R, D);
         const nk::ConstMatrix x{buf.data(), DType::f32, R, D, D, nk::Device::cpu};
         const nk::Matrix y{buf.data(), DType::f32, R, D, 2 * D, nk::Device::cpu};
         nk::rms_norm(x, {}, 1e-5, y);
       }},
      {"output overlapping a parameter", "`y = weight's memory`",
       [](Args& a) {
         const nk::Matrix y{a.weight.data(), DType::f32, 1, D, D, nk::Device::cpu};
         Array x(DType::f32, 1, D);
         nk::layer_norm(x.cmat(), a.weight.cvec(), {}, 1e-5, y);
       }},
      {"two outputs sharing memory", "`mean` and `rstd` the same buffer",
       [](Args& a) {
         const nk::Vector rstd{a.mean.data(), DType::f32, R, nk::Device::cpu};
         nk::layer_norm(a.x.cmat(), {}, {}, 1e-5, a.y.mat(), a.mean.vec(), rstd);
       }},
      {"fused outputs sharing memory", "`add_rms_norm(…, h, h)`",
       [](Args& a) { nk::add_rms_norm(a.x.cmat(), a.residual.cmat(), {}, 1e-5, a.h.mat(), a.h.mat()); }},
      {"gradient output over a saved statistic", "`dweight = rstd's memory`",
       [](Args& a) {
         Array rd(DType::f32, 1, D);
         const nk::Vector dw{rd.data(), DType::f32, D, nk::Device::cpu};
         const nk::ConstVector rstd{rd.data(), DType::f32, R, nk::Device::cpu};
         nk::rms_norm_backward(a.dy.cmat(), a.x.cmat(), rstd, {}, a.dx.mat(), dw);
       }},
  };

  std::printf("| bad input | call | normkit::Error message |\n| --- | --- | --- |\n");
  int failures = 0;
  for (const Row& r : rows) {
    Args a;
    const auto before = a.outputs();
    std::string msg;
    try {
      r.f(a);
      std::fprintf(stderr, "no error for: %s\n", r.input);
      ++failures;
      continue;
    } catch (const nk::Error& e) {
      msg = e.what();
    }
    if (a.outputs() != before) {
      std::fprintf(stderr, "an output was written before the error: %s\n", r.input);
      ++failures;
    }
    std::printf("| %s | %s | `%s` |\n", r.input, escape(r.call).c_str(), escape(msg).c_str());
  }
  return failures == 0 ? 0 : 1;
}
