// A tensor with more than 2^31 elements: every index the kernels form must
// be 64-bit. bf16 x of (2^19 + 1) rows × 4096 = 2^31 + 4096 elements, 4 GiB
// per buffer: x and y (reused as dy and, in place, dx) take 8 GiB in all.
// The whole tensor is processed; a sample of rows — the first, the middle,
// and the last, which lies entirely past element 2^31 — is checked against
// the oracle, and the parameter gradients (a sum over every row) exactly
// where the oracle can be run: dy is zero outside the sampled rows, so those
// rows' contributions are the whole sum.
#include <gtest/gtest.h>

#include <memory>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

constexpr std::int64_t kD = 4096;
constexpr std::int64_t kRows = (std::int64_t{1} << 31) / kD + 1;

// A cheap deterministic value in [-2, 2) for element (r, j), varied per row
// so that a row read from the wrong place is caught.
float value(std::int64_t r, std::int64_t j, std::uint64_t salt) {
  const std::uint64_t h = (static_cast<std::uint64_t>(r) * 2654435761u + static_cast<std::uint64_t>(j) * 40503u + salt) % 4093u;
  return static_cast<float>(h) / 1024.0f - 2.0f + static_cast<float>(r % 7) * 0.25f;
}

using Big = std::unique_ptr<bfloat16_t[]>;

Big make_big(std::uint64_t salt, const std::vector<std::int64_t>* only_rows = nullptr) {
  Big b(new bfloat16_t[static_cast<std::size_t>(kRows * kD)]);
  if (only_rows == nullptr) {
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t j = 0; j < kD; ++j) b[r * kD + j] = to_bf16(value(r, j, salt));
  } else {
    std::memset(b.get(), 0, static_cast<std::size_t>(kRows * kD) * sizeof(bfloat16_t));
    for (std::int64_t r : *only_rows)
      for (std::int64_t j = 0; j < kD; ++j) b[r * kD + j] = to_bf16(value(r, j, salt));
  }
  return b;
}

// One row of a big buffer as a (1, D) view.
ConstMatrix row(const Big& b, std::int64_t r) { return matrix(b.get() + r * kD, 1, kD); }

std::vector<double> row_values(const Big& b, std::int64_t r) { return reference::to_double(row(b, r)); }

TEST(Large, MoreThanTwoToThe31Elements) {
  static_assert(kRows * kD > (std::int64_t{1} << 31));
  const std::vector<std::int64_t> sample = {0, 1, kRows / 2, kRows - 3, kRows - 2, kRows - 1};
  const Case c{NormKind::layer_norm, DType::bf16, DType::f32, Affine::both};
  std::mt19937_64 rng(3);
  const Params p = make_params(c, kD, rng);
  const Big x = make_big(1);
  Big y(new bfloat16_t[static_cast<std::size_t>(kRows * kD)]);
  std::vector<float> mean(kRows), rstd(kRows);

  layer_norm(matrix(x.get(), kRows, kD), p.w(), p.b(), 1e-5, matrix(y.get(), kRows, kD), vector(mean.data(), kRows),
             vector(rstd.data(), kRows));
  for (std::int64_t r : sample) {
    SCOPED_TRACE("forward row " + std::to_string(r));
    const reference::Forward ref = reference_forward(c, row(x, r), p, 1e-5);
    const Scales s = scales(row_values(x, r), nullptr, 1, kD, p.gain_size, p.shift, ref, true, c.x);
    EXPECT_TRUE(within_budget(row_values(y, r), ref.y, s.y, c.x, c.x, growth(kD), "y"));
    EXPECT_NEAR(rstd[r], ref.rstd[0], growth(kD) * accum_roundoff(c.x) * ref.rstd[0]);
  }
  y.reset();

  // Backward, in place (dx = dy), dy non-zero only in the sampled rows.
  Big dy = make_big(2, &sample);
  Array dweight(c.w, 1, kD), dbias(c.w, 1, kD);
  std::vector<std::vector<double>> dy_sample;
  for (std::int64_t r : sample) dy_sample.push_back(row_values(dy, r));
  const auto dyv = matrix(dy.get(), kRows, kD);
  layer_norm_backward(dyv, matrix(x.get(), kRows, kD), vector(mean.data(), kRows), vector(rstd.data(), kRows), p.w(),
                      matrix(dy.get(), kRows, kD), dweight.vec(), dbias.vec());
  std::vector<double> dw_ref(kD, 0.0), db_ref(kD, 0.0), dw_scale(kD, 0.0), db_scale(kD, 0.0);
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const std::int64_t r = sample[k];
    SCOPED_TRACE("backward row " + std::to_string(r));
    Array dyr(DType::bf16, 1, kD);
    for (std::int64_t j = 0; j < kD; ++j) dyr.set(0, j, dy_sample[k][static_cast<std::size_t>(j)]);
    const std::vector<double> xr = row_values(x, r);
    const reference::Forward f = reference_forward(c, row(x, r), p, 1e-5);
    const reference::Backward b = reference_backward(c, dyr.cmat(), row(x, r), p, 1e-5);
    const Scales s = scales(xr, &dy_sample[k], 1, kD, p.gain_size, p.shift, f, true, c.x);
    EXPECT_TRUE(within_budget(row_values(dy, r), b.dx, s.dx, c.x, c.x, growth(kD), "dx"));
    for (std::int64_t j = 0; j < kD; ++j) {
      dw_ref[j] += b.dweight[j];
      db_ref[j] += b.dbias[j];
      dw_scale[j] += s.dweight[j];
      db_scale[j] += s.dbias[j];
    }
  }
  // Rows with dy = 0 get dx = 0 exactly; spot-check a few far apart.
  for (std::int64_t r : {std::int64_t{2}, kRows / 3, kRows - 4})
    for (std::int64_t j : {std::int64_t{0}, kD / 2, kD - 1})
      EXPECT_EQ(to_float(dy[r * kD + j]), 0.0f) << "dx[" << r << "][" << j << "]";
  const double g = growth(kD) + growth(kRows);
  EXPECT_TRUE(within_budget(dweight.values(), dw_ref, dw_scale, c.w, c.x, g, "dweight"));
  EXPECT_TRUE(within_budget(dbias.values(), db_ref, db_scale, c.w, c.x, growth(kRows), "dbias"));
}

}  // namespace
}  // namespace normkit::test
