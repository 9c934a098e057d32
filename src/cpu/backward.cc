// LayerNorm / RMSNorm backward on the CPU, plain and fused. One Highway
// source compiled for every target, chosen at run time.
//
// Per row, with x̂ = (x − mean)·rstd (mean = 0 for RMSNorm) and
// g = (offset + weight)·dy:
//   pass A (reads dy, x, weight): Σg and Σg·x̂ in chunks, and, when
//          parameter gradients are wanted, the block partials
//          dweight_b += dy·x̂ and (when dbias is wanted) dbias_b += dy;
//   pass B (re-reads them from cache):
//          dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) + dh_out
//          (mean(g) is 0 for RMSNorm).
// dweight/dbias are summed over a fixed partition of rows into blocks (see
// cpu/scratch.hpp), each block by one thread in row order, then the block
// partials in block order: bitwise identical for any thread count.
// Shapes: dy, xin, dh_out, dx: (rows, D); mean, rstd: (rows); weight,
// dweight, dbias: (D).
//
// The levels of one call, outermost first (defined below innermost first),
// and what each decides:
//   cpu_backward                      threads, row blocks, the reduction
//   BackwardRows                      dy's dtype (and so the compute type)
//   BackwardRowsOf16BitDy             xin's and the weight's dtypes of 16-bit dy
//   BackwardRowsWithPartials          whether the rows accumulate dweight/dbias partials (null: none)
//   BackwardRowsWithParams            weight arranged once for the range, or read as stored
//   BackwardRowLoop                   the rows: PassA (one row or two), then PassB of each

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/backward.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "cpu/arrange-inl.hpp"
#include "cpu/prefetch-inl.hpp"
#include "cpu/rows-inl.hpp"

#ifndef NORMKIT_CPU_BACKWARD_ONCE_
#define NORMKIT_CPU_BACKWARD_ONCE_
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "cpu/pages.hpp"
#include "cpu/parallel.hpp"
#include "cpu/scratch.hpp"
#include "normkit/half.hpp"
#endif

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {
namespace {

// Elements per reduction chunk: partial sums of a chunk stay short (at most
// kChunk / (2·lanes) terms per accumulator) and chunk totals are added in
// double, so the row sums keep ~√D error growth for very wide rows.
constexpr std::size_t kChunk = 2048;

struct RowSums {
  double g = 0, gx = 0;  // Σg, Σg·x̂
};

// The parameter-gradient partials the rows accumulate: none, dweight alone
// (RMSNorm, or LayerNorm without dbias: no dbias row read and written per
// row for nothing), or both.
enum class Partials { none, dweight, dweight_dbias };

// x̂ = (x − mean)·rstd, computed as (x·s − mean·s)·(rstd/s) with s a power
// of two: 2^ilogb(rstd), so x·s and mean·s are of the size of x̂, lowered if
// needed to keep mean·s far from overflow. Scaling by a power of two is
// exact, so for ordinary rows this rounds exactly like (x − mean)·rstd; but
// x − mean cannot overflow for rows near the top of the range (bf16/f32
// values ~1e38 of both signs), where the plain form gives Inf.
template <class DC>
struct XhatMap {
  hn::Vec<DC> s, ms, rs;

  XhatMap(DC dc, double mean, double rstd) {
    using C = hn::TFromD<DC>;
    int e = 0;
    if (std::isfinite(rstd) && rstd > 0) e = std::ilogb(rstd);
    constexpr double kRoom = static_cast<double>(std::numeric_limits<C>::max()) / 4;
    if (std::abs(mean) > 0 && std::isfinite(mean)) e = std::min(e, std::ilogb(kRoom / std::abs(mean)));
    const double scale = std::ldexp(1.0, e);
    s = hn::Set(dc, static_cast<C>(scale));
    ms = hn::Set(dc, static_cast<C>(mean * scale));
    rs = hn::Set(dc, static_cast<C>(rstd / scale));
  }
  HWY_INLINE hn::Vec<DC> operator()(hn::Vec<DC> x) const { return hn::Mul(hn::MulSub(x, s, ms), rs); }
};

// One row of the call in compute type C: its arrays, its statistics
// widened once (mean 0 for RMSNorm), its x̂ map, and the sums pass A adds
// and pass B reads.
template <class DC, class TD, class TI>
struct BackwardRow {
  using C = hn::TFromD<DC>;
  const TD* dy;
  const TI* x;
  const TI* dh_out;  // null: none
  TI* dx;
  bool centred;  // LayerNorm: pass B subtracts mean(g)
  double mean, rstd;
  XhatMap<DC> xhat_of;
  RowSums sums;

  BackwardRow(DC dc, const BackwardArgs& a, std::int64_t row)
      : dy(RowPtr<TD>(a.dy, a.dy_stride, row)),
        x(RowPtr<TI>(a.xin, a.xin_stride, row)),
        dh_out(a.dh_out ? RowPtr<TI>(a.dh_out, a.dh_out_stride, row) : nullptr),
        dx(RowPtr<TI>(a.dx, a.dx_stride, row)),
        centred(a.mean != nullptr),
        mean(centred ? static_cast<double>(static_cast<const C*>(a.mean)[row]) : 0.0),
        rstd(static_cast<double>(static_cast<const C*>(a.rstd)[row])),
        xhat_of(dc, mean, rstd) {}
};

// Pass A over elements [i, end) of row r0, or of two rows (kTwo: r1 too,
// else null), a pair of vectors at a time (see Pair in pairs-inl.hpp; kEO:
// the even/odd layout of bf16 rows): four independent FMA/add chains per
// row, enough to cover the 4-cycle FMA latency.
// kP: also accumulate dy·x̂ into pdw and (dweight_dbias) dy into pdb, in the pair
// layout (so a bf16 row's partials are in even/odd order within each pair;
// reduce_blocks puts them back) and padded to a whole number of pairs. The
// first row of a block (`first`) starts them: it adds to zero instead of to
// what pdw and pdb hold, so they need no clearing (+0 as the start keeps
// the sign of zero sums as before). Two rows load and store the partials
// once for both, r1's terms added after r0's: the bits of two rows taken
// one after the other, for half the partials' traffic.
template <bool kTwo, Partials kP, bool kEO, bool kAddOffset, class DC, class TD, class TI, class TW>
HWY_INLINE void PassAChunk(DC dc, BackwardRow<DC, TD, TI>& r0, std::type_identity_t<BackwardRow<DC, TD, TI>>* r1,
                           const TW* HWY_RESTRICT w, std::size_t i, std::size_t end, hn::Vec<DC> Off,
                           hn::TFromD<DC>* HWY_RESTRICT pdw, hn::TFromD<DC>* HWY_RESTRICT pdb, bool first,
                           NextRows& next) {
  using V = hn::Vec<DC>;
  using Row = BackwardRow<DC, TD, TI>;
  const std::size_t N = hn::Lanes(dc);
  V g0 = hn::Zero(dc), g1 = hn::Zero(dc), gx0 = hn::Zero(dc), gx1 = hn::Zero(dc);  // r0's chains
  V h0 = hn::Zero(dc), h1 = hn::Zero(dc), hx0 = hn::Zero(dc), hx1 = hn::Zero(dc);  // r1's (kTwo)
  // One row's part in one vector: its dy and x̂, and the chains they add to.
  struct Terms {
    V dy, xh;
    V& g;
    V& gx;
  };
  // One vector at element j, of each row given (r0's first): their chains,
  // then their terms of the partials.
  auto vector_at = [&](std::size_t j, V wv, const auto&... rows) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    const auto wo = kAddOffset ? hn::Add(wv, Off) : wv;
    auto chains = [&](const Terms& t) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      const auto g = hn::Mul(wo, t.dy);
      t.g = hn::Add(t.g, g);
      t.gx = hn::MulAdd(g, t.xh, t.gx);
    };
    (chains(rows), ...);
    // Unaligned: pdw and pdb may be the caller's dweight and dbias.
    if constexpr (kP != Partials::none) {
      auto dw = first ? hn::Zero(dc) : hn::LoadU(dc, pdw + j);
      ((dw = hn::MulAdd(rows.dy, rows.xh, dw)), ...);
      hn::StoreU(dw, dc, pdw + j);
    }
    if constexpr (kP == Partials::dweight_dbias) {
      auto db = first ? hn::Zero(dc) : hn::LoadU(dc, pdb + j);
      ((db = hn::Add(rows.dy, db)), ...);
      hn::StoreU(db, dc, pdb + j);
    }
  };
  // The pair at j: load(p) loads the pair of array p at j, xhat_of(r) row
  // r's x̂ there.
  auto pair_at = [&](std::size_t j, const auto& load, const auto& xhat_of) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    const Pair<DC> wv = load(w), d0 = load(r0.dy), x0 = xhat_of(r0);
    if constexpr (kTwo) {
      const Pair<DC> d1 = load(r1->dy), x1 = xhat_of(*r1);
      vector_at(j, wv.a, Terms{d0.a, x0.a, g0, gx0}, Terms{d1.a, x1.a, h0, hx0});
      vector_at(j + N, wv.b, Terms{d0.b, x0.b, g1, gx1}, Terms{d1.b, x1.b, h1, hx1});
    } else {
      vector_at(j, wv.a, Terms{d0.a, x0.a, g0, gx0});
      vector_at(j + N, wv.b, Terms{d0.b, x0.b, g1, gx1});
    }
  };
  auto step = [&](std::size_t j) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    auto load = [&](const auto* p) HWY_ATTR NORMKIT_ALWAYS_INLINE { return LoadPair<kEO>(dc, p + j); };
    pair_at(j, load, [&](const Row& r) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      const auto v = load(r.x);
      return Pair<DC>{r.xhat_of(v.a), r.xhat_of(v.b)};
    });
  };
  // Two rows cover twice the bytes per element: the next row is fetched whole.
  constexpr std::size_t kRows = kTwo ? 2 : 1;
  i = FetchingLoop<kRows * sizeof(TD), kRows * sizeof(TI), 1>(dc, i, end, next, step);
  if (i < end) {
    // Padding lanes have dy = 0 but x̂ = −mean·rstd, so mask x̂: a padding
    // lane must contribute exactly 0 even when rstd is Inf.
    const std::size_t k = end - i;
    hn::Mask<DC> ma, mb;
    PairTailMasks<kEO>(dc, k, ma, mb);
    auto load = [&](const auto* p) HWY_ATTR NORMKIT_ALWAYS_INLINE { return LoadPairTail<kEO>(dc, p + i, k); };
    pair_at(i, load, [&](const Row& r) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      const auto v = load(r.x);
      return Pair<DC>{hn::IfThenElseZero(ma, r.xhat_of(v.a)), hn::IfThenElseZero(mb, r.xhat_of(v.b))};
    });
  }
  r0.sums.g += SumToDouble(dc, hn::Add(g0, g1));
  r0.sums.gx += SumToDouble(dc, hn::Add(gx0, gx1));
  if constexpr (kTwo) {
    r1->sums.g += SumToDouble(dc, hn::Add(h0, h1));
    r1->sums.gx += SumToDouble(dc, hn::Add(hx0, hx1));
  }
}

// Pass A over the D elements of row r0, and of r1 too (kTwo; else null),
// chunk by chunk; `first`: r0 is the block's first row.
template <bool kTwo, Partials kP, bool kEO, bool kAddOffset, class DC, class TD, class TI, class TW>
HWY_INLINE void PassA(DC dc, BackwardRow<DC, TD, TI>& r0, std::type_identity_t<BackwardRow<DC, TD, TI>>* r1,
                      const TW* HWY_RESTRICT w, std::size_t D, hn::Vec<DC> Off, hn::TFromD<DC>* pdw,
                      hn::TFromD<DC>* pdb, bool first, NextRows& next) {
  for (std::size_t at = 0; at < D; at += kChunk)
    PassAChunk<kTwo, kP, kEO, kAddOffset>(dc, r0, r1, w, at, std::min(at + kChunk, D), Off, pdw, pdb, first, next);
}

// A row's terms for pass B, from its statistics and pass A's means
// MG = mean(g) (0 for RMSNorm) and MGX = mean(g·x̂). With x̂ = (x − mean)·R,
//   dx = (g − MG − x̂·MGX)·R = R·g + K1·x + K0,
//   K1 = −R²·MGX,  K0 = R·(R·MGX·mean − MG).
// The affine form takes three operations per vector where the x̂ form takes
// five (docs/kernels.md, "Pass B in affine form"). Its cancellation between
// K1·x and K0 on rows of large mean is within the bound's rstd·mean|x| term
// (docs/numerics.md). A row whose K1 or K0, formed in double, is not zero
// or a normal number of the compute type (extreme or non-finite statistics,
// non-finite sums), or whose products underflowed on the way (zero or
// subnormal from factors that are not: f64 rows with subnormal gains, where
// K1 = 0 lost the term that cancels R·g) keeps the x̂ form, and with it the
// scaled x̂ of XhatMap.
template <class DC>
struct PassBTerms {
  using C = hn::TFromD<DC>;
  bool affine = false;
  hn::Vec<DC> R, MG, MGX, K1, K0;

  // MG and MGX are rounded to C, as the x̂ form uses them, and K1 and K0 are
  // formed from the rounded values.
  PassBTerms(DC dc, double mean, double rstd, double mean_g, double mean_gx) {
    const C mg_c = static_cast<C>(mean_g), mgx_c = static_cast<C>(mean_gx);
    R = hn::Set(dc, static_cast<C>(rstd));
    MG = hn::Set(dc, mg_c);
    MGX = hn::Set(dc, mgx_c);
    K1 = K0 = hn::Zero(dc);
    const double mg = mg_c, mgx = mgx_c;
    const double d = rstd * mgx * mean - mg;
    const double k1 = -rstd * rstd * mgx, k0 = rstd * d;
    // Zero only where a factor is, else a normal number of C (false for NaN).
    const auto normal = [](double v, bool zero_factor) {
      return v == 0 ? zero_factor
                    : std::abs(v) >= static_cast<double>(std::numeric_limits<C>::min()) &&
                          std::abs(v) <= static_cast<double>(std::numeric_limits<C>::max());
    };
    // a·b of nonzero factors below double's normal range. Tested by division,
    // not on the products, so that rstd·mgx·mean keeps its one use (which the
    // compiler may fuse with − mg) and K1, K0 their bits.
    const auto underflows = [](double a, double b) {
      return a != 0 && b != 0 && std::abs(a) < std::numeric_limits<double>::min() / std::abs(b);
    };
    affine = normal(k1, rstd == 0 || mgx == 0) && normal(k0, rstd == 0 || d == 0) && !underflows(rstd, rstd) &&
             !underflows(rstd, mgx) && !underflows(rstd * mgx, mean);
    if (affine) {
      K1 = hn::Set(dc, static_cast<C>(k1));
      K0 = hn::Set(dc, static_cast<C>(k0));
    }
  }
};

// Pass B: dx = (g − MG − x̂·MGX)·R + dh_out, in the affine form where the
// row allows it (kAffine; PassBTerms). dx may be dy or dh_out itself
// (in-place): every pair is loaded before the same one is stored. `stream`:
// non-temporal stores; `next`: the next row's dy and x, fetched meanwhile.
template <bool kAffine, bool kDhOut, bool kEO, bool kAddOffset, class DC, class TD, class TI, class TW>
HWY_INLINE void PassBRow(DC dc, const BackwardRow<DC, TD, TI>& r, const TW* HWY_RESTRICT w, std::size_t D,
                         const PassBTerms<DC>& t, hn::Vec<DC> Off, bool stream, NextRows& next) {
  // The arrays as locals, which no store can alias: read through r, they
  // might be reloaded after each vector store (which may alias any object).
  const TD* dy = r.dy;
  const TI *x = r.x, *dh_out = r.dh_out;
  TI* dx = r.dx;
  const XhatMap<DC>& xhat_of = r.xhat_of;
  const std::size_t P = 2 * hn::Lanes(dc);
  const auto R = t.R, MG = t.MG, MGX = t.MGX, K1 = t.K1, K0 = t.K0;
  auto half = [&](auto dyv, auto xv, auto wv) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    const auto g = hn::Mul(kAddOffset ? hn::Add(wv, Off) : wv, dyv);
    if constexpr (kAffine) return hn::MulAdd(R, g, hn::MulAdd(K1, xv, K0));
    else return hn::Mul(hn::NegMulAdd(xhat_of(xv), MGX, hn::Sub(g, MG)), R);
  };
  auto pair = [&](Pair<DC> dyv, Pair<DC> xv, Pair<DC> wv) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    return Pair<DC>{half(dyv.a, xv.a, wv.a), half(dyv.b, xv.b, wv.b)};
  };
  auto plus = [](Pair<DC> u, Pair<DC> v) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    return Pair<DC>{hn::Add(u.a, v.a), hn::Add(u.b, v.b)};
  };
  auto whole = [&](std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE {  // the P elements at i
    const auto v = pair(LoadPair<kEO>(dc, dy + i), LoadPair<kEO>(dc, x + i), LoadPair<kEO>(dc, w + i));
    if constexpr (kDhOut) return plus(v, LoadPair<kEO>(dc, dh_out + i));
    else return v;
  };
  auto partial = [&](std::size_t i, std::size_t k) HWY_ATTR NORMKIT_ALWAYS_INLINE {  // the k < P elements at i
    auto v = pair(LoadPairTail<kEO>(dc, dy + i, k), LoadPairTail<kEO>(dc, x + i, k),
                  LoadPairTail<kEO>(dc, w + i, k));
    if constexpr (kDhOut) v = plus(v, LoadPairTail<kEO>(dc, dh_out + i, k));
    StorePairTail<kEO>(dc, v, dx + i, k);
  };
  std::size_t i = 0;
  // Non-temporal stores need aligned addresses: peel up to the first. Pairs
  // of even/odd Arranged weights start at 0, so such a row is not peeled
  // and, unless aligned, not streamed.
  const std::size_t head = StreamHead(dx, P, D);
  if (stream && !(kIsArranged<TW> && kEO && head != 0)) {
    if (head) partial(0, head);
    i = FetchingLoop<sizeof(TD), sizeof(TI), 1>(dc, head, D, next, [&](std::size_t at) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      StreamPair<kEO>(dc, whole(at), dx + at);
    });
  } else {
    i = FetchingLoop<sizeof(TD), sizeof(TI), 1>(dc, 0, D, next, [&](std::size_t at) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      StorePair<kEO>(dc, whole(at), dx + at);
    });
  }
  if (i < D) partial(i, D - i);
}

// Pass B over row r's D elements, in the form its terms allow: mean(g) and
// mean(g·x̂) from pass A's sums.
template <bool kEO, bool kAddOffset, class DC, class TD, class TI, class TW>
HWY_INLINE void PassB(DC dc, const BackwardRow<DC, TD, TI>& r, const TW* HWY_RESTRICT w, std::size_t D,
                      hn::Vec<DC> Off, bool stream, NextRows& next) {
  const double Dd = static_cast<double>(D);
  const PassBTerms<DC> t(dc, r.mean, r.rstd, r.centred ? r.sums.g / Dd : 0.0, r.sums.gx / Dd);
  if (t.affine && r.dh_out)
    PassBRow<true, true, kEO, kAddOffset>(dc, r, w, D, t, Off, stream, next);
  else if (t.affine)
    PassBRow<true, false, kEO, kAddOffset>(dc, r, w, D, t, Off, stream, next);
  else if (r.dh_out)
    PassBRow<false, true, kEO, kAddOffset>(dc, r, w, D, t, Off, stream, next);
  else
    PassBRow<false, false, kEO, kAddOffset>(dc, r, w, D, t, Off, stream, next);
}

// Pass A takes two rows at a time where the partials are wanted, on targets
// with 32 vector registers: both rows' chains and x̂ constants fit them (in
// AVX2's 16, GCC kept them on the stack; docs/kernels.md, "Two rows' pass
// A"). Only while both rows, the weight and the partials fit half of the
// smallest L2 of such cores (1 MiB), and the next row is fetched ahead, not
// from within (NextRows). g_backward_row_pairs overrides the bound for
// tests. Other targets compile no two-row code: live in the row loop, it
// slowed their one-row path on short rows (docs/kernels.md).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr bool kTargetPairsRows = true;
#else
constexpr bool kTargetPairsRows = false;
#endif
constexpr std::size_t kPairSetMaxBytes = std::size_t{512} << 10;

template <Partials kP, class C, class TD, class TI>
bool PairsRows(std::size_t D) {
  if (!kTargetPairsRows || kP == Partials::none || g_backward_row_pairs == RowPairs::never) return false;
  if (g_backward_row_pairs == RowPairs::always) return true;
  const std::size_t partial_rows = kP == Partials::dweight_dbias ? 2 : 1;
  const std::size_t set = D * (2 * (sizeof(TD) + sizeof(TI)) + sizeof(C) * (1 + partial_rows));
  return set <= kPairSetMaxBytes && D * std::max(sizeof(TD), sizeof(TI)) <= g_next_row_max_bytes;
}

// Rows [begin, end) with storage types TD (dy), TI (xin, dh_out, dx), TW
// (weight as read: the stored dtype, or Arranged, already holding
// weight + offset) and compute type C. pdw/pdb: this row block's partial
// sums (started by its first row), or null when that gradient (kP) is not
// wanted. kAddOffset false: w already holds weight + offset (Arranged, or an
// offset of 0; the forward's WriteRow follows the same rule).
template <Partials kP, bool kAddOffset, class C, class TD, class TI, class TW>
void BackwardRowLoop(const BackwardArgs& a, std::int64_t begin, std::int64_t end, C* pdw, C* pdb, bool stream,
                     const TW* w, double offset) {
  using DC = hn::ScalableTag<C>;
  const DC dc;
  const std::size_t D = static_cast<std::size_t>(a.D);
  const auto Off = hn::Set(dc, static_cast<C>(offset));
  constexpr bool kEO = kEvenOdd<TI>;  // dx is bf16 (and then so is dy)
  const bool pairs = PairsRows<kP, C, TD, TI>(D);
  NextRows next;
  // Aims `next` at the rows after `row`.
  auto aim_after = [&](std::int64_t row) {
    if (row >= end) {
      next = NextRows{};
      return;
    }
    next.aim<sizeof(TD), sizeof(TI)>(RowPtr<TD>(a.dy, a.dy_stride, row), a.dy_stride,
                                     RowPtr<TI>(a.xin, a.xin_stride, row), a.xin_stride, end - row - 1, D);
  };
  using Row = BackwardRow<DC, TD, TI>;
  for (std::int64_t row = begin; row < end;) {
    // A group of one row, or of two where pass A pairs them.
    const std::int64_t n = pairs && row + 1 < end ? 2 : 1;
    Row r0(dc, a, row);
    std::optional<Row> r1;
    aim_after(row + n - 1);
    if (n == 2) {
      r1.emplace(dc, a, row + 1);
      // Pass A of both rows fetched the row after them whole; their pass
      // Bs share the one after that.
      PassA<true, kP, kEO, kAddOffset>(dc, r0, &*r1, w, D, Off, pdw, pdb, row == begin, next);
      aim_after(row + 2);
    } else {
      PassA<false, kP, kEO, kAddOffset>(dc, r0, nullptr, w, D, Off, pdw, pdb, row == begin, next);
    }
    // One pass-B site for the group: each site inlines PassB's four forms,
    // so a second one would double the loop's compile time for nothing.
    const Row* group[2] = {&r0, r1 ? &*r1 : nullptr};
    for (std::int64_t k = 0; k < n; ++k) PassB<kEO, kAddOffset>(dc, *group[k], w, D, Off, stream, next);
    row += n;
  }
  if (stream) hwy::FlushStream();  // order the non-temporal stores before the join
}

// The weight arranged once per range where that saves a conversion per row
// (arrange-inl.hpp), else read as stored.
template <Partials kP, class C, class TD, class TI, class TW>
void BackwardRowsWithParams(const BackwardArgs& a, std::int64_t begin, std::int64_t end, C* pdw, C* pdb, bool stream) {
  const TW* w = static_cast<const TW*>(a.weight);
  if constexpr (kArrange<C, TI, TW>) {
    const ArrangedRows<C> g =
        ArrangeForRows<kEvenOdd<TI>, ArrangedFor::backward>(hn::ScalableTag<C>(), end - begin,
                                                            static_cast<std::size_t>(a.D), w,
                                                            static_cast<const TW*>(nullptr),
                                                            static_cast<C>(a.weight_offset));
    if (g.w) return BackwardRowLoop<kP, false, C, TD, TI>(a, begin, end, pdw, pdb, stream, g.w, 0.0);
  }
  if (static_cast<C>(a.weight_offset) != C{0})
    return BackwardRowLoop<kP, true, C, TD, TI>(a, begin, end, pdw, pdb, stream, w, a.weight_offset);
  BackwardRowLoop<kP, false, C, TD, TI>(a, begin, end, pdw, pdb, stream, w, 0.0);
}

template <class C, class TD, class TI, class TW>
void BackwardRowsWithPartials(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb,
                              bool stream) {
  if (!pdw) return BackwardRowsWithParams<Partials::none, C, TD, TI, TW>(a, begin, end, nullptr, nullptr, stream);
  if (!pdb)
    return BackwardRowsWithParams<Partials::dweight, C, TD, TI, TW>(a, begin, end, static_cast<C*>(pdw), nullptr,
                                                                     stream);
  BackwardRowsWithParams<Partials::dweight_dbias, C, TD, TI, TW>(a, begin, end, static_cast<C*>(pdw),
                                                                 static_cast<C*>(pdb), stream);
}

// The valid (xin, weight) dtypes for 16-bit dy: dy's own or f32.
template <class TD>
void BackwardRowsOf16BitDy(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb,
                           bool stream) {
  const bool i32 = a.xin_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (i32 && w32) return BackwardRowsWithPartials<float, TD, float, float>(a, begin, end, pdw, pdb, stream);
  if (i32) return BackwardRowsWithPartials<float, TD, float, TD>(a, begin, end, pdw, pdb, stream);
  if (w32) return BackwardRowsWithPartials<float, TD, TD, float>(a, begin, end, pdw, pdb, stream);
  return BackwardRowsWithPartials<float, TD, TD, TD>(a, begin, end, pdw, pdb, stream);
}

}  // namespace

// pdw, pdb: the partial-sum rows of the block [begin, end); pdw null: no
// partials; pdb null: no dbias partials.
// stream: write dx with non-temporal stores (see backward_streams).
void BackwardRows(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb, bool stream) {
  switch (a.dy_dtype) {
    case DType::f32: return BackwardRowsWithPartials<float, float, float, float>(a, begin, end, pdw, pdb, stream);
    case DType::f64: return BackwardRowsWithPartials<double, double, double, double>(a, begin, end, pdw, pdb, stream);
    case DType::f16: return BackwardRowsOf16BitDy<hwy::float16_t>(a, begin, end, pdw, pdb, stream);
    case DType::bf16: return BackwardRowsOf16BitDy<hwy::bfloat16_t>(a, begin, end, pdw, pdb, stream);
  }
}

namespace {
// One pair of vectors at element i of a row of partials: the sum over the
// blocks in block order in f64, rounded to f32 (the value itself for one
// block).
template <class DF>
HWY_INLINE Pair<DF> SumBlocks(DF df, const float* HWY_RESTRICT p, std::size_t blocks, std::size_t stride,
                              std::size_t i) {
  const std::size_t N = hn::Lanes(df);
  if (blocks == 1) return {hn::Load(df, p + i), hn::Load(df, p + i + N)};
#if HWY_TARGET == HWY_SCALAR
  double a = p[i], b = p[i + 1];
  for (std::size_t k = 1; k < blocks; ++k) {
    a += p[k * stride + i];
    b += p[k * stride + i + 1];
  }
  return {hn::Set(df, static_cast<float>(a)), hn::Set(df, static_cast<float>(b))};
#else
  const hn::Half<DF> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  auto sum = [&](std::size_t at) HWY_ATTR {
    const auto v = hn::Load(df, p + at);
    auto lo = hn::PromoteTo(dd, hn::LowerHalf(dh, v)), hi = hn::PromoteTo(dd, hn::UpperHalf(dh, v));
    for (std::size_t k = 1; k < blocks; ++k) {
      const auto w = hn::Load(df, p + k * stride + at);
      lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, w)));
      hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, w)));
    }
    return hn::Combine(df, hn::DemoteTo(dh, hi), hn::DemoteTo(dh, lo));
  };
  return {sum(i), sum(i + N)};
#endif
}

template <bool kEO, class T>
void ReduceBlocksT(const float* HWY_RESTRICT p, std::size_t blocks, std::size_t stride, std::size_t D,
                   T* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const std::size_t P = 2 * hn::Lanes(df);
  std::size_t i = 0;
  for (; i + P <= D; i += P) StorePair<kEO>(df, SumBlocks(df, p, blocks, stride, i), out + i);
  if (i < D) StorePairTail<kEO>(df, SumBlocks(df, p, blocks, stride, i), out + i, D - i);
}
}  // namespace

// reduce_blocks for f32 partial sums (see there) in vectors, over the
// columns [0, D) of the rows at p: each element summed over the blocks in
// block order in f64, rounded to f32, then stored as the gradient's dtype t.
// even_odd: the partials are in a bf16 row's layout (see
// VectorReducible). The rows are padded to whole pairs.
void ReduceBlocks32(const float* p, std::int64_t blocks, std::int64_t stride, std::int64_t D, bool even_odd,
                    DType t, void* out) {
  const std::size_t nb = static_cast<std::size_t>(blocks), st = static_cast<std::size_t>(stride);
  const std::size_t n = static_cast<std::size_t>(D);
  switch (t) {
    case DType::bf16:
      if (even_odd) ReduceBlocksT<true>(p, nb, st, n, static_cast<hwy::bfloat16_t*>(out));
      else ReduceBlocksT<false>(p, nb, st, n, static_cast<hwy::bfloat16_t*>(out));
      return;
    case DType::f16:
      return ReduceBlocksT<false>(p, nb, st, n, static_cast<hwy::float16_t*>(out));
    case DType::f32:
      if (even_odd) ReduceBlocksT<true>(p, nb, st, n, static_cast<float*>(out));
      else ReduceBlocksT<false>(p, nb, st, n, static_cast<float*>(out));
      return;
    case DType::f64:
      break;
  }
  assert(false && "ReduceBlocks32: see VectorReducible");
}

// Elements per vector of the compute type for dy's dtype on this target.
std::size_t ComputeLanes(DType dy_dtype) {
  return dy_dtype == DType::f64 ? hn::Lanes(hn::ScalableTag<double>()) : hn::Lanes(hn::ScalableTag<float>());
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::detail {

HWY_EXPORT(BackwardRows);
HWY_EXPORT(ComputeLanes);
HWY_EXPORT(ReduceBlocks32);

namespace {

std::int64_t backward_bytes_per_row(const BackwardArgs& a) {
  const std::int64_t act = static_cast<std::int64_t>(dtype_size(a.dy_dtype));
  const std::int64_t in = static_cast<std::int64_t>(dtype_size(a.xin_dtype));
  return (act + in * (a.dh_out ? 3 : 2)) * a.D;  // dy, xin, [dh_out], dx
}

bool wants_params(const BackwardArgs& a) { return a.dweight || a.dbias; }

DType acc_dtype(const BackwardArgs& a) { return a.dy_dtype == DType::f64 ? DType::f64 : DType::f32; }
std::size_t acc_bytes(const BackwardArgs& a) { return dtype_size(acc_dtype(a)); }

// Accumulator row length: D rounded up to whole pairs of vectors of the
// widest target, so pass A can load and store partials without tail handling.
std::int64_t padded_width(const BackwardArgs& a) {
  const std::int64_t lanes = 2 * 64 / static_cast<std::int64_t>(acc_bytes(a));
  return (a.D + lanes - 1) / lanes * lanes;
}

// Lanes of a vector if pass A kept the partial sums in the even/odd layout
// (bf16 rows, see PassAChunk), else 0.
std::int64_t even_odd_lanes(const BackwardArgs& a) {
  return a.xin_dtype == DType::bf16 ? static_cast<std::int64_t>(HWY_DYNAMIC_DISPATCH(ComputeLanes)(a.dy_dtype)) : 0;
}

// Calls f(j, value of element j) for j < D over one row of partials: in
// order, or, with eo_lanes = L > 0, each pair of L-lane vectors holding its
// 2L elements even-indexed first.
template <class C, class F>
void for_each_partial(const C* p, std::int64_t D, std::int64_t eo_lanes, F&& f) {
  if (eo_lanes == 0) {
    for (std::int64_t j = 0; j < D; ++j) f(j, p[j]);
    return;
  }
  for (std::int64_t base = 0; base < D; base += 2 * eo_lanes) {
    const C* even = p + base;
    const C* odd = even + eo_lanes;
    const std::int64_t n = std::min(eo_lanes, (D - base + 1) / 2);  // even elements in this pair
    for (std::int64_t k = 0; k < n; ++k) {
      f(base + 2 * k, even[k]);
      if (base + 2 * k + 1 < D) f(base + 2 * k + 1, odd[k]);
    }
  }
}

// Writes sum[j] (j < D) in the gradient's dtype t.
void store_gradient(const double* sum, std::int64_t D, DType t, void* out) {
  switch (t) {
    case DType::f32:
      for (std::int64_t j = 0; j < D; ++j) static_cast<float*>(out)[j] = static_cast<float>(sum[j]);
      return;
    case DType::f64:
      std::memcpy(out, sum, static_cast<std::size_t>(D) * sizeof(double));
      return;
    case DType::f16:
      for (std::int64_t j = 0; j < D; ++j) static_cast<half_t*>(out)[j] = to_f16(static_cast<float>(sum[j]));
      return;
    case DType::bf16:
      for (std::int64_t j = 0; j < D; ++j)
        static_cast<bfloat16_t*>(out)[j] = to_bf16(static_cast<float>(sum[j]));
      return;
  }
}

// Whether ReduceBlocks32 can store f32 partials as a gradient of dtype t.
// Partials in a bf16 row's even/odd layout as bf16 or f32, the parameter
// dtypes a bf16 row can have (StorePair interleaves them).
bool VectorReducible(bool even_odd, DType t) {
  return t == DType::bf16 || t == DType::f32 || (!even_odd && t == DType::f16);
}

// Columns per parallel item of the reduction: a multiple of every target's
// pair of f32 vectors.
constexpr std::int64_t kReduceColumns = 2048;

// Sums the block partials in block order and writes the gradient in dtype t.
// One block of in-order accumulators that already have the gradient's type
// (f32 partials for an f32 gradient: a single term rounds to itself) is
// copied; f32 partials are otherwise summed in vectors (ReduceBlocks32), in
// parallel over columns.
// eo_lanes: see for_each_partial.
template <class C>
void reduce_blocks(const C* partials, std::int64_t blocks, std::int64_t stride, std::int64_t D,
                   std::int64_t eo_lanes, DType t, void* out) {
  if (blocks == 1 && eo_lanes == 0 && t == (std::is_same_v<C, double> ? DType::f64 : DType::f32)) {
    std::memcpy(out, partials, static_cast<std::size_t>(D) * sizeof(C));
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (VectorReducible(eo_lanes != 0, t)) {
      // Chunks of columns in parallel: each column is summed over the blocks
      // in the same order whoever sums it. A chunk starts at a whole pair.
      const std::int64_t chunks = (D + kReduceColumns - 1) / kReduceColumns;
      const std::int64_t bytes = blocks * kReduceColumns * static_cast<std::int64_t>(sizeof(float));
      parallel_items(chunks, bytes, [&](std::int64_t c) {
        const std::int64_t j = c * kReduceColumns;
        HWY_DYNAMIC_DISPATCH(ReduceBlocks32)(partials + j, blocks, stride, std::min(kReduceColumns, D - j),
                                             eo_lanes != 0, t,
                                             static_cast<std::byte*>(out) + j * static_cast<std::int64_t>(dtype_size(t)));
      });
      return;
    }
  }
  double* sum =
      static_cast<double*>(scratch_buffer(static_cast<std::size_t>(D) * sizeof(double), Scratch::gradient_sums));
  for_each_partial(partials, D, eo_lanes, [&](std::int64_t j, C v) { sum[j] = static_cast<double>(v); });
  for (std::int64_t b = 1; b < blocks; ++b)
    for_each_partial(partials + b * stride, D, eo_lanes,
                     [&](std::int64_t j, C v) { sum[j] += static_cast<double>(v); });
  store_gradient(sum, D, t, out);
}

}  // namespace

bool backward_streams(const BackwardArgs& a) {
  return a.dx != a.dy && a.dx != a.dh_out && streams_output(a.dx, a.rows, a.D, a.dx_stride, dtype_size(a.xin_dtype));
}

int backward_threads(const BackwardArgs& a) {
  if (!wants_params(a)) return threads_for(a.rows, backward_bytes_per_row(a));
  const ParamBlocks pb = param_blocks(a.rows, padded_width(a), acc_bytes(a));
  return threads_for(pb.count, backward_bytes_per_row(a) * pb.rows_per_block);
}

void cpu_backward(const BackwardArgs& args) {
  assert(args.rows >= 1 && args.D >= 1 && args.dy && args.xin && args.rstd && args.dx);
  assert(args.kind == NormKind::rms_norm || args.mean);
  BackwardArgs a = args;
  if (a.kind == NormKind::rms_norm) a.mean = nullptr;
  if (!a.weight && !a.dweight && !a.dbias) a.w_dtype = a.dy_dtype;  // any valid dtype: none is read
  if (!a.weight) a.weight = constant_row(a.w_dtype, a.D, 1);
  const std::int64_t row_bytes = backward_bytes_per_row(a);
  const bool stream = backward_streams(a);

  if (!wants_params(a)) {
    parallel_rows(a.rows, row_bytes, [&](std::int64_t begin, std::int64_t end) {
      HWY_DYNAMIC_DISPATCH(BackwardRows)(a, begin, end, nullptr, nullptr, stream);
    });
    return;
  }

  // Partial sums: per block, a dweight row then a dbias row of `stride`
  // accumulators each (f32, or f64 for f64 data). Bounded by
  // kParamScratchBytes (or one block's 2·D accumulators if larger); reused
  // across calls on this thread.
  const std::int64_t stride = padded_width(a);
  assert(static_cast<std::size_t>(stride) % (2 * HWY_DYNAMIC_DISPATCH(ComputeLanes)(a.dy_dtype)) == 0);
  const ParamBlocks pb = param_blocks(a.rows, stride, acc_bytes(a));
  const std::int64_t eo = even_odd_lanes(a);
  const std::size_t bytes = static_cast<std::size_t>(pb.count * 2 * stride) * acc_bytes(a);
  std::byte* partials = static_cast<std::byte*>(scratch_buffer(bytes, Scratch::param_partials));
  const std::size_t block_bytes = static_cast<std::size_t>(2 * stride) * acc_bytes(a);

  // A single block whose partial rows already are the gradients (their
  // dtype, in order, no padding: D a multiple of the widest pair): the
  // kernel writes dweight and dbias in place of the partials. This is the
  // small call, a decode step above all, where reducing would copy both.
  if (pb.count == 1 && eo == 0 && stride == a.D && a.w_dtype == acc_dtype(a)) {
    void* pdw = a.dweight ? a.dweight : partials;
    HWY_DYNAMIC_DISPATCH(BackwardRows)(a, 0, a.rows, pdw, a.dbias, stream);
    return;
  }

  parallel_items(pb.count, row_bytes * pb.rows_per_block, [&](std::int64_t block) {
    const std::int64_t begin = block * pb.rows_per_block;
    const std::int64_t end = std::min(a.rows, begin + pb.rows_per_block);
    std::byte* pdw = partials + static_cast<std::size_t>(block) * block_bytes;
    std::byte* pdb = a.dbias ? pdw + block_bytes / 2 : nullptr;
    HWY_DYNAMIC_DISPATCH(BackwardRows)(a, begin, end, pdw, pdb, stream);
  });

  // dweight rows sit at even multiples of `stride`, dbias rows at odd ones.
  const std::int64_t block_stride = 2 * stride;
  if (a.dy_dtype == DType::f64) {
    const double* p = reinterpret_cast<const double*>(partials);
    if (a.dweight) reduce_blocks(p, pb.count, block_stride, a.D, eo, a.w_dtype, a.dweight);
    if (a.dbias) reduce_blocks(p + stride, pb.count, block_stride, a.D, eo, a.w_dtype, a.dbias);
  } else {
    const float* p = reinterpret_cast<const float*>(partials);
    if (a.dweight) reduce_blocks(p, pb.count, block_stride, a.D, eo, a.w_dtype, a.dweight);
    if (a.dbias) reduce_blocks(p + stride, pb.count, block_stride, a.D, eo, a.w_dtype, a.dbias);
  }
}

}  // namespace normkit::detail
#endif  // HWY_ONCE
