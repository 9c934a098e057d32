// What the checks share: running a norm under test next to the fp64 oracle,
// the per-element error bound of ops.hpp's contract, Jacobians built from the
// backward, and a small SVD.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bounds.hpp"
#include "lab/rng.hpp"
#include "lab/check.hpp"
#include "lab/norms.hpp"
#include "normkit/ops.hpp"
#include "reference.hpp"
#include "support/array.hpp"
#include "support/norm_kind.hpp"

namespace normkit::lab {

using support::Array;

std::string kind_tag(NormKind k);   // "ln" / "rms", for value names

// Roundoff units, subnormal floors and the growth factor of the contract's
// bound: one definition, shared with the test suite (bounds.hpp).
using reference::accum_roundoff;
using reference::growth;
using reference::smallest_subnormal;
using reference::unit_roundoff;
// The dtype of the mean/rstd statistics: the library's rule (normkit/ops.hpp).
using normkit::stat_dtype;

// One forward of the norms under test, with the oracle on the same (already
// rounded) inputs and the error bound of normkit/ops.hpp for each element:
//   |y − y_exact| ≤ u_out·|y_exact| + 4·(√D + 2)·u_acc·(|g|·(|x̂| + rstd·μ_|x|) + |bias|)
//                   + smallest subnormal of the output dtype.
struct ForwardRun {
  Array y, mean, rstd;         // written by the norms under test (mean: LayerNorm only)
  reference::Forward ref;      // fp64 oracle
  std::vector<double> xhat;    // the oracle's normalized value before the gain
  std::vector<double> bound;   // per element of y
  // max over elements of |y − ref| / bound: ≤ 1 when the contract holds.
  double worst_ratio() const;
};
ForwardRun forward(const Norms& norms, NormKind kind, const Array& x, const Array* weight,
                   const Array* bias, double eps);
// The bound alone, for y = norm(x) in dtype `out` (used when a comparison
// needs the budget of a result computed some other way).
std::vector<double> forward_bound(NormKind kind, DType out, const Array& x, const std::vector<double>& w,
                                  const std::vector<double>& b, const reference::Forward& ref);

// One backward of the norms under test at x (its own forward supplies the
// statistics), with the oracle and a bound of the same form as the forward's:
//   dx:      u_out·|dx| + 4·(√D + 2)·u_acc·rstd·(|g_j| + mean|g| + a_j·mean(|g|·a)) + sub
//   dweight: u_w·|dw| + 4·(√D + rows + 2)·u_acc·Σ_rows |dy|·a + sub
//   dbias:   u_w·|db| + (rows + 2)·u_acc·Σ_rows |dy| + sub
// where g = gain·dy and a = |x̂| + rstd·μ_|x| bounds x̂ together with the
// error of its statistics (the forward's own accumulation term), and the
// dweight sum over rows adds at most one rounding per row.
struct BackwardRun {
  Array dx, dweight, dbias;
  reference::Backward ref;
  std::vector<double> dx_bound, dw_bound, db_bound;
};
BackwardRun backward(const Norms& norms, NormKind kind, const Array& dy, const Array& x,
                     const Array* weight, const Array* bias, double eps);

// Dense row-major n×n matrices and vectors of doubles.
using Vec = std::vector<double>;
struct Mat {
  std::int64_t n = 0;
  std::vector<double> a;  // row-major
  double& operator()(std::int64_t i, std::int64_t j) { return a[i * n + j]; }
  double operator()(std::int64_t i, std::int64_t j) const { return a[i * n + j]; }
};
Vec mat_vec(const Mat& m, const Vec& v);
double norm2(const Vec& v);
double dot(const Vec& a, const Vec& b);

// The Jacobian J = ∂y/∂x of the unit-gain norm at one token x (1, D) of any
// dtype, built from the backward of the norms under test: row i of J is
// Jᵀe_i = backward(dy = e_i), all D rows in one call. `bound` receives the
// per-element bound of each entry (BackwardRun::dx_bound).
Mat jacobian_from_backward(const Norms& norms, NormKind kind, const Array& x, double eps,
                           Mat* bound = nullptr);

// Singular values of a square matrix, largest first, by one-sided Jacobi
// rotations (accurate to a few units of 2⁻⁵³ relative to the largest; no
// LAPACK needed for the small matrices the lab uses).
Vec singular_values(const Mat& m);

}  // namespace normkit::lab

namespace normkit::lab {

// Records measured[j] as `name`_j and one row comparing the vector with
// `expected` element by element: ok iff |measured_j − expected_j| ≤ tol_j.
bool near_vec(Recorder& rec, const std::string& name, const std::string& what, const Vec& measured,
              const Vec& expected, const Vec& tol);

// The largest |a_j − b_j| relative to its budget_j (≤ 1: the two agree as
// well as their error bounds promise). Records `name` = max |a − b|.
bool agree(Recorder& rec, const std::string& name, const std::string& what, const Vec& a,
           const Vec& b, const Vec& budget);
// The opposite finding: some element differs by more than its budget, so the
// difference cannot be rounding. Records `name` = max |a − b|.
bool differ(Recorder& rec, const std::string& name, const std::string& what, const Vec& a,
            const Vec& b, const Vec& budget);

Vec add(const Vec& a, const Vec& b);
Vec sub(const Vec& a, const Vec& b);
Vec absdiff(const Vec& a, const Vec& b);
std::string dname(DType t);

}  // namespace normkit::lab
