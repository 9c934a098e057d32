// The CPU kernels called directly (detail::cpu_forward / cpu_backward), once
// for every SIMD target compiled in that this CPU supports: every dtype
// combination, odd widths, strided rows, in-place and fused layouts against
// the fp64 oracle with the budget of tolerance.hpp; bit-exact 16-bit
// conversions; rows that overflow or underflow the statistics; bitwise
// thread-count independence; and the threading threshold.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cases.hpp"
#include "cpu/forward_rows.hpp"
#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "cpu/scratch.hpp"
#include "normkit/version.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

using detail::BackwardArgs;
using detail::ForwardArgs;

// Forces run-time dispatch to one target for the scope.
class ScopedTarget {
 public:
  explicit ScopedTarget(std::int64_t t) { detail::force_cpu_target(t); }
  ~ScopedTarget() { detail::force_cpu_target(0); }
  ScopedTarget(const ScopedTarget&) = delete;
  ScopedTarget& operator=(const ScopedTarget&) = delete;
};

// Sets whether the AVX-512 kernels round to bf16 with the AVX-512 BF16
// instruction (where the CPU has it) for the scope.
class ScopedBf16Instructions {
 public:
  explicit ScopedBf16Instructions(bool on) { detail::use_bf16_instructions(on); }
  ~ScopedBf16Instructions() { detail::use_bf16_instructions(true); }
  ScopedBf16Instructions(const ScopedBf16Instructions&) = delete;
  ScopedBf16Instructions& operator=(const ScopedBf16Instructions&) = delete;
};

// Sets the rule by which the backward's pass A takes two rows at a time
// (where it pays, never, always), for the scope; then back to the default.
class ScopedRowPairs {
 public:
  explicit ScopedRowPairs(detail::RowPairs rule) { detail::g_backward_row_pairs = rule; }
  ~ScopedRowPairs() { detail::g_backward_row_pairs = detail::RowPairs::where_it_pays; }
  ScopedRowPairs(const ScopedRowPairs&) = delete;
  ScopedRowPairs& operator=(const ScopedRowPairs&) = delete;
};

class Kernels : public ::testing::TestWithParam<std::int64_t> {
 protected:
  void SetUp() override { detail::force_cpu_target(GetParam()); }
  void TearDown() override { detail::force_cpu_target(0); }
};

std::string target_test_name(const ::testing::TestParamInfo<std::int64_t>& info) {
  return detail::cpu_target_name(info.param);
}


// The value a kernel must store for h = x + residual: the sum in the compute
// type (f32, or f64 for f64 data), rounded to h's dtype.
double rounded_sum(double x, double r, DType x_dtype, DType h_dtype) {
  unsigned char one[8];
  if (x_dtype == DType::f64) {
    store(one, h_dtype, 0, x + r);
  } else {
    const float s = static_cast<float>(x) + static_cast<float>(r);
    store(one, h_dtype, 0, static_cast<double>(s));
  }
  return reference::load(one, h_dtype, 0);
}

// Every (residual dtype) a case can use: none, x's own, f32 for 16-bit x.
std::vector<std::optional<DType>> residual_dtypes(DType x) {
  std::vector<std::optional<DType>> out = {std::nullopt, x};
  if (x == DType::f16 || x == DType::bf16) out.push_back(DType::f32);
  return out;
}

std::vector<double> mean_abs_rows(const std::vector<double>& v, std::int64_t rows, std::int64_t D) {
  std::vector<double> out(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    double a = 0;
    for (std::int64_t j = 0; j < D; ++j) a += std::abs(v[r * D + j]);
    out[r] = a / static_cast<double>(D);
  }
  return out;
}

// Forward outputs of one kernel call, for comparisons.
struct ForwardRun {
  Array x_before, h, y, mean, rstd;
};

// Runs cpu_forward on x (and residual): layouts chosen by `in_place`.
ForwardRun run_forward(const Case& c, std::optional<DType> res, Array& x, Array* residual, const Params& p,
                       double eps, bool in_place) {
  const std::int64_t rows = x.rows(), D = x.cols();
  ForwardRun out{x, {}, {}, Array(stat_dtype(c.x), 1, rows), Array(stat_dtype(c.x), 1, rows)};
  ForwardArgs a;
  a.kind = c.op;
  a.rows = rows;
  a.D = D;
  a.x = x.data();
  a.x_stride = x.stride();
  a.x_dtype = c.x;
  a.w_dtype = c.w;
  a.weight = p.has_weight ? p.weight.data() : nullptr;
  a.bias = p.has_bias ? p.bias.data() : nullptr;
  a.weight_offset = p.offset;
  a.eps = eps;
  a.mean = c.op == NormKind::layer_norm ? out.mean.data() : nullptr;
  a.rstd = out.rstd.data();
  Array* h = nullptr;
  if (res) {
    a.residual = residual->data();
    a.residual_stride = residual->stride();
    a.res_dtype = *res;
    // In place: the residual stream is updated where it lies.
    out.h = in_place ? Array() : Array(*res, rows, D, D + 1);
    h = in_place ? residual : &out.h;
    a.h = h->data();
    a.h_stride = h->stride();
  }
  Array* y = &x;
  if (!in_place) {
    out.y = Array(c.x, rows, D, D + 2);
    y = &out.y;
  }
  a.y = y->data();
  a.y_stride = y->stride();
  detail::cpu_forward(a);
  if (in_place) {
    out.y = x;
    if (res) out.h = *residual;
  }
  return out;
}

void check_forward(const Case& c, std::optional<DType> res, std::int64_t rows, std::int64_t D, bool in_place,
                   std::mt19937_64& rng) {
  SCOPED_TRACE(name_of(c) + (res ? std::string(" res=") + std::string(dtype_name(*res)) : std::string()) +
               " rows=" + std::to_string(rows) + " D=" + std::to_string(D) + (in_place ? " in-place" : ""));
  const double eps = 1e-5;
  Array x(c.x, rows, D, D + 3), residual;
  fill_normal(x, rng, 0.5, 2.0);
  if (res) {
    residual = Array(*res, rows, D, D + 1);
    fill_normal(residual, rng, -0.3, 1.5);
  }
  const Array residual_before = residual;
  const Params p = make_params(c, D, rng);
  const ForwardRun run = run_forward(c, res, x, res ? &residual : nullptr, p, eps, in_place);

  const Array* normed = &run.x_before;
  if (res) {
    // h is the compute-type sum rounded once to h's dtype: bit-exact.
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < D; ++j) {
        const double want = rounded_sum(run.x_before.get(r, j), residual_before.get(r, j), c.x, *res);
        ASSERT_EQ(run.h.get(r, j), want) << "h at row " << r << ", column " << j;
      }
    EXPECT_TRUE(run.h.padding_intact());
    normed = &run.h;
  }
  const std::vector<double> xv = normed->values();
  const reference::Forward ref = reference_forward(c, normed->cmat(), p, eps);
  const Scales s = scales(xv, nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm);
  EXPECT_TRUE(within_budget(run.y.values(), ref.y, s.y, c.x, c.x, growth(D), "y"));
  EXPECT_TRUE(run.y.padding_intact()) << "y was written outside its rows";
  EXPECT_TRUE(within_budget(run.rstd.values(), ref.rstd, ref.rstd, stat_dtype(c.x), c.x, growth(D), "rstd"));
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(run.mean.values(), ref.mean, mean_abs_rows(xv, rows, D), stat_dtype(c.x), c.x,
                              growth(D), "mean"));
  }
}

// Affine options worth sweeping on every target: with and without gains,
// and LayerNorm's bias without a weight (the stand-in ones row in w's dtype).
bool swept(const Case& c) { return c.affine != Affine::weight || c.op == NormKind::rms_norm; }

TEST_P(Kernels, ForwardEveryDtypeAndWidth) {
  ASSERT_STREQ(detail::active_cpu_target(), detail::cpu_target_name(GetParam()));
  ASSERT_STREQ(cpu_simd_target(), detail::cpu_target_name(GetParam()));  // follows a forced target
  std::mt19937_64 rng(1);
  for (const Case& c : all_cases()) {
    if (!swept(c)) continue;
    for (std::optional<DType> res : residual_dtypes(c.x)) {
      for (std::size_t k = 0; k < kWidths.size(); ++k) {
        const std::int64_t D = kWidths[k];
        const std::int64_t rows = D > 5000 ? 1 : 3;
        check_forward(c, res, rows, D, k % 2 == 1, rng);
      }
    }
  }
}

struct BackwardRun {
  Array dx, dweight, dbias;
  Array mean, rstd;  // the statistics it used
};

// Backward of one case on this target, with the statistics from this
// target's own forward. xin is x (plain) or h (fused, with dh_out).
BackwardRun run_backward(const Case& c, const Array& xin, const Array& dy_in, const Array* dh_out_in,
                         const Params& p, double eps, bool in_place) {
  const std::int64_t rows = xin.rows(), D = xin.cols();
  // Statistics: the forward of the plain op on xin (for the fused op, the
  // forward's statistics are those of h, which is what xin holds).
  Array xin_copy = xin;
  const Case fc{c.op, xin.dtype(), xin.dtype() == c.x ? c.w : DType::f32, c.affine};
  Params fp = p;
  if (fc.w != c.w) {  // a f32 stream with 16-bit params: forward stats only need the same gains
    fp.weight = Array(DType::f32, 1, D);
    fp.bias = Array(DType::f32, 1, D);
    for (std::int64_t j = 0; j < D; ++j) {
      if (p.has_weight) fp.weight.set(0, j, p.weight.get(0, j));
      if (p.has_bias) fp.bias.set(0, j, p.bias.get(0, j));
    }
  }
  const ForwardRun f = run_forward(fc, std::nullopt, xin_copy, nullptr, fp, eps, false);

  Array dy = dy_in;
  Array dh_out = dh_out_in ? *dh_out_in : Array();
  BackwardRun out{Array(), Array(c.w, 1, D), Array(c.w, 1, D), f.mean, f.rstd};
  BackwardArgs a;
  a.kind = c.op;
  a.rows = rows;
  a.D = D;
  a.dy = dy.data();
  a.dy_stride = dy.stride();
  a.dy_dtype = c.x;
  a.xin = xin.data();
  a.xin_stride = xin.stride();
  a.xin_dtype = xin.dtype();
  a.mean = c.op == NormKind::layer_norm ? f.mean.data() : nullptr;
  a.rstd = f.rstd.data();
  a.weight = p.has_weight ? p.weight.data() : nullptr;
  a.weight_offset = p.offset;
  a.w_dtype = c.w;
  a.dweight = out.dweight.data();
  a.dbias = c.op == NormKind::layer_norm ? out.dbias.data() : nullptr;
  Array* dx = nullptr;
  if (dh_out_in) {
    a.dh_out = dh_out.data();
    a.dh_out_stride = dh_out.stride();
  }
  if (in_place) {
    dx = dh_out_in ? &dh_out : &dy;  // dh == dh_out (fused) or dx == dy (plain)
  } else {
    out.dx = Array(xin.dtype(), rows, D, D + 2);
    dx = &out.dx;
  }
  a.dx = dx->data();
  a.dx_stride = dx->stride();
  detail::cpu_backward(a);
  if (in_place) out.dx = *dx;
  return out;
}

using Gen = std::function<double(std::int64_t, std::int64_t)>;

// xin from gen, or N(0.5, 2²) when gen is empty.
void check_backward(const Case& c, DType xin_dtype, bool fused, std::int64_t rows, std::int64_t D, bool in_place,
                    std::mt19937_64& rng, const Gen& gen = {}) {
  SCOPED_TRACE(name_of(c) + " xin=" + std::string(dtype_name(xin_dtype)) + (fused ? " fused" : "") +
               " rows=" + std::to_string(rows) + " D=" + std::to_string(D) + (in_place ? " in-place" : ""));
  const double eps = 1e-5;
  Array xin(xin_dtype, rows, D, D + 3), dy(c.x, rows, D, D + 1), dh_out;
  fill_normal(xin, rng, 0.5, 2.0);
  if (gen)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < D; ++j) xin.set(r, j, gen(r, j));
  fill_normal(dy, rng);
  if (fused) {
    dh_out = Array(xin_dtype, rows, D, D + 4);
    fill_normal(dh_out, rng, 0.0, 0.5);
  }
  const Params p = make_params(c, D, rng);
  const BackwardRun run = run_backward(c, xin, dy, fused ? &dh_out : nullptr, p, eps, in_place);

  const std::vector<double> xv = xin.values(), dyv = dy.values();
  const reference::Forward fwd = reference_forward(c, xin.cmat(), p, eps);
  reference::Backward ref = reference_backward(c, dy.cmat(), xin.cmat(), p, eps);
  const Scales s = scales(xv, &dyv, rows, D, p.gain_size, p.shift, fwd, c.op == NormKind::layer_norm);
  std::vector<double> dx_scale = s.dx;
  if (fused) {
    const std::vector<double> dov = dh_out.values();
    for (std::size_t i = 0; i < dov.size(); ++i) {
      ref.dx[i] += dov[i];
      dx_scale[i] += std::abs(dov[i]);
    }
  }
  EXPECT_TRUE(within_budget(run.dx.values(), ref.dx, dx_scale, xin_dtype, c.x, growth(D), "dx"));
  EXPECT_TRUE(run.dx.padding_intact());
  EXPECT_TRUE(within_budget(run.dweight.values(), ref.dweight, s.dweight, c.w, c.x, growth(D) + growth(rows),
                            "dweight"));
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(run.dbias.values(), ref.dbias, s.dbias, c.w, c.x, growth(rows), "dbias"));
  }
}

TEST_P(Kernels, BackwardEveryDtypeAndWidth) {
  std::mt19937_64 rng(2);
  for (const Case& c : all_cases()) {
    if (!swept(c)) continue;
    std::vector<std::pair<DType, bool>> inputs = {{c.x, false}, {c.x, true}};
    if (c.x == DType::f16 || c.x == DType::bf16) inputs.push_back({DType::f32, true});
    for (auto [xin_dtype, fused] : inputs) {
      for (std::size_t k = 0; k < kWidths.size(); ++k) {
        const std::int64_t D = kWidths[k];
        // Many rows on narrow widths spread dweight over several row blocks.
        const std::int64_t rows = D > 5000 ? 2 : D <= 111 ? 70 : 3;
        check_backward(c, xin_dtype, fused, rows, D, k % 2 == 0, rng);
      }
    }
  }
}

// Wide rows with their parameters arranged (arrange-inl.hpp: on AVX2 and
// older targets, the forward's up to D = 65536 and the backward's f32
// weights of bf16 rows; AVX-512 targets read them as stored here), against
// the oracle: enough rows to arrange, a width that ends in a partial pair.
TEST_P(Kernels, WideRowsWithArrangedParameters) {
  std::mt19937_64 rng(15);
  for (const Case& c : {Case{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both},
                        Case{NormKind::rms_norm, DType::bf16, DType::f32, Affine::offset},
                        Case{NormKind::layer_norm, DType::f16, DType::f16, Affine::both},
                        Case{NormKind::rms_norm, DType::bf16, DType::bf16, Affine::weight}}) {
    check_forward(c, std::nullopt, 5, 8195, false, rng);
    check_forward(c, DType::f32, 5, 8195, true, rng);
    check_backward(c, c.x, false, 5, 8195, false, rng);
    check_backward(c, c.x, true, 5, 8195, true, rng);
  }
}

// Outputs of kStreamMinBytes or more are written with non-temporal stores,
// after peeling to an aligned address: rows here start unaligned (strides
// D + 2, D + 3) and end in a partial vector. At D = 1000 the 16-bit
// parameters are arranged (arrange-inl.hpp), and a bf16 row that does not
// start at a pair boundary is written with ordinary stores.
TEST_P(Kernels, LargeOutputsWithStreamingStores) {
  std::mt19937_64 rng(10);
  const std::pair<Case, std::int64_t> cases[] = {{Case{NormKind::layer_norm, DType::f32, DType::f32, Affine::both}, 4097},
                                                 {Case{NormKind::rms_norm, DType::bf16, DType::f32, Affine::offset}, 4097},
                                                 {Case{NormKind::layer_norm, DType::f16, DType::f16, Affine::bias}, 4097},
                                                 {Case{NormKind::layer_norm, DType::bf16, DType::bf16, Affine::both}, 1000},
                                                 {Case{NormKind::rms_norm, DType::f16, DType::f16, Affine::offset}, 1000}};
  for (const auto& [c, D] : cases) {
    const std::int64_t rows = detail::kStreamMinBytes / (D * static_cast<std::int64_t>(dtype_size(c.x))) + 1;
    // An output whose pages are mapped in (written once: zeroed here).
    std::vector<unsigned char> out(static_cast<std::size_t>(rows * D) * dtype_size(c.x));
    ForwardArgs f;
    f.rows = rows;
    f.D = D;
    f.x_dtype = c.x;
    f.x = &f;  // any other address: not in place
    f.y = out.data();
    f.y_stride = D;
    ASSERT_TRUE(detail::forward_streams(f));
    f.y = &f;
    ASSERT_FALSE(detail::forward_streams(f)) << "in place never streams";
    check_forward(c, std::nullopt, rows, D, false, rng);
    BackwardArgs b;
    b.rows = rows;
    b.D = D;
    b.xin_dtype = c.x;
    b.dy = &f;
    b.dx = out.data();
    b.dx_stride = D;
    ASSERT_TRUE(detail::backward_streams(b));
    check_backward(c, c.x, false, rows, D, false, rng);
  }
}

// With h streamed, the fused forward's output pass forms h again from the
// cached x and residual (rounded to h's dtype): every output must be the
// bits of the same call with h in place of a copy of the residual, which
// stores h normally and reads it back. The streamed path runs here whether
// or not fused_h_streams picks it on this CPU (not for a bf16 h rounded by
// integer operations), and the policy is checked beside it. Rows with a
// large mean (LayerNorm's centred pass reads h back) and a row that
// overflows (the rescue reads it too) are included.
TEST_P(Kernels, FusedForwardWithStreamedHMatchesStoredH) {
  struct Aligned {
    void* p;
    explicit Aligned(std::size_t bytes) : p(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)) {
      std::memset(p, 0, bytes);  // mapped in, as a reused buffer is
    }
    ~Aligned() { std::free(p); }
  };
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  // Rows of 4136 elements: a row starts at every alignment (the rows that
  // do not start at StreamPair's take ordinary stores), and each ends in a tail.
  const std::int64_t D = 4136;
  const std::tuple<NormKind, DType, DType> cases[] = {
      {NormKind::layer_norm, DType::f32, DType::f32},  {NormKind::rms_norm, DType::f32, DType::f32},
      {NormKind::layer_norm, DType::bf16, DType::f32}, {NormKind::rms_norm, DType::f64, DType::f64},
      {NormKind::layer_norm, DType::bf16, DType::bf16}, {NormKind::rms_norm, DType::bf16, DType::bf16},
      {NormKind::layer_norm, DType::f16, DType::f16},  {NormKind::rms_norm, DType::f16, DType::f16}};
  for (const auto& [kind, xt, rt] : cases) {
    const std::size_t xs = dtype_size(xt), rs = dtype_size(rt);
    const std::int64_t rows = detail::kStreamMinBytes / (D * static_cast<std::int64_t>(rs)) + 1;
    const std::size_t n = static_cast<std::size_t>(rows * D);
    Aligned x(n * xs), res(n * rs), h(n * rs), h_in_place(n * rs), y(n * xs), y2(n * xs);
    Aligned w(static_cast<std::size_t>(D) * rs), b(static_cast<std::size_t>(D) * rs);
    const auto put = [](void* p, DType t, std::size_t i, double v) {
      if (t == DType::f64) static_cast<double*>(p)[i] = v;
      else if (t == DType::f32) static_cast<float*>(p)[i] = static_cast<float>(v);
      else if (t == DType::f16) static_cast<half_t*>(p)[i] = to_f16(static_cast<float>(v));
      else static_cast<bfloat16_t*>(p)[i] = to_bf16(static_cast<float>(v));
    };
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t row = i / static_cast<std::size_t>(D);
      // Row 5 overflows the sums (no f16 does: the largest it holds).
      const double huge = xt == DType::f64 ? 1e300 : xt == DType::f16 ? 6e4 : 1e37;
      const double big = row == 5 ? huge : row % 7 == 0 ? 1e4 : 0.0;
      put(x.p, xt, i, normal(rng) + big);
      put(res.p, rt, i, normal(rng));
    }
    std::memcpy(h_in_place.p, res.p, n * rs);
    for (std::int64_t j = 0; j < D; ++j) {
      put(w.p, rt, static_cast<std::size_t>(j), 1 + 0.1 * normal(rng));
      put(b.p, rt, static_cast<std::size_t>(j), 0.1 * normal(rng));
    }
    const std::size_t ss = xt == DType::f64 ? 8 : 4;
    std::vector<unsigned char> mean(static_cast<std::size_t>(rows) * ss), rstd(mean.size());
    std::vector<unsigned char> mean2(mean.size()), rstd2(mean.size());
    ForwardArgs f;
    f.kind = kind;
    f.rows = rows;
    f.D = D;
    f.x = x.p;
    f.x_stride = f.residual_stride = f.h_stride = f.y_stride = D;
    f.residual = res.p;
    f.h = h.p;
    f.y = y.p;
    f.weight = w.p;
    f.bias = kind == NormKind::layer_norm ? b.p : nullptr;
    f.eps = 1e-5;
    f.mean = kind == NormKind::layer_norm ? mean.data() : nullptr;
    f.rstd = rstd.data();
    f.x_dtype = xt;
    f.res_dtype = f.w_dtype = rt;
    const std::string what = std::string(norm_title(kind)) + " " + std::string(dtype_name(xt));
    EXPECT_EQ(detail::fused_h_streams(f), rt != DType::bf16 || detail::g_bf16_instructions) << what;
    const detail::ForwardStreams streamed{detail::forward_streams(f), true};
    if (kind == NormKind::layer_norm)
      detail::forward_rows<NormKind::layer_norm>(f, 0, rows, streamed);
    else
      detail::forward_rows<NormKind::rms_norm>(f, 0, rows, streamed);
    ForwardArgs g = f;
    g.residual = g.h = h_in_place.p;
    g.y = y2.p;
    g.mean = kind == NormKind::layer_norm ? mean2.data() : nullptr;
    g.rstd = rstd2.data();
    ASSERT_FALSE(detail::fused_h_streams(g)) << "h over an input is never streamed";
    detail::cpu_forward(g);
    EXPECT_EQ(std::memcmp(h.p, h_in_place.p, n * rs), 0) << what << ": h";
    EXPECT_EQ(std::memcmp(y.p, y2.p, n * xs), 0) << what << ": y";
    EXPECT_EQ(rstd, rstd2) << what << ": rstd";
    EXPECT_EQ(mean, mean2) << what << ": mean";
  }
}

// A large output fresh from the allocator (pages not yet mapped in) gets
// ordinary stores: non-temporal stores into pages the OS has just zeroed
// through the cache are twice as slow (docs/kernels.md). Once its pages are
// resident, it streams.
TEST(KernelStreams, FreshPagesGetOrdinaryStores) {
  const std::int64_t D = 4096, rows = detail::kStreamMinBytes / (D * 4) + 1;
  const std::size_t bytes = static_cast<std::size_t>(rows * D) * 4;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  std::vector<float> x(4);
  ForwardArgs f;
  f.rows = rows;
  f.D = D;
  f.x = x.data();
  f.y = mem;
  f.y_stride = D;
  BackwardArgs b;
  b.rows = rows;
  b.D = D;
  b.dy = x.data();
  b.dx = mem;
  b.dx_stride = D;
  EXPECT_FALSE(detail::forward_streams(f));
  EXPECT_FALSE(detail::backward_streams(b));
  std::memset(mem, 0, bytes);
  EXPECT_TRUE(detail::forward_streams(f));
  EXPECT_TRUE(detail::backward_streams(b));
  // Only the first page resident: still a fresh buffer.
  ASSERT_EQ(munmap(mem, bytes), 0);
  mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  static_cast<unsigned char*>(mem)[0] = 1;
  f.y = mem;
  EXPECT_FALSE(detail::forward_streams(f));
  ASSERT_EQ(munmap(mem, bytes), 0);
}

// Conversions, bit for bit. f32 -> f16/bf16: a LayerNorm of constant rows
// has x̂ = 0 exactly, so y = 0·1 + bias is the f32 bias rounded to y's
// dtype. f16/bf16 -> f32: the fused op with an f32 stream and residual −0
// stores h = x exactly.
std::vector<std::uint32_t> f32_patterns() {
  std::vector<std::uint32_t> out;
  std::mt19937_64 rng(3);
  for (std::uint32_t sign : {0u, 0x80000000u})
    for (std::uint32_t e = 0; e < 256; ++e) {
      // Mantissas at the bf16 (16 dropped bits) and f16 (13 dropped bits, more
      // in f16's subnormal range) rounding boundaries, plus random ones.
      for (std::uint32_t m : {0x0u, 0x1u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0xfffu, 0x1000u, 0x1001u, 0x3000u,
                              0x7fffffu, 0x400000u, 0x7f8000u, 0x7ff000u, 0x2000u, 0x6000u, 0x5fffu})
        out.push_back(sign | (e << 23) | m);
      for (int k = 0; k < 8; ++k) out.push_back(sign | (e << 23) | static_cast<std::uint32_t>(rng() & 0x7fffffu));
    }
  return out;
}

std::uint16_t bits16(const Array& b, std::int64_t j) {
  std::uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(b.data()) + 2 * j, 2);
  return v;
}

TEST_P(Kernels, DemotionRoundsToNearestEven) {
  const std::vector<std::uint32_t> bits = f32_patterns();
  const std::int64_t D = static_cast<std::int64_t>(bits.size());
  for (auto [t, insn] : {std::pair{DType::f16, false}, std::pair{DType::bf16, false}, std::pair{DType::bf16, true}}) {
    if (insn && !detail::cpu_has_bf16_instructions()) continue;
    SCOPED_TRACE(std::string(dtype_name(t)) + (insn ? " with the AVX-512 BF16 instruction" : ""));
    const ScopedBf16Instructions scope(insn);
    Array x(t, 2, D), bias(DType::f32, 1, D), y(t, 2, D);
    for (std::int64_t j = 0; j < D; ++j) {
      x.set(0, j, 1.0);
      x.set(1, j, -3.0);
      std::memcpy(static_cast<float*>(bias.data()) + j, &bits[j], 4);
    }
    ForwardArgs a;
    a.kind = NormKind::layer_norm;
    a.rows = 2;
    a.D = D;
    a.x = x.data();
    a.x_stride = D;
    a.y = y.data();
    a.y_stride = D;
    a.x_dtype = t;
    a.w_dtype = DType::f32;
    a.bias = bias.data();
    a.eps = 1e-5;
    detail::cpu_forward(a);
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t j = 0; j < D; ++j) {
        const float f = std::bit_cast<float>(bits[j]);
        const std::uint16_t want = t == DType::f16 ? to_f16(f).bits : to_bf16(f).bits;
        const std::uint16_t got = bits16(y, r * D + j);
        if (f == 0.0f) {
          // 0·1 + (−0) is +0 in IEEE arithmetic; either zero is right.
          ASSERT_EQ(got & 0x7fffu, 0u) << "zero input";
        } else if (std::isnan(f)) {
          // Any NaN (F16C keeps the payload, the portable path does not).
          const bool nan = t == DType::f16 ? (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0
                                           : (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) != 0;
          ASSERT_TRUE(nan) << std::hex << "f32 bits 0x" << bits[j] << " gave 0x" << got;
        } else {
          ASSERT_EQ(got, want) << std::hex << "f32 bits 0x" << bits[j];
        }
      }
  }
}

TEST_P(Kernels, PromotionIsExact) {
  const std::int64_t D = 1 << 16;  // every 16-bit pattern
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array x(t, 1, D), r(DType::f32, 1, D), h(DType::f32, 1, D), y(t, 1, D);
    for (std::int64_t j = 0; j < D; ++j) {
      const std::uint16_t v = static_cast<std::uint16_t>(j);
      std::memcpy(static_cast<unsigned char*>(x.data()) + 2 * j, &v, 2);
      r.set(0, j, -0.0);
    }
    ForwardArgs a;
    a.kind = NormKind::rms_norm;
    a.rows = 1;
    a.D = D;
    a.x = x.data();
    a.x_stride = D;
    a.residual = r.data();
    a.residual_stride = D;
    a.h = h.data();
    a.h_stride = D;
    a.y = y.data();
    a.y_stride = D;
    a.x_dtype = t;
    a.res_dtype = DType::f32;
    a.w_dtype = t;
    a.eps = 1e-5;
    detail::cpu_forward(a);
    for (std::int64_t j = 0; j < D; ++j) {
      const std::uint16_t v = static_cast<std::uint16_t>(j);
      const float want = t == DType::f16 ? to_float(half_t{v}) : to_float(bfloat16_t{v});
      const float got = static_cast<const float*>(h.data())[j];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << std::hex << "bits 0x" << v;
      } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want)) << std::hex << "bits 0x" << v;
      }
    }
  }
}

// Rows that break naive statistics. x is given as doubles (rounded to the
// dtype); y, and mean/rstd where the f32 (f64) statistic can represent the
// exact value, must meet the same budget as ordinary data.
//
// ref_scale: a power of two for rows whose squares the fp64 oracle itself
// cannot form (f64 data near 1e200 or 1e-310). The oracle then runs on
// x·ref_scale (exact) with eps·ref_scale², which has the same y, mean/scale
// and rstd·scale.
void check_rows(const Case& c, std::int64_t rows, std::int64_t D, const std::function<double(std::int64_t, std::int64_t)>& f,
                double eps, const std::string& what, double ref_scale = 1.0) {
  SCOPED_TRACE(what + " " + name_of(c) + " D=" + std::to_string(D));
  std::mt19937_64 rng(4);
  Array x(c.x, rows, D), xs(c.x, rows, D);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < D; ++j) {
      x.set(r, j, f(r, j));
      xs.set(r, j, x.get(r, j) * ref_scale);
      ASSERT_EQ(xs.get(r, j), x.get(r, j) * ref_scale) << "the reference scale must be exact";
    }
  const Params p = make_params(c, D, rng);
  const ForwardRun run = run_forward(c, std::nullopt, x, nullptr, p, eps, false);
  const std::vector<double> xv = run.x_before.values();
  reference::Forward ref = reference_forward(c, xs.cmat(), p, eps * ref_scale * ref_scale);
  const Scales s = scales(xs.values(), nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm);
  for (double& m : ref.mean) m /= ref_scale;
  for (double& r : ref.rstd) r *= ref_scale;
  EXPECT_TRUE(within_budget(run.y.values(), ref.y, s.y, c.x, c.x, growth(D), "y"));
  const double stat_max = c.x == DType::f64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (ref.rstd[r] > stat_max) {
      // The exact rstd overflows the statistic's dtype: it is stored as Inf.
      EXPECT_EQ(run.rstd.get(0, r), INFINITY) << "row " << r;
      continue;
    }
    EXPECT_TRUE(within_budget({run.rstd.get(0, r)}, {ref.rstd[r]}, {ref.rstd[r]}, stat_dtype(c.x), c.x, growth(D),
                              "rstd of row " + std::to_string(r)));
  }
  if (c.op == NormKind::layer_norm) {
    EXPECT_TRUE(within_budget(run.mean.values(), ref.mean, mean_abs_rows(xv, rows, D), stat_dtype(c.x), c.x,
                              growth(D), "mean"));
  }
}

std::vector<Case> extreme_cases(DType t) {
  const DType w = t == DType::f64 ? DType::f64 : DType::f32;
  return {{NormKind::layer_norm, t, w, Affine::both}, {NormKind::rms_norm, t, w, Affine::weight}};
}

TEST_P(Kernels, HugeRowsDoNotOverflowTheStatistics) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n01;
  for (std::int64_t D : {7, 4097}) {
    for (const Case& c : extreme_cases(DType::f32)) {
      // x² overflows f32 (1e40) though every x is finite.
      check_rows(c, 3, D, [&](std::int64_t, std::int64_t) { return 1e20 * (1.0 + 0.5 * n01(rng)); }, 1e-5, "1e20");
      // Even Σx overflows: 4097 values near 1e36.
      check_rows(c, 2, D, [&](std::int64_t, std::int64_t) { return 1e36 * (2.0 + n01(rng)); }, 1e-5, "1e36");
      // A constant row whose sum overflows: variance exactly 0, so the scaled
      // rstd exceeds f32 while the true one (1/sqrt(eps)) does not.
      check_rows(c, 1, D, [](std::int64_t, std::int64_t) { return 3e37; }, 1e-5, "constant 3e37");
    }
    for (const Case& c : extreme_cases(DType::f64))
      check_rows(c, 2, D, [&](std::int64_t, std::int64_t) { return 1e200 * (1.0 + n01(rng)); }, 1e-5, "1e200",
                 0x1p-700);
  }
}

TEST_P(Kernels, TinyAndSubnormalRows) {
  std::mt19937_64 rng(6);
  std::normal_distribution<double> n01;
  for (std::int64_t D : {3, 4097}) {
    for (const Case& c : extreme_cases(DType::f32)) {
      // Squares underflow f32 (1e-60); with eps = 0 the variance decides rstd.
      check_rows(c, 2, D, [&](std::int64_t, std::int64_t) { return 1e-30 * (0.5 + n01(rng)); }, 0.0, "1e-30");
      // Subnormal inputs: rstd (~1e41) overflows f32 and is stored as Inf,
      // but y is still right.
      check_rows(c, 2, D, [&](std::int64_t, std::int64_t) { return 1e-41 * (0.5 + n01(rng)); }, 0.0, "subnormal");
    }
    for (const Case& c : extreme_cases(DType::f64))
      check_rows(c, 2, D, [&](std::int64_t, std::int64_t) { return 1e-310 * (0.5 + n01(rng)); }, 0.0, "subnormal",
                 0x1p900);
  }
}

TEST_P(Kernels, CancellationAndOutliers) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n01;
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    const Case ln{NormKind::layer_norm, t, t == DType::f64 ? t : DType::f32, Affine::both};
    for (std::int64_t D : {111, 4096, 65537}) {
      // A large common offset: E[x²] − E[x]² would cancel every digit.
      check_rows(ln, 2, D, [&](std::int64_t, std::int64_t) { return 1e4 + 1e-2 * n01(rng); }, 1e-12, "1e4+noise");
      // One huge element in a long row.
      check_rows(ln, 2, D, [&](std::int64_t, std::int64_t j) { return j == D / 3 ? 1e6 : n01(rng); }, 1e-5, "outlier");
      const Case rms{NormKind::rms_norm, t, ln.w, Affine::weight};
      check_rows(rms, 2, D, [&](std::int64_t, std::int64_t j) { return j == D / 3 ? 1e6 : n01(rng); }, 1e-5, "outlier");
    }
  }
  // f16 data up to its largest finite value never overflows the f32 statistics.
  for (const Case& c : extreme_cases(DType::f16)) {
    check_rows(c, 1, 4, [](std::int64_t, std::int64_t j) { return 1000.0 * static_cast<double>(j + 1); }, 1e-5, "f16 1000s");
    check_rows(c, 2, 4097, [&](std::int64_t, std::int64_t) { return std::clamp(30000.0 * n01(rng), -65504.0, 65504.0); },
               1e-5, "f16 large");
  }
}

// The backward on rows near the top of the range: x − mean would overflow
// (values ~±3e38), or x̂ = 0 on a constant row with rstd = 1/sqrt(eps).
TEST_P(Kernels, BackwardOfExtremeRows) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n01;
  const double bf16_max = 3.3895313892515355e38;
  for (std::int64_t D : {64, 4097}) {
    for (const Case& c : {Case{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both},
                          Case{NormKind::rms_norm, DType::bf16, DType::bf16, Affine::weight}}) {
      check_backward(c, c.x, false, 2, D, false, rng, [&](std::int64_t r, std::int64_t j) {
        return (r + j) % 3 == 0 ? -bf16_max : bf16_max;
      });
    }
    for (const Case& c : extreme_cases(DType::f32)) {
      check_backward(c, c.x, false, 2, D, false, rng, [](std::int64_t, std::int64_t) { return 3e37; });
      check_backward(c, c.x, true, 2, D, true, rng, [&](std::int64_t, std::int64_t) { return 1e20 * (1 + n01(rng)); });
    }
  }
}

TEST_P(Kernels, NonFiniteRowsStayInTheirRow) {
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), HUGE_VAL, -HUGE_VAL}) {
      for (const Case& c : extreme_cases(t)) {
        SCOPED_TRACE(name_of(c) + " bad=" + std::to_string(bad));
        const std::int64_t rows = 3, D = 111;
        std::mt19937_64 rng(8);
        Array x(t, rows, D);
        fill_normal(x, rng);
        x.set(1, 50, bad);
        const Params p = make_params(c, D, rng);
        const ForwardRun run = run_forward(c, std::nullopt, x, nullptr, p, 1e-5, false);
        // The bad row is non-finite where the oracle's is (for RMSNorm with
        // an Inf, rstd = 0 makes the finite elements 0, as in the oracle and
        // PyTorch); its statistics are not finite; other rows are untouched.
        const reference::Forward ref = reference_forward(c, run.x_before.cmat(), p, 1e-5);
        const Scales s = scales(run.x_before.values(), nullptr, rows, D, p.gain_size, p.shift, ref, c.op == NormKind::layer_norm);
        EXPECT_TRUE(within_budget(run.y.values(), ref.y, s.y, t, t, growth(D), "y"));
        EXPECT_FALSE(std::isfinite(run.y.get(1, 50)));
        if (c.op == NormKind::layer_norm) {
          EXPECT_FALSE(std::isfinite(run.mean.get(0, 1)));
          EXPECT_FALSE(std::isfinite(run.rstd.get(0, 1)));
        } else {
          EXPECT_TRUE(!std::isfinite(run.rstd.get(0, 1)) || run.rstd.get(0, 1) == 0.0);
        }
        for (std::int64_t r : {0, 2})
          for (std::int64_t j = 0; j < D; ++j) EXPECT_TRUE(std::isfinite(run.y.get(r, j))) << "row " << r;
      }
    }
  }
}

// A call of one parameter-gradient block whose partial rows are the
// gradients (f32 or f64 gradients of x's compute type, D a multiple of 32)
// has the kernel write dweight and dbias directly, at whatever alignment
// the caller gives. They must be bit for bit what the block reduction makes
// of the same rows: here the rows padded with rows of dy = 0 to a call of
// several blocks.
TEST_P(Kernels, SingleBlockGradientsMatchTheReduction) {
  std::mt19937_64 rng(12);
  for (const Case& c : {Case{NormKind::layer_norm, DType::f32, DType::f32, Affine::both},
                        Case{NormKind::rms_norm, DType::f32, DType::f32, Affine::offset},
                        Case{NormKind::layer_norm, DType::f64, DType::f64, Affine::weight}}) {
    for (std::int64_t D : {std::int64_t{64}, std::int64_t{4096}}) {
      SCOPED_TRACE(name_of(c) + " D=" + std::to_string(D));
      const std::int64_t rows = 3, padded_rows = 40;
      Array x(c.x, padded_rows, D), dy(c.x, padded_rows, D);
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng);
      for (std::int64_t r = rows; r < padded_rows; ++r)
        for (std::int64_t j = 0; j < D; ++j) dy.set(r, j, 0.0);
      const Params p = make_params(c, D, rng);
      const BackwardRun padded = run_backward(c, x, dy, nullptr, p, 1e-5, false);

      // The first rows alone, gradients one element past an aligned address.
      Array x3(c.x, rows, D), dy3(c.x, rows, D), dx3(c.x, rows, D);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < D; ++j) {
          x3.set(r, j, x.get(r, j));
          dy3.set(r, j, dy.get(r, j));
        }
      Array mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
      for (std::int64_t r = 0; r < rows; ++r) {
        mean.set(0, r, padded.mean.get(0, r));
        rstd.set(0, r, padded.rstd.get(0, r));
      }
      Array grads(c.w, 1, 2 * D + 3);  // dweight at element 1, dbias at D + 2
      BackwardArgs a;
      a.kind = c.op;
      a.rows = rows;
      a.D = D;
      a.dy = dy3.data();
      a.dy_stride = D;
      a.xin = x3.data();
      a.xin_stride = D;
      a.mean = c.op == NormKind::layer_norm ? mean.data() : nullptr;
      a.rstd = rstd.data();
      a.weight = p.has_weight ? p.weight.data() : nullptr;
      a.weight_offset = p.offset;
      a.dx = dx3.data();
      a.dx_stride = D;
      const std::size_t es = dtype_size(c.w);
      a.dweight = static_cast<unsigned char*>(grads.data()) + es;
      a.dbias = c.op == NormKind::layer_norm ? static_cast<unsigned char*>(grads.data()) + (D + 2) * es : nullptr;
      a.dy_dtype = c.x;
      a.xin_dtype = c.x;
      a.w_dtype = c.w;
      detail::cpu_backward(a);
      for (std::int64_t j = 0; j < D; ++j) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(grads.get(0, 1 + j)),
                  std::bit_cast<std::uint64_t>(padded.dweight.get(0, j)))
            << "dweight " << j;
        if (c.op == NormKind::layer_norm) {
          ASSERT_EQ(std::bit_cast<std::uint64_t>(grads.get(0, D + 2 + j)),
                    std::bit_cast<std::uint64_t>(padded.dbias.get(0, j)))
              << "dbias " << j;
        }
      }
      EXPECT_EQ(grads.get(0, 0), Array::kSentinel);  // nothing written around them
      EXPECT_EQ(grads.get(0, D + 1), Array::kSentinel);
      if (c.op == NormKind::rms_norm) {
        EXPECT_EQ(grads.get(0, D + 2), Array::kSentinel);
      }
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < D; ++j) ASSERT_EQ(dx3.get(r, j), padded.dx.get(r, j)) << r << ", " << j;
    }
  }
}

// Each row of a plain forward is bit for bit what a call on that row alone
// gives, on every target: short 16-bit rows take the next row's statistics
// before this row's output pass (PlainRowsPipelined), and a one-row call
// neither pipelines nor arranges the parameters (arranged at D = 8192 on
// AVX2 and older targets only). A row with a large mean (the centred pass)
// is among them; in place and not.
TEST_P(Kernels, EachRowAsIfAlone) {
  std::mt19937_64 rng(13);
  const std::vector<Case> cases = {{NormKind::layer_norm, DType::f16, DType::f16, Affine::both},
                                   {NormKind::layer_norm, DType::bf16, DType::f32, Affine::both},
                                   {NormKind::rms_norm, DType::bf16, DType::bf16, Affine::offset},
                                   {NormKind::rms_norm, DType::f16, DType::f32, Affine::weight},
                                   {NormKind::layer_norm, DType::f32, DType::f32, Affine::both}};
  const auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  for (const Case& c : cases) {
    for (std::int64_t D : {std::int64_t{37}, std::int64_t{768}, std::int64_t{2048}, std::int64_t{8192}}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(name_of(c) + " D=" + std::to_string(D) + (in_place ? " in-place" : ""));
        const std::int64_t rows = 9;
        Array x(c.x, rows, D);
        fill_normal(x, rng, 0.5, 2.0);
        for (std::int64_t j = 0; j < D; ++j) x.set(2, j, 1000.0 + x.get(2, j));
        const Params p = make_params(c, D, rng);
        Array xs = x;
        const ForwardRun all = run_forward(c, std::nullopt, xs, nullptr, p, 1e-5, in_place);
        for (std::int64_t r = 0; r < rows; ++r) {
          Array one(c.x, 1, D);
          for (std::int64_t j = 0; j < D; ++j) one.set(0, j, x.get(r, j));
          const ForwardRun alone = run_forward(c, std::nullopt, one, nullptr, p, 1e-5, in_place);
          ASSERT_EQ(bits(all.rstd.get(0, r)), bits(alone.rstd.get(0, 0))) << "rstd of row " << r;
          ASSERT_EQ(bits(all.mean.get(0, r)), bits(alone.mean.get(0, 0))) << "mean of row " << r;
          for (std::int64_t j = 0; j < D; ++j)
            ASSERT_EQ(bits(all.y.get(r, j)), bits(alone.y.get(0, j))) << "row " << r << ", column " << j;
        }
      }
    }
  }
}

// Bit for bit, but a NaN only as a NaN: which NaN operand an FMA passes on
// depends on the operand order the compiler picks, not on the kernel. The
// padding of each row is compared too: nothing is written outside a row.
void expect_same_bits(const Array& a, const Array& b, const char* what) {
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::int64_t j = 0; j < a.stride(); ++j) {
      const double u = a.get(r, j), v = b.get(r, j);
      if (std::isnan(u) && std::isnan(v)) continue;
      ASSERT_EQ(std::bit_cast<std::uint64_t>(u), std::bit_cast<std::uint64_t>(v))
          << what << "(" << r << ", " << j << "): " << u << " against " << v;
    }
  }
}

struct ForwardRowsOut {
  Array y, mean, rstd;
};

// x's rows through the row loops: all rows in one range (`together`), or one
// range per row. Each row of y starts one element past the row's alignment.
ForwardRowsOut forward_rows_of(NormKind kind, const Array& x, const Array& w, const Array& b, bool stream,
                               bool together) {
  const DType dt = x.dtype();
  const std::int64_t rows = x.rows(), D = x.cols();
  ForwardRowsOut o{Array(dt, rows, D, D + 1), Array(DType::f32, 1, rows), Array(DType::f32, 1, rows)};
  ForwardArgs f;
  f.kind = kind;
  f.rows = rows;
  f.D = D;
  f.x = x.data();
  f.x_stride = x.stride();
  f.y = static_cast<unsigned char*>(o.y.data()) + dtype_size(dt);
  f.y_stride = o.y.stride();
  f.weight = w.data();
  f.bias = kind == NormKind::layer_norm ? b.data() : nullptr;
  f.weight_offset = kind == NormKind::rms_norm ? 0.5 : 0.0;
  f.eps = 1e-5;
  f.mean = kind == NormKind::layer_norm ? o.mean.data() : nullptr;
  f.rstd = o.rstd.data();
  f.x_dtype = dt;
  f.w_dtype = w.dtype();
  const detail::ForwardStreams streams{stream, false};
  for (std::int64_t r = 0; r < rows; r += together ? rows : 1) {
    const std::int64_t e = together ? rows : r + 1;
    if (kind == NormKind::layer_norm) detail::forward_rows<NormKind::layer_norm>(f, r, e, streams);
    else detail::forward_rows<NormKind::rms_norm>(f, r, e, streams);
  }
  return o;
}

// Plain rows that a call takes several at a time must come out as the bits
// of each row taken alone (a one-row range takes neither loop): f32 rows
// whose y streams take the next row's statistics in blocks between blocks of
// this row's output pass (PlainRowsInterleaved), and wide 16-bit rows go two
// at a time in column blocks (PlainRowsPaired), streamed or not: LayerNorm
// with its own parameters, and either norm with f32 ones (paired from a
// narrower width).
// Widths: just past the f32 rows left in order, a statistics chunk, several
// chunks (paired with f32 parameters), just past the 16-bit rows left in
// order (blocks with a partial last one), and a row fetched from within (in
// order for every loop). x's rows are strided (the fetches ahead follow the
// stride); y's rows start off StreamPair's alignment, each at another offset
// (each block peels its own head). Seven rows: three pairs and one left
// over. Among them a large mean (the centred pass), a huge and a tiny row
// (the rescue, where the dtype reaches it), and a NaN.
TEST_P(Kernels, RowsTakenTogetherMatchRowsAlone) {
  std::mt19937_64 rng(15);
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    // f16 has neither the range to overflow f32's squares nor values small
    // enough to underflow them.
    const double huge = dt == DType::f16 ? 1e4 : 1e20, tiny = dt == DType::f16 ? 1e-6 : 1e-41;
    const std::vector<DType> weights = dt == DType::f32 ? std::vector{dt} : std::vector{dt, DType::f32};
    for (NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      for (std::int64_t D : {std::int64_t{1025}, std::int64_t{2048}, std::int64_t{6250}, std::int64_t{9000},
                             std::int64_t{70001}}) {
        Array x(dt, 7, D, D + 3);
        fill_normal(x, rng, 0.0, 1.0);
        for (std::int64_t j = 0; j < D; ++j) {
          x.set(1, j, 1e4 + x.get(1, j));
          x.set(3, j, huge * x.get(3, j));
          x.set(4, j, tiny * x.get(4, j));
        }
        x.set(5, 17, std::numeric_limits<double>::quiet_NaN());
        for (DType wt : weights) {
          Array w(wt, 1, D), b(wt, 1, D);
          fill_normal(w, rng, 1.0, 0.1);
          fill_normal(b, rng, 0.0, 0.1);
          for (bool stream : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::string(norm_title(kind)) + " D=" + std::to_string(D) +
                         " weight " + std::string(dtype_name(wt)) + (stream ? " streamed" : ""));
            const ForwardRowsOut together = forward_rows_of(kind, x, w, b, stream, true);
            const ForwardRowsOut alone = forward_rows_of(kind, x, w, b, stream, false);
            expect_same_bits(together.y, alone.y, "y");
            expect_same_bits(together.rstd, alone.rstd, "rstd");
            expect_same_bits(together.mean, alone.mean, "mean");
            if (HasFatalFailure()) return;
            // The NaN row is NaN throughout (read one element on: y starts
            // there), and the rows around it are not.
            for (std::int64_t j = 0; j < D; ++j) ASSERT_TRUE(std::isnan(together.y.get(5, j + 1))) << j;
            ASSERT_TRUE(std::isfinite(together.y.get(3, 2)) && std::isfinite(together.y.get(4, 2)));
          }
        }
      }
    }
  }
}

// A bf16 row's rounding leaves out the NaN case only where no y can be NaN
// (forward-inl.hpp, WriteRow). An f32 NaN whose payload fills the mantissa
// carries into the sign under the rounding without that case and would come
// out as -0: in a weight, a bias or an f32 residual it must still give NaN,
// in its column (parameters) or its row (residual) and nowhere else, with
// parameters arranged (D <= 4096; D = 8192 on AVX2 and older targets) and
// read as stored (D = 8192 on AVX-512 targets; D = 70000 on every target).
TEST_P(Kernels, Bf16RowsRoundAFullPayloadNaNToNaN) {
  const double full_nan = std::bit_cast<double>(std::uint64_t{0x7fffffffe0000000});
  ASSERT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(full_nan)), 0x7fffffffu);
  std::mt19937_64 rng(14);
  for (std::int64_t D : {std::int64_t{37}, std::int64_t{768}, std::int64_t{8192}, std::int64_t{70000}}) {
    for (bool layer : {true, false}) {
      SCOPED_TRACE(std::string(layer ? "layer" : "rms") + " D=" + std::to_string(D));
      const std::int64_t rows = 8, col = D / 2, bad_row = 3;
      Array x(DType::bf16, rows, D), residual(DType::f32, rows, D), w(DType::f32, 1, D), b(DType::f32, 1, D);
      fill_normal(x, rng);
      fill_normal(residual, rng);
      fill_normal(w, rng, 1.0, 0.5);
      fill_normal(b, rng);
      const auto forward = [&](Array& y) {
        if (layer)
          layer_norm(x.cmat(), w.cvec(), b.cvec(), 1e-5, y.mat());
        else
          rms_norm(x.cmat(), w.cvec(), 1e-5, y.mat(), {}, 1.0);
      };
      Array clean(DType::bf16, rows, D);
      forward(clean);
      std::vector<Array*> params = {&w};
      if (layer) params.push_back(&b);
      for (Array* param : params) {
        const double kept = param->get(0, col);
        param->set(0, col, full_nan);
        Array y(DType::bf16, rows, D);
        forward(y);
        param->set(0, col, kept);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < D; ++j) {
            if (j == col)
              ASSERT_TRUE(std::isnan(y.get(r, j))) << (param == &w ? "weight" : "bias") << ", row " << r;
            else
              ASSERT_EQ(y.get(r, j), clean.get(r, j)) << "row " << r << ", column " << j;
          }
      }
      residual.set(bad_row, col, full_nan);
      Array h(DType::f32, rows, D), y(DType::bf16, rows, D);
      if (layer)
        add_layer_norm(x.cmat(), residual.cmat(), w.cvec(), b.cvec(), 1e-5, h.mat(), y.mat());
      else
        add_rms_norm(x.cmat(), residual.cmat(), w.cvec(), 1e-5, h.mat(), y.mat(), {}, 1.0);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(h.get(bad_row, col))), 0x7fffffffu);
      for (std::int64_t j = 0; j < D; ++j) {
        ASSERT_TRUE(std::isnan(y.get(bad_row, j))) << "column " << j;  // the row's statistics are NaN
        for (std::int64_t r : {bad_row - 1, bad_row + 1}) ASSERT_TRUE(std::isfinite(y.get(r, j))) << "row " << r;
      }
    }
  }
}

// Every output, including dweight/dbias, is bitwise identical for 1, 2 and
// 7 threads, on every target.
TEST_P(Kernels, BitwiseAcrossThreadCounts) {
  struct Shape {
    std::int64_t rows, D;
  };
  std::mt19937_64 rng(9);
  const std::vector<std::pair<Case, std::optional<DType>>> cases = {
      {{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both}, DType::f32},
      {{NormKind::layer_norm, DType::f32, DType::f32, Affine::both}, std::nullopt},
      {{NormKind::rms_norm, DType::f16, DType::f16, Affine::offset}, DType::f16},
      {{NormKind::layer_norm, DType::f64, DType::f64, Affine::weight}, DType::f64}};
  for (const auto& [c, res] : cases) {
    for (Shape sh : {Shape{333, 4097}, Shape{1000, 64}, Shape{3, 65537}}) {
      SCOPED_TRACE(name_of(c) + " rows=" + std::to_string(sh.rows) + " D=" + std::to_string(sh.D));
      Array x(c.x, sh.rows, sh.D), dy(c.x, sh.rows, sh.D), residual;
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng);
      if (res) {
        residual = Array(*res, sh.rows, sh.D);
        fill_normal(residual, rng);
      }
      Array dh_out = res ? residual : Array();
      const Params p = make_params(c, sh.D, rng);
      std::vector<unsigned char> first;
      for (int threads : {1, 2, 7}) {
        set_num_threads(threads);
        Array xc = x, rc = residual;
        const ForwardRun f = run_forward(c, res, xc, res ? &rc : nullptr, p, 1e-5, false);
        const Array& xin = res ? f.h : x;
        const BackwardRun b = run_backward(c, xin, dy, res ? &dh_out : nullptr, p, 1e-5, false);
        std::vector<unsigned char> all;
        for (const Array* o : {&f.h, &f.y, &f.mean, &f.rstd, &b.dx, &b.dweight, &b.dbias})
          all.insert(all.end(), o->bytes().begin(), o->bytes().end());
        if (threads == 1) {
          first = all;
        } else {
          EXPECT_TRUE(all == first) << threads << " threads";
        }
      }
      set_num_threads(0);
    }
  }
}

// The backward gives the same bits with its pass A two rows at a time (on
// targets that take pairs; the hook takes them beyond where they pay) as
// one row at a time: each row's sums are its own, and each partial adds
// the second row's term after the first's. Blocks of an odd number of rows
// (33 rows: blocks of 9), short rows fetched two rows ahead, wide rows
// fetched from within, a tail, 16-bit and f32 weights, an offset, dh_out,
// dx in place.
TEST_P(Kernels, BackwardRowPairsMatchOneRowAtATime) {
  struct Run {
    Case c;
    DType xin;
    bool dh_out, in_place;
    std::int64_t rows, D;
  };
  std::mt19937_64 rng(13);
  for (const Run& r : {Run{{NormKind::layer_norm, DType::bf16, DType::bf16, Affine::both}, DType::bf16, false, false, 33, 4099},
                       Run{{NormKind::layer_norm, DType::bf16, DType::bf16, Affine::both}, DType::bf16, false, true, 70, 100},
                       Run{{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both}, DType::f32, true, false, 35, 2048},
                       Run{{NormKind::rms_norm, DType::f16, DType::f16, Affine::offset}, DType::f16, false, true, 33, 777},
                       Run{{NormKind::rms_norm, DType::bf16, DType::bf16, Affine::weight}, DType::bf16, true, true, 5, 16384},
                       Run{{NormKind::layer_norm, DType::f32, DType::f32, Affine::weight}, DType::f32, true, true, 9, 3000},
                       Run{{NormKind::rms_norm, DType::f32, DType::f32, Affine::weight}, DType::f32, false, false, 3, 70001},
                       Run{{NormKind::layer_norm, DType::f64, DType::f64, Affine::both}, DType::f64, false, false, 17, 1030}}) {
    SCOPED_TRACE(name_of(r.c) + " xin=" + std::string(dtype_name(r.xin)) + (r.dh_out ? " dh_out" : "") +
                 (r.in_place ? " in-place" : "") + " rows=" + std::to_string(r.rows) + " D=" + std::to_string(r.D));
    Array x(r.xin, r.rows, r.D, r.D + 3), dy(r.c.x, r.rows, r.D, r.D + 1), dh_out;
    fill_normal(x, rng, 0.5, 2.0);
    fill_normal(dy, rng);
    if (r.dh_out) {
      dh_out = Array(r.xin, r.rows, r.D, r.D + 4);
      fill_normal(dh_out, rng, 0.0, 0.5);
    }
    const Params p = make_params(r.c, r.D, rng);
    std::vector<unsigned char> outs[2];
    for (bool pairs : {false, true}) {
      ScopedRowPairs rule(pairs ? detail::RowPairs::always : detail::RowPairs::never);
      const BackwardRun b = run_backward(r.c, x, dy, r.dh_out ? &dh_out : nullptr, p, 1e-5, r.in_place);
      for (const Array* o : {&b.dx, &b.dweight, &b.dbias})
        outs[pairs].insert(outs[pairs].end(), o->bytes().begin(), o->bytes().end());
    }
    EXPECT_TRUE(outs[0] == outs[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTargets, Kernels, ::testing::ValuesIn(detail::cpu_targets()), target_test_name);

// On the AVX-512 target, the AVX-512 BF16 rounding (convert-inl.hpp, PackBf16Pair) gives every bf16
// output bit for bit as the integer rounding: forward, fused h, dx, dweight
// and dbias, with exact zeros and subnormals among the outputs (the
// instruction flushes subnormals; those pairs must fall back).
TEST(KernelBf16, InstructionsRoundAsTheIntegerCode) {
  if (!detail::cpu_has_bf16_instructions()) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  ASSERT_STREQ(detail::active_cpu_target(), "AVX3");
  std::mt19937_64 rng(11);
  const std::vector<std::pair<Case, DType>> cases = {
      {{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both}, DType::f32},
      {{NormKind::layer_norm, DType::bf16, DType::bf16, Affine::both}, DType::bf16},
      {{NormKind::rms_norm, DType::bf16, DType::bf16, Affine::offset}, DType::bf16}};
  const float subnormal = std::bit_cast<float>(0x00012345u);
  for (const auto& [c, res] : cases) {
    for (std::int64_t D : {std::int64_t{4097}, std::int64_t{768}, std::int64_t{37}}) {
      SCOPED_TRACE(name_of(c) + " res=" + std::string(dtype_name(res)) + " D=" + std::to_string(D));
      const std::int64_t rows = 70;
      Array x(c.x, rows, D), dy(c.x, rows, D), residual(res, rows, D);
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng);
      fill_normal(residual, rng);
      for (std::int64_t r = 0; r < rows; r += 3) {
        const std::int64_t j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(D));
        residual.set(r, j, -x.get(r, j));  // h = 0 exactly
        x.set(r, (j + 1) % D, 0.0);
        residual.set(r, (j + 1) % D, subnormal);  // h subnormal
        dy.set(r, (j + 2) % D, 0.0);
      }
      Params p = make_params(c, D, rng);
      if (p.has_bias) {  // y = x̂·0 + bias: a subnormal and a zero output per row
        p.weight.set(0, 1, 0.0);
        p.bias.set(0, 1, subnormal);
        p.weight.set(0, 2, 0.0);
        p.bias.set(0, 2, 0.0);
      }
      std::vector<unsigned char> with_insn;
      for (bool insn : {true, false}) {
        const ScopedBf16Instructions scope(insn);
        Array xc = x, rc = residual, dh_out = residual;
        const ForwardRun f = run_forward(c, res, xc, &rc, p, 1e-5, false);
        const BackwardRun b = run_backward(c, f.h, dy, &dh_out, p, 1e-5, false);
        const BackwardRun plain = run_backward(c, x, dy, nullptr, p, 1e-5, false);
        std::vector<unsigned char> all;
        for (const Array* o : {&f.h, &f.y, &f.mean, &f.rstd, &b.dx, &b.dweight, &b.dbias, &plain.dx,
                                &plain.dweight, &plain.dbias})
          all.insert(all.end(), o->bytes().begin(), o->bytes().end());
        if (insn) {
          with_insn = all;
        } else {
          EXPECT_TRUE(all == with_insn);
        }
      }
    }
  }
}

TEST(KernelTargets, BestTargetOfThisCpuIsCompiledIn) {
  const std::vector<std::int64_t> targets = detail::cpu_targets();
  ASSERT_FALSE(targets.empty());
  std::vector<std::string> names;
  for (std::int64_t t : targets) names.emplace_back(detail::cpu_target_name(t));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    EXPECT_EQ(names.front(), "AVX3");
  }
#if !defined(NORMKIT_TESTS_REDUCED_TARGETS)  // the sanitizer build compiles AVX-512 only
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(names.front(), "AVX2");
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "SSE4"), names.end());
#endif
#endif
  // Without forcing, dispatch picks the best, and the public query says so.
  EXPECT_STREQ(detail::active_cpu_target(), names.front().c_str());
  EXPECT_STREQ(cpu_simd_target(), names.front().c_str());
}

// Small calls run on the calling thread: an OpenMP fork/join costs more
// than moving a 4096-wide row.
TEST(KernelThreads, SmallCallsStayOnOneThread) {
  set_num_threads(8);
  ForwardArgs f;
  f.rows = 1;
  f.D = 4096;
  f.x_dtype = DType::f32;
  EXPECT_EQ(detail::forward_threads(f), 1);  // one decode-step row
  f.x_dtype = DType::bf16;
  f.rows = 4;
  EXPECT_EQ(detail::forward_threads(f), 1);  // 4 rows × 16 KiB of bf16 traffic < 64 KiB
  f.rows = 4096;
  EXPECT_EQ(detail::forward_threads(f), 8);
  f.rows = 3;  // never more threads than rows
  f.D = 1 << 20;
  EXPECT_EQ(detail::forward_threads(f), 3);

  BackwardArgs b;
  b.rows = 1;
  b.D = 4096;
  EXPECT_EQ(detail::backward_threads(b), 1);
  b.rows = 4096;
  EXPECT_EQ(detail::backward_threads(b), 8);
  // With parameter gradients, threads work on fixed row blocks of at least
  // kMinRowsPerBlock rows: twice that many are 2 blocks.
  float dw = 0;
  b.dweight = &dw;
  b.rows = 2 * detail::kMinRowsPerBlock;
  EXPECT_EQ(detail::backward_threads(b), 2);
  set_num_threads(0);
}

}  // namespace
}  // namespace normkit::test
