// The forward kernels, LayerNorm and RMSNorm, plain and fused with the
// residual add, as templates over the norm kind and the storage types.
// forward_rows.inc compiles them once per Highway target for one norm kind;
// forward_layer_norm.cc and forward_rms_norm.cc are its two instances.
//
// Per row (see docs/kernels.md):
//   1. statistics in one pass over the row: Σx and Σx², f32 sums over chunks
//      of kChunk elements added in double. LayerNorm takes the variance
//      Σx² − D·mean² when |mean| ≤ std/4, where its error is inside the
//      documented bound; other rows are re-read from cache for the corrected
//      two-pass sums around the one-pass mean. (RMSNorm needs only Σx².) The
//      fused op writes h = x + residual during the first pass and takes the
//      statistics of the stored h.
//   2. a rescale fallback when the statistics overflow (|x| ~ 1e20 in f32) or
//      underflow (subnormal rows): zero cost on ordinary rows.
//   3. the output pass, re-reading the row from cache.
//
// The levels of one call, outermost first (defined below innermost first),
// and what each decides:
//   ForwardRows            x's dtype (and so the compute type)
//   ForwardRowsOf16BitX    the residual's and the parameters' dtypes of 16-bit x
//   ForwardRowsWithParams  parameters arranged once for the range, or read as stored
//   ForwardRowLoop         the rows, plain or fused; short 16-bit plain rows
//                          pipelined (PlainRowsPipelined), wide f32 rows
//                          streamed to memory interleaved (PlainRowsInterleaved),
//                          wide 16-bit plain rows two at a time (PlainRowsPaired)
//   StatsOfRow / FusedStatsOfRow, PrepareRow, WriteRow (OutputRow)   one row
// Shapes: x, residual, h, y: (rows, D); weight, bias: (D); mean, rstd: (rows).
//
// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_FORWARD_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_FORWARD_INL_HPP_
#undef NORMKIT_CPU_FORWARD_INL_HPP_
#else
#define NORMKIT_CPU_FORWARD_INL_HPP_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "cpu/arrange-inl.hpp"
#include "cpu/forward_rows.hpp"
#include "cpu/prefetch-inl.hpp"
#include "cpu/rows-inl.hpp"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "cpu/pages.hpp"
#include "cpu/parallel.hpp"
#include "cpu/scratch.hpp"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {
namespace {

// Elements per statistics chunk: 8 KiB of f32. A vector lane sums at most
// kChunk / (4·Lanes) values before the chunk's total joins the row's in
// double, so a row's statistics carry the error of 2048-element f32 sums
// however wide it is (docs/numerics.md).
constexpr std::size_t kChunk = 2048;

// Pass-1 sums of a chunk or a row: Σx (LayerNorm only) and Σx².
struct ChunkSums {
  double s = 0, q = 0;
  void add(ChunkSums c) {
    s += c.s;
    q += c.q;
  }
};

// The accumulators of a pass-1 loop: Σx² and, for kWithSum, Σx, in four
// independent chains each (one per vector of two pairs).
template <bool kWithSum, class DC>
struct SumAcc {
  hn::Vec<DC> s0, s1, s2, s3, q0, q1, q2, q3;
  explicit SumAcc(DC dc) : s0(hn::Zero(dc)), s1(s0), s2(s0), s3(s0), q0(s0), q1(s0), q2(s0), q3(s0) {}
  static HWY_INLINE void add(hn::Vec<DC>& s, hn::Vec<DC>& q, hn::Vec<DC> v) {
    if constexpr (kWithSum) s = hn::Add(s, v);
    q = hn::MulAdd(v, v, q);
  }
  HWY_INLINE void first(Pair<DC> u) {
    add(s0, q0, u.a);
    add(s1, q1, u.b);
  }
  HWY_INLINE void second(Pair<DC> u) {
    add(s2, q2, u.a);
    add(s3, q3, u.b);
  }
  HWY_INLINE ChunkSums total(DC dc) const {
    ChunkSums c;
    if constexpr (kWithSum) c.s = SumToDouble(dc, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
    c.q = SumToDouble(dc, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3)));
    return c;
  }
};

// The pass-1 loop over a chunk of n elements, stepping over pairs of vectors
// (see Pair in pairs-inl.hpp): units of two pairs (see FetchingLoop), then
// at most one whole pair and a zero-padded tail. whole(i) gives the pair at
// i, part(i, k) the k < P elements at i zero-padded (padding adds 0 to both
// sums). `next` is fetched as the pass goes (see NextRows); S0 and S1 are
// the element sizes of the arrays it fetches. The plain and the fused pass 1
// both run this loop, so the fused op's sums of h associate exactly as the
// plain op's sums of the same h.
//
// SumUnits and SumTail are its two halves: the whole units of [i, n), and
// what is left of the chunk after them. A chunk taken in parts (units in
// order, then the tail once) sums as this loop does (PlainRowsInterleaved).
template <std::size_t S0, std::size_t S1, class DC, class Acc, class Whole>
HWY_INLINE std::size_t SumUnits(DC dc, Acc& acc, std::size_t i, std::size_t n, NextRows& next_rows,
                                const Whole& whole) {
  const std::size_t P = 2 * hn::Lanes(dc);
  // A local copy of the cursors, which the compiler keeps in registers:
  // through the reference each step loaded and stored them (docs/kernels.md,
  // "The statistics pass's prefetch cursors in registers").
  NextRows next = next_rows;
  const std::size_t end = FetchingLoop<S0, S1, 2>(dc, i, n, next, [&](std::size_t at) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    acc.first(whole(at));
    acc.second(whole(at + P));
  });
  next.advance<S0, S1>(n - end);
  next_rows = next;
  return end;
}
template <class DC, class Acc, class Whole, class Part>
HWY_INLINE ChunkSums SumTail(DC dc, Acc& acc, std::size_t i, std::size_t n, const Whole& whole, const Part& part) {
  const std::size_t P = 2 * hn::Lanes(dc);
  if (i + P <= n) {
    acc.first(whole(i));
    i += P;
  }
  if (i < n) acc.second(part(i, n - i));
  return acc.total(dc);
}
template <bool kWithSum, std::size_t S0, std::size_t S1, class DC, class Whole, class Part>
HWY_INLINE ChunkSums SumLoop(DC dc, std::size_t n, NextRows& next_rows, const Whole& whole, const Part& part) {
  SumAcc<kWithSum, DC> acc(dc);
  const std::size_t i = SumUnits<S0, S1>(dc, acc, 0, n, next_rows, whole);
  return SumTail(dc, acc, i, n, whole, part);
}

// Pass 1 over one chunk of the stored row p: Σx'² and (kWithSum) Σx', with
// x' = x·scale when kScaled (the rescue of PrepareRow), else x' = x. kEO
// selects the even/odd layout, used for bf16 rows.
template <bool kWithSum, bool kScaled, bool kEO, class DC, class T>
HWY_INLINE ChunkSums SumChunk(DC dc, const T* HWY_RESTRICT p, std::size_t n, hn::TFromD<DC> scale,
                              NextRows& next) {
  const auto S = hn::Set(dc, scale);
  auto scaled = [&](Pair<DC> v) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    if constexpr (kScaled) return Pair<DC>{hn::Mul(v.a, S), hn::Mul(v.b, S)};
    else return v;
  };
  return SumLoop<kWithSum, sizeof(T), 0>(
      dc, n, next, [&](std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE { return scaled(LoadPair<kEO>(dc, p + i)); },
      [&](std::size_t i, std::size_t k) HWY_ATTR NORMKIT_ALWAYS_INLINE {
        return scaled(LoadPairTail<kEO>(dc, p + i, k));
      });
}

// A streamed f16 h kept widened: the fused op's first pass also stores the
// f32 values of h as stored in a scratch row (KeptRow), and the output pass
// reads them there instead of forming h again from x and the residual
// (SumRow: four f16 conversions and an add per vector). Where those
// conversions are slow (Zen 2), they bound the fused f16 op, and two stores
// and two loads per pair cost less (docs/kernels.md, "A streamed f16 h kept
// widened"). Highway's AVX2 target only: the others were not measured.
template <class TR, bool kStreamH>
inline constexpr bool kKeepsH =
#if HWY_TARGET == HWY_AVX2
    kStreamH && std::is_same_v<TR, hwy::float16_t>;
#else
    false;
#endif

// Fused pass 1: h = x + residual, rounded to h's dtype and stored; returns
// the sums of the stored values. The sum is formed in the compute type and
// rounded once to h's dtype, as PyTorch's add does. kStreamH: whole pairs of
// h are written with non-temporal stores (h + i aligned for them).
// kept: used only where kKeepsH (a streamed f16 h, see KeptRow): the values
// of h as stored are also written there, widened, pair after pair.
template <bool kWithSum, bool kEO, bool kStreamH, class DC, class TX, class TR>
HWY_INLINE ChunkSums FusedChunk(DC dc, const TX* HWY_RESTRICT x, const TR* HWY_RESTRICT r, TR* HWY_RESTRICT h,
                                std::size_t n, NextRows& next, hn::TFromD<DC>* HWY_RESTRICT kept) {
  auto add = [](Pair<DC> u, Pair<DC> v) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    return Pair<DC>{hn::Add(u.a, v.a), hn::Add(u.b, v.b)};
  };
  auto keep = [&](Pair<DC> v, std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    if constexpr (kKeepsH<TR, kStreamH>) {
      hn::Store(v.a, dc, kept + i);
      hn::Store(v.b, dc, kept + i + hn::Lanes(dc));
    }
    return v;
  };
  return SumLoop<kWithSum, sizeof(TX), sizeof(TR)>(
      dc, n, next,
      [&](std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE {
        const Pair<DC> v = add(LoadPair<kEO>(dc, x + i), LoadPair<kEO>(dc, r + i));
        if constexpr (kStreamH) return keep(StreamPair<kEO>(dc, v, h + i), i);
        else return StorePair<kEO>(dc, v, h + i);
      },
      [&](std::size_t i, std::size_t k) HWY_ATTR NORMKIT_ALWAYS_INLINE {
        // Both inputs are loaded before h is written: h may alias x or residual.
        const auto v = add(LoadPairTail<kEO>(dc, x + i, k), LoadPairTail<kEO>(dc, r + i, k));
        return keep(StorePairTail<kEO>(dc, v, h + i, k), i);  // padding lanes are 0 + 0
      });
}

// The centred pass over an L1/L2-resident chunk: with d = x·scale − m,
// e = Σd and q = Σd².
template <bool kEO, class DC, class T>
HWY_INLINE void CentredChunk(DC dc, const T* HWY_RESTRICT p, std::size_t n, hn::TFromD<DC> scale,
                             hn::TFromD<DC> m, double& e_out, double& q_out) {
  const std::size_t P = 2 * hn::Lanes(dc);
  const auto S = hn::Set(dc, scale), M = hn::Set(dc, m);
  auto q0 = hn::Zero(dc), q1 = hn::Zero(dc), q2 = hn::Zero(dc), q3 = hn::Zero(dc);
  auto e0 = hn::Zero(dc), e1 = hn::Zero(dc);
  std::size_t i = 0;
  for (; i + 2 * P <= n; i += 2 * P) {
    const auto u = LoadPair<kEO>(dc, p + i), v = LoadPair<kEO>(dc, p + i + P);
    const auto d0 = hn::MulSub(u.a, S, M);
    const auto d1 = hn::MulSub(u.b, S, M);
    const auto d2 = hn::MulSub(v.a, S, M);
    const auto d3 = hn::MulSub(v.b, S, M);
    q0 = hn::MulAdd(d0, d0, q0);
    q1 = hn::MulAdd(d1, d1, q1);
    q2 = hn::MulAdd(d2, d2, q2);
    q3 = hn::MulAdd(d3, d3, q3);
    e0 = hn::Add(e0, hn::Add(d0, d1));
    e1 = hn::Add(e1, hn::Add(d2, d3));
  }
  if (i + P <= n) {
    const auto u = LoadPair<kEO>(dc, p + i);
    const auto d0 = hn::MulSub(u.a, S, M);
    const auto d1 = hn::MulSub(u.b, S, M);
    q0 = hn::MulAdd(d0, d0, q0);
    q1 = hn::MulAdd(d1, d1, q1);
    e0 = hn::Add(e0, hn::Add(d0, d1));
    i += P;
  }
  if (i < n) {  // padding lanes would give d = −m: mask them
    const auto t = LoadPairTail<kEO>(dc, p + i, n - i);
    hn::Mask<DC> ma, mb;
    PairTailMasks<kEO>(dc, n - i, ma, mb);
    const auto d2 = hn::IfThenElseZero(ma, hn::MulSub(t.a, S, M));
    const auto d3 = hn::IfThenElseZero(mb, hn::MulSub(t.b, S, M));
    q2 = hn::MulAdd(d2, d2, q2);
    q3 = hn::MulAdd(d3, d3, q3);
    e1 = hn::Add(e1, hn::Add(d2, d3));
  }
  e_out = SumToDouble(dc, hn::Add(e0, e1));
  q_out = SumToDouble(dc, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3)));
}

// Row statistics of x·scale. LayerNorm: mean = shift + mean_rel (kept apart,
// so the output pass can subtract the mean in two pieces) and
// M2 = Σ(x − mean)². RMSNorm: m2 = Σx² and the rest 0.
struct RowStats {
  double shift = 0, mean_rel = 0, m2 = 0;
  bool centred = false;  // LayerNorm: taken by the centred pass (|mean| > std/4)
  double mean() const { return shift + mean_rel; }
};

// The one-pass variance M2 = Σx² − D·mean² is used when 16·D·mean² ≤ M2,
// i.e. |mean| ≤ std/4: its error is then within the budget of the centred
// variance (docs/numerics.md §2). Other rows (a large common offset, a
// constant row, NaN) take the centred pass.
constexpr double kOnePassMeanSqOverVar = 1.0 / 16;

// The corrected two-pass statistics of the cached row p around the shift m
// (the one-pass mean): with d = x·scale − m, e = Σd and q = Σd²,
// mean = m + e/D and M2 = q − e²/D; e²/D removes the error of m itself, and
// d is small, so rows like 1e4 + noise keep their digits.
template <bool kEO, class DC, class T>
HWY_NOINLINE RowStats CentredStats(DC dc, const T* HWY_RESTRICT p, std::size_t D, hn::TFromD<DC> scale,
                                   hn::TFromD<DC> m) {
  double e = 0, q = 0;
  for (std::size_t off = 0; off < D; off += kChunk) {
    double ec = 0, qc = 0;
    CentredChunk<kEO>(dc, p + off, std::min(kChunk, D - off), scale, m, ec, qc);
    e += ec;
    q += qc;
  }
  const double Dd = static_cast<double>(D);
  return {static_cast<double>(m), e / Dd, q - e * e / Dd, true};
}

// LayerNorm statistics from the row's pass-1 sums (of x·scale, p stored).
template <bool kEO, class DC, class T>
HWY_INLINE RowStats LayerStats(DC dc, const T* HWY_RESTRICT p, std::size_t D, hn::TFromD<DC> scale,
                               ChunkSums sums) {
  const double mean = sums.s / static_cast<double>(D);
  const double m2 = sums.q - sums.s * mean;
  if (sums.s * mean <= kOnePassMeanSqOverVar * m2) return {0.0, mean, m2};
  return CentredStats<kEO>(dc, p, D, scale, static_cast<hn::TFromD<DC>>(mean));
}

// A row's statistics from its pass-1 sums (of x·scale, p stored).
template <NormKind K, bool kEO, class DC, class T>
HWY_INLINE RowStats StatsOfSums(DC dc, const T* HWY_RESTRICT p, std::size_t D, hn::TFromD<DC> scale, ChunkSums sums) {
  if constexpr (K == NormKind::layer_norm) return LayerStats<kEO>(dc, p, D, scale, sums);
  else return {0.0, 0.0, sums.q};
}

// Pass 1 of a row and its statistics, inlined into the row loops: out of
// line, the call and the register saves around it were a measurable part of
// a short row (docs/kernels.md, "The statistics pass inlined").
template <NormKind K, bool kScaled, class DC, class T>
HWY_INLINE RowStats StatsOfRow(DC dc, const T* HWY_RESTRICT p, std::size_t D, hn::TFromD<DC> scale,
                               NextRows& next) {
  constexpr bool kLayer = K == NormKind::layer_norm;
  constexpr bool kEO = kEvenOdd<T>;
  ChunkSums row;
  for (std::size_t off = 0; off < D; off += kChunk)
    row.add(SumChunk<kLayer, kScaled, kEO>(dc, p + off, std::min(kChunk, D - off), scale, next));
  return StatsOfSums<K, kEO>(dc, p, D, scale, row);
}

// The statistics of a row rescued by PrepareRow, scaled by `scale` (a power
// of two): out of line, as rescues are rare.
template <NormKind K, class DC, class T>
HWY_NOINLINE RowStats RescaledStatsOfRow(DC dc, const T* HWY_RESTRICT p, std::size_t D, hn::TFromD<DC> scale) {
  NextRows none;  // the row is in cache: nothing to fetch
  return StatsOfRow<K, true>(dc, p, D, scale, none);
}

// The statistics of h = x + residual, written as it goes; bitwise those
// StatsOfRow<K, false> gives for the stored h. kStreamH: see FusedChunk.
template <NormKind K, bool kStreamH, class DC, class TX, class TR>
HWY_INLINE RowStats FusedStatsOfRow(DC dc, const TX* HWY_RESTRICT x, const TR* HWY_RESTRICT r, TR* HWY_RESTRICT h,
                                    std::size_t D, NextRows& next, hn::TFromD<DC>* kept = nullptr) {
  using C = hn::TFromD<DC>;
  constexpr bool kLayer = K == NormKind::layer_norm;
  constexpr bool kEO = kEvenOdd<TR>;  // h's layout, as StatsOfRow would take it
  ChunkSums row;
  for (std::size_t off = 0; off < D; off += kChunk) {
    C* kept_chunk = nullptr;
    if constexpr (kKeepsH<TR, kStreamH>) kept_chunk = kept + off;
    row.add(FusedChunk<kLayer, kEO, kStreamH>(dc, x + off, r + off, h + off, std::min(kChunk, D - off), next,
                                              kept_chunk));
  }
  if constexpr (kLayer) return LayerStats<kEO>(dc, static_cast<const TR*>(h), D, C{1}, row);
  else return {0.0, 0.0, row.q};
}

// The row the output pass reads: the stored row itself (a pointer), or, for
// a fused row whose h was streamed out of the cache, SumRow: h formed again
// as x + residual from the cached x and residual rows and rounded to h's
// dtype as FusedChunk rounded it: the stored h, bit for bit, in either layout.
template <class TX, class TR>
struct SumRow {
  const TX* x;
  const TR* r;
};
template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> LoadRow(DC dc, const T* p, std::size_t i) {
  return LoadPair<kEO>(dc, p + i);
}
template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> LoadRowTail(DC dc, const T* p, std::size_t i, std::size_t n) {
  return LoadPairTail<kEO>(dc, p + i, n);
}
template <bool kEO, class DC, class TX, class TR>
HWY_INLINE Pair<DC> LoadRow(DC dc, SumRow<TX, TR> s, std::size_t i) {
  const Pair<DC> u = LoadPair<kEO>(dc, s.x + i), v = LoadPair<kEO>(dc, s.r + i);
  return RoundPair<kEO, TR>(dc, Pair<DC>{hn::Add(u.a, v.a), hn::Add(u.b, v.b)});
}
template <bool kEO, class DC, class TX, class TR>
HWY_INLINE Pair<DC> LoadRowTail(DC dc, SumRow<TX, TR> s, std::size_t i, std::size_t n) {
  const Pair<DC> u = LoadPairTail<kEO>(dc, s.x + i, n), v = LoadPairTail<kEO>(dc, s.r + i, n);
  return RoundPair<kEO, TR>(dc, Pair<DC>{hn::Add(u.a, v.a), hn::Add(u.b, v.b)});
}
// Or the stored h widened (kKeepsH): the kept row, read as stored.
template <class C, class TR>
struct KeptRow {
  const C* p;
};
template <bool kEO, class DC, class C, class TR>
HWY_INLINE Pair<DC> LoadRow(DC dc, KeptRow<C, TR> k, std::size_t i) {
  static_assert(!kEO, "a kept row is in the consecutive layout");
  return Pair<DC>{hn::LoadU(dc, k.p + i), hn::LoadU(dc, k.p + i + hn::Lanes(dc))};
}
template <bool kEO, class DC, class C, class TR>
HWY_INLINE Pair<DC> LoadRowTail(DC dc, KeptRow<C, TR> k, std::size_t i, std::size_t n) {
  return LoadPairTail<kEO>(dc, k.p + i, n);
}
// Bytes per element of the row as the prefetcher counts it (h's).
template <class Src>
inline constexpr std::size_t kRowElementBytes = sizeof(std::remove_pointer_t<Src>);
template <class TX, class TR>
inline constexpr std::size_t kRowElementBytes<SumRow<TX, TR>> = sizeof(TR);
template <class C, class TR>
inline constexpr std::size_t kRowElementBytes<KeptRow<C, TR>> = sizeof(TR);

// How the output pass writes y: `stream`, non-temporal stores for outputs
// too large to stay in cache; `next`, the next row to fetch meanwhile;
// `params_finite`, every gain and bias is known to be finite (ArrangeParams
// or ParamsFinite finds it), so rows with a finite x̂ are NaN-free
// (WriteRow).
struct OutputOpts {
  bool stream = false;
  bool params_finite = false;
  NextRows next;
};

// How the output pass forms x̂ from x (PrepareRow decides).
// OutputRow's kAffine selects between them.
struct XhatForm {
  // Affine (ordinary rows): x̂ = x·R + c with c = −mean·R, one FMA. For a
  // LayerNorm row that took the one-pass statistics |mean|·R ≤ 1/4, so c's
  // rounding is a small absolute error in x̂, well inside the bound. RMSNorm:
  // c = 0, x̂ = x·R.
  // Otherwise x̂ = ((x·S − M) − M_lo)·R: a rescued row (S ≠ 1, see
  // PrepareRow) or a LayerNorm row with a large mean. The mean is
  // subtracted in two pieces, M + M_lo = mean to twice the compute precision:
  // x − M is exact for x near the mean, so rows like 1e4 + noise keep their
  // digits.
  double s = 1, m = 0, m_lo = 0, r = 1, c = 0;
  bool affine = true;
  // Every x̂ of the row is finite: an affine row whose statistics, R and c
  // are finite. Finite statistics mean every x is finite, and then
  // |x̂| = |x − mean|·R is at most about √D.
  bool finite_xhat = false;
};

// y = x̂·(w + off) + b, row re-read from cache (RMSNorm: no bias). Pairs in
// the layout of y's dtype (even/odd for bf16). kAddOffset false: w already
// holds w + off (an Arranged row, or off = 0, see WriteRow).
// kNaNFree: no y of the row is NaN (WriteRow), so bf16 rounding skips that case.
template <NormKind K, bool kAffine, bool kAddOffset, bool kNaNFree, class DC, class Src, class TY, class TW>
HWY_INLINE void OutputRow(DC dc, Src x, TY* y, const TW* HWY_RESTRICT w,
                          const TW* HWY_RESTRICT b, std::size_t D, const XhatForm& f, hn::TFromD<DC> off,
                          OutputOpts& opts) {
  using C = hn::TFromD<DC>;
  constexpr bool kEO = kEvenOdd<TY>;
  const std::size_t P = 2 * hn::Lanes(dc);
  const auto S = hn::Set(dc, static_cast<C>(f.s)), M = hn::Set(dc, static_cast<C>(f.m));
  const auto Mlo = hn::Set(dc, static_cast<C>(f.m_lo)), R = hn::Set(dc, static_cast<C>(f.r));
  const auto Cv = hn::Set(dc, static_cast<C>(f.c));
  const auto Off = hn::Set(dc, off);
  auto one = [&](auto xv, auto wv, auto bv) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    const auto xhat = !kAffine                    ? hn::Mul(hn::Sub(hn::MulSub(xv, S, M), Mlo), R)
                      : K == NormKind::layer_norm ? hn::MulAdd(xv, R, Cv)
                                             : hn::Mul(xv, R);
    const auto g = kAddOffset ? hn::Add(wv, Off) : wv;
    if constexpr (K == NormKind::layer_norm) return hn::MulAdd(xhat, g, bv);
    else return hn::Mul(xhat, g);
  };
  auto pair = [&](Pair<DC> xv, Pair<DC> wv, Pair<DC> bv) HWY_ATTR NORMKIT_ALWAYS_INLINE {
    return Pair<DC>{one(xv.a, wv.a, bv.a), one(xv.b, wv.b, bv.b)};
  };
  const Pair<DC> zero{hn::Zero(dc), hn::Zero(dc)};
  auto whole = [&](std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE {  // the P elements at i
    const auto bv = K == NormKind::layer_norm ? LoadPair<kEO>(dc, b + i) : zero;
    return pair(LoadRow<kEO>(dc, x, i), LoadPair<kEO>(dc, w + i), bv);
  };
  // y may be x itself (in-place): each pair is loaded before it is stored.
  std::size_t i = 0;
  auto partial = [&](std::size_t n) HWY_ATTR NORMKIT_ALWAYS_INLINE {  // the n < P elements at i
    const auto bv = K == NormKind::layer_norm ? LoadPairTail<kEO>(dc, b + i, n) : zero;
    StorePairTail<kEO>(dc, pair(LoadRowTail<kEO>(dc, x, i, n), LoadPairTail<kEO>(dc, w + i, n), bv), y + i, n);
  };
  // The cursors in a local copy, kept in registers (as in SumLoop).
  NextRows next = opts.next;
  constexpr std::size_t S0 = sizeof(TY), S1 = kRowElementBytes<Src>;
  // Non-temporal stores need aligned addresses: peel up to the first. Pairs
  // of even/odd Arranged parameters start at 0, so such a row is not peeled
  // and, unless aligned, not streamed.
  const std::size_t head = StreamHead(y, P, D);
  if (opts.stream && !(kIsArranged<TW> && kEO && head != 0)) {
    if (head) partial(head);
    i = FetchingLoop<S0, S1, 1>(dc, head, D, next, [&](std::size_t at) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      StreamPair<kEO, kNaNFree>(dc, whole(at), y + at);
    });
  } else {
    i = FetchingLoop<S0, S1, 1>(dc, 0, D, next, [&](std::size_t at) HWY_ATTR NORMKIT_ALWAYS_INLINE {
      StorePair<kEO, kNaNFree>(dc, whole(at), y + at);
    });
  }
  opts.next = next;
  if (i < D) partial(D - i);
}

// Below this, var + eps may have lost digits to underflow in the squares
// (x − mean)², whose spacing near zero is the smallest subnormal: rows this
// small are redone with an upward power-of-two scale. 2^(2·digits) above the
// smallest normal keeps that absolute error far below one ulp of var + eps.
template <class C>
constexpr double kTinyVariance =
    static_cast<double>(std::numeric_limits<C>::min()) * 0x1p24 * 0x1p24 *
    (std::is_same_v<C, double> ? 0x1p29 * 0x1p29 : 1.0);

// The scalar step of one row whose statistics `st` were taken from the
// stored row `p` (x, or h in the fused op): rescue if needed, write
// mean/rstd, and return how the output pass forms x̂.
template <NormKind K, class DC, class TI>
HWY_INLINE XhatForm PrepareRow(DC dc, const TI* HWY_RESTRICT p, RowStats st, std::size_t D, double eps,
                               hn::TFromD<DC>* mean_out, hn::TFromD<DC>* rstd_out) {
  using C = hn::TFromD<DC>;
  const double Dd = static_cast<double>(D);
  double scale = 1.0;
  double var = st.m2 / Dd;  // RMSNorm: the mean square
  bool rescue = false;
  if (!(std::isfinite(st.mean()) && std::isfinite(st.m2))) {
    // Overflow of Σx or Σ(x − mean)² with finite inputs (|x| ~ 1e20 in f32);
    // a row holding NaN or Inf stays non-finite, as it must.
    rescue = RowIsFinite(dc, p, D);
  } else if (var + eps < kTinyVariance<C>) {
    rescue = true;  // a (nearly) subnormal row: its squares underflowed
  }
  if (rescue) {
    const double amax = RowMaxAbs(dc, p, D);
    if (amax > 0) {
      // Scale the largest |x| into [0.5, 1): an exact power of two that keeps
      // every square and sum in range. Clamped so the scale itself is a
      // normal number of the compute type.
      constexpr int kMaxExp = std::numeric_limits<C>::max_exponent - 2;
      const int e = std::clamp(std::ilogb(amax) + 1, -kMaxExp, kMaxExp);
      scale = std::ldexp(1.0, -e);
      st = RescaledStatsOfRow<K>(dc, p, D, static_cast<C>(scale));
      var = st.m2 / Dd;
    }
  }
  // rstd of the scaled row: 1/sqrt(var_s + eps·s²). If eps·s² overflows, var_s
  // is negligible next to it.
  const double eps_s = eps * scale * scale;
  const double rstd_s = std::isfinite(eps_s) ? 1.0 / std::sqrt(var + eps_s) : 1.0 / (std::sqrt(eps) * scale);
  const double mean_s = st.mean();
  const C m = static_cast<C>(mean_s);
  // The rest of the mean: shift − m is exact (Sterbenz) whenever it matters.
  const C m_lo = static_cast<C>((st.shift - static_cast<double>(m)) + st.mean_rel);
  // The true rstd. A scaled variance of exactly 0 means the row is constant,
  // so the true rstd is 1/sqrt(eps) — not rstd_s·s, which is Inf when eps·s²
  // underflowed (f64 1e19 with eps = 1e-300: eps·s² ~ 1e-340 rounds to 0).
  const double rstd_true = (var == 0.0) ? 1.0 / std::sqrt(eps) : rstd_s * scale;
  // rstd_s overflows C only when var_s is exactly 0 and eps·s² is tiny: then
  // every x·S − M is 0, and the largest finite rstd_s gives the same 0 (the
  // true rstd, e.g. 316 for eps = 1e-5, is finite). Keep Inf when the true
  // rstd is Inf (eps = 0 on a constant row: y = 0·Inf = NaN, as documented).
  const bool true_rstd_inf = !std::isfinite(rstd_true);
  const C r = true_rstd_inf ? static_cast<C>(rstd_s)
                            : static_cast<C>(std::min(rstd_s, static_cast<double>(std::numeric_limits<C>::max())));
  if (K == NormKind::layer_norm && mean_out) *mean_out = scale == 1.0 ? m : static_cast<C>(mean_s / scale);
  if (rstd_out) *rstd_out = scale == 1.0 ? r : static_cast<C>(rstd_true);
  XhatForm f;
  f.r = static_cast<double>(r);
  f.affine = scale == 1.0 && !st.centred;
  if (f.affine) {
    if constexpr (K == NormKind::layer_norm) f.c = -mean_s * f.r;
    f.finite_xhat = std::isfinite(st.mean()) && std::isfinite(st.m2) && std::isfinite(r) &&
                    std::isfinite(static_cast<C>(f.c));
  } else {
    f.s = scale;
    if constexpr (K == NormKind::layer_norm) {
      f.m = static_cast<double>(m);
      f.m_lo = static_cast<double>(m_lo);
    }
  }
  return f;
}

// OutputRow with the weight offset added only where it is not 0 (Arranged
// rows hold it already): w + 0 is w, bar the sign of a zero weight, which
// ArrangeParams keeps alike, and in an unarranged output pass that add
// competes with the conversions for the vector ports.
template <NormKind K, bool kAffine, bool kNaNFree, class DC, class Src, class TY, class TW>
HWY_INLINE void OutputRowOffset(DC dc, Src src, TY* y, const TW* w, const TW* b, std::size_t D, const XhatForm& f,
                                hn::TFromD<DC> off, OutputOpts& opts) {
  if constexpr (!kIsArranged<TW>) {
    if (off != hn::TFromD<DC>{0}) return OutputRow<K, kAffine, true, kNaNFree>(dc, src, y, w, b, D, f, off, opts);
  }
  OutputRow<K, kAffine, false, kNaNFree>(dc, src, y, w, b, D, f, off, opts);
}

// The output pass of a prepared row: y from `src`, the row as the output
// pass reads it (the stored row itself, or SumRow).
// A bf16 row with a finite x̂ and finite parameters is NaN-free: y = x̂·g + b
// of finite operands is finite or ±Inf. Its rounding then skips the NaN
// case, about a third of its integer operations on targets without the
// AVX-512 BF16 instructions (docs/kernels.md, "NaN-free bf16 rows").
template <NormKind K, class DC, class Src, class TY, class TW>
HWY_INLINE void WriteRow(DC dc, Src src, TY* y, const TW* w, const TW* b, std::size_t D, const XhatForm& f,
                         double offset, OutputOpts& opts) {
  using C = hn::TFromD<DC>;
  const C off = static_cast<C>(offset);
  if (!f.affine) return OutputRowOffset<K, false, false>(dc, src, y, w, b, D, f, off, opts);
  if constexpr (kEvenOdd<TY>) {
    if (f.finite_xhat && opts.params_finite) return OutputRowOffset<K, true, true>(dc, src, y, w, b, D, f, off, opts);
  }
  OutputRowOffset<K, true, false>(dc, src, y, w, b, D, f, off, opts);
}

// Finishes one row: PrepareRow, then WriteRow.
template <NormKind K, class DC, class TI, class Src, class TY, class TW>
HWY_INLINE void NormalizeRow(DC dc, const TI* HWY_RESTRICT p, Src src, RowStats st, TY* y, const TW* w, const TW* b,
                             std::size_t D, double eps, double offset, hn::TFromD<DC>* mean_out,
                             hn::TFromD<DC>* rstd_out, OutputOpts& opts) {
  WriteRow<K>(dc, src, y, w, b, D, PrepareRow<K>(dc, p, st, D, eps, mean_out, rstd_out), offset, opts);
}

// Plain rows [begin, end), software-pipelined: the statistics pass of row
// r + 1 runs between the scalar step of row r (its sums to rstd: a
// horizontal reduction, divides and a square root in one dependency chain)
// and the output pass of row r, so the vector units have independent work
// while that chain resolves. Every row's arithmetic is the in-order loop's,
// so the bits are the same. It pays only where the chain is a large part of
// a row and the loop's working set (two rows of x, one of y, the parameters
// as read) stays in L1d, so that row r is still there for its output pass:
// kPipelinedRowsBytes. f32 rows gained nothing and 16-bit rows beyond that
// working set lost (docs/kernels.md, "Pipelined rows").
inline constexpr std::size_t kPipelinedRowsBytes = 24 * 1024;
template <NormKind K, class TX, class TP>
constexpr bool PipelinesRows(std::size_t D) {
  const std::size_t params = (K == NormKind::layer_norm ? 2 : 1) * sizeof(TP);
  return sizeof(TX) == 2 && D * (3 * sizeof(TX) + params) <= kPipelinedRowsBytes;
}
template <NormKind K, class C, class TX, class TP>
void PlainRowsPipelined(const ForwardArgs& a, std::int64_t begin, std::int64_t end, const TP* w, const TP* b,
                        double offset, OutputOpts& opts) {
  const hn::ScalableTag<C> dc;
  const std::size_t D = static_cast<std::size_t>(a.D);
  C* mean = static_cast<C*>(a.mean);
  C* rstd = static_cast<C*>(a.rstd);
  const TX* x = RowPtr<TX>(a.x, a.x_stride, begin);
  opts.next.aim<sizeof(TX), 0>(x, a.x_stride, nullptr, 0, end - begin - 1, D);
  RowStats st = StatsOfRow<K, false>(dc, x, D, C{1}, opts.next);
  for (std::int64_t row = begin; row < end; ++row) {
    const XhatForm f = PrepareRow<K>(dc, x, st, D, a.eps, mean ? mean + row : nullptr, rstd ? rstd + row : nullptr);
    const TX* this_x = x;
    if (row + 1 < end) {
      x = RowPtr<TX>(a.x, a.x_stride, row + 1);
      opts.next.aim<sizeof(TX), 0>(x, a.x_stride, nullptr, 0, end - row - 2, D);
      st = StatsOfRow<K, false>(dc, x, D, C{1}, opts.next);
    }
    WriteRow<K>(dc, this_x, RowPtr<TX>(a.y, a.y_stride, row), w, b, D, f, offset, opts);
  }
}

// Plain f32 rows whose y streams to memory, interleaved: the statistics
// pass of row r + 1 and the output pass of row r advance together, a block
// of kInterleaveBlock elements of each in turn, so that row r + 1's reads
// from memory and row r's streamed writes overlap as in a copy. In order, a
// row's first pass only reads and its output pass mostly writes, and the
// next-row fetches (NextRows, kept here as they are) did not fill the gap
// (docs/kernels.md, "Interleaved rows"). The sums of row r + 1 associate as
// StatsOfRow's (SumUnits over a chunk's blocks, SumTail at its end) and the
// output pass is elementwise, so each row's bits are the in-order loop's,
// bar the sign or payload of a NaN row's NaNs: which NaN operand an FMA
// passes on follows the compiler's operand order (docs/kernels.md, rule 7).
// RMSNorm's output pass does less per element, so its blocks are shorter:
// measured, as is the choice of f32 rows wider than kNearAheadBytes.
template <NormKind K>
inline constexpr std::size_t kInterleaveBlock = K == NormKind::layer_norm ? 256 : 128;
static_assert(kChunk % kInterleaveBlock<NormKind::layer_norm> == 0 && kChunk % kInterleaveBlock<NormKind::rms_norm> == 0,
              "blocks tile a statistics chunk");
// Whether f32 rows are interleaved. Rows of at most kNearAheadBytes, fetched
// two rows ahead (NextRows), and 16-bit rows, bound by the core, ran faster
// in order. Blocks hold whole units of SumUnits.
template <NormKind K, class C>
bool InterleavesRows(ForwardStreams stream, std::int64_t rows, std::size_t D) {
  return stream.y && rows > 1 && D * sizeof(float) > kNearAheadBytes &&
         kInterleaveBlock<K> % (4 * hn::Lanes(hn::ScalableTag<C>())) == 0;
}
template <NormKind K, class C, class TX, class TP>
void PlainRowsInterleaved(const ForwardArgs& a, std::int64_t begin, std::int64_t end, const TP* w, const TP* b,
                          double offset, OutputOpts& opts) {
  const hn::ScalableTag<C> dc;
  constexpr bool kLayer = K == NormKind::layer_norm;
  constexpr bool kEO = kEvenOdd<TX>;
  const std::size_t D = static_cast<std::size_t>(a.D);
  C* mean = static_cast<C*>(a.mean);
  C* rstd = static_cast<C*>(a.rstd);
  const TX* x = RowPtr<TX>(a.x, a.x_stride, begin);
  NextRows& ahead = opts.next;
  ahead.aim<sizeof(TX), 0>(x, a.x_stride, nullptr, 0, end - begin - 1, D);
  RowStats st = StatsOfRow<K, false>(dc, x, D, C{1}, ahead);
  for (std::int64_t row = begin; row < end; ++row) {
    const XhatForm f = PrepareRow<K>(dc, x, st, D, a.eps, mean ? mean + row : nullptr, rstd ? rstd + row : nullptr);
    TX* y = RowPtr<TX>(a.y, a.y_stride, row);
    if (row + 1 == end) {
      WriteRow<K>(dc, x, y, w, b, D, f, offset, opts);
      break;
    }
    const TX* next = RowPtr<TX>(a.x, a.x_stride, row + 1);
    ahead.aim<sizeof(TX), 0>(next, a.x_stride, nullptr, 0, end - row - 2, D);
    ChunkSums sums;
    SumAcc<kLayer, hn::ScalableTag<C>> acc(dc);
    for (std::size_t at = 0; at < D; at += kInterleaveBlock<K>) {
      const std::size_t n = std::min(kInterleaveBlock<K>, D - at);
      const std::size_t chunk = at / kChunk * kChunk, chunk_n = std::min(kChunk, D - chunk);
      const TX* p = next + chunk;
      const auto whole = [&](std::size_t i) HWY_ATTR NORMKIT_ALWAYS_INLINE { return LoadPair<kEO>(dc, p + i); };
      const std::size_t i = SumUnits<sizeof(TX), 0>(dc, acc, at - chunk, at + n - chunk, ahead, whole);
      if (at + n == chunk + chunk_n) {
        sums.add(SumTail(dc, acc, i, chunk_n, whole, [&](std::size_t j, std::size_t k) HWY_ATTR NORMKIT_ALWAYS_INLINE {
          return LoadPairTail<kEO>(dc, p + j, k);
        }));
        acc = SumAcc<kLayer, hn::ScalableTag<C>>(dc);
      }
      WriteRow<K>(dc, x + at, y + at, w + at, kLayer ? b + at : b, n, f, offset, opts);
    }
    x = next;
    st = StatsOfSums<K, kEO>(dc, x, D, C{1}, sums);
  }
}

// Plain 16-bit rows two at a time: the statistics passes of both rows, then
// their output passes in column blocks of kPairedBlock elements, a block of
// each row in turn, so each block of the parameters (beyond L1d at these
// widths) is read from L2 once per two rows, not once per row. The output
// pass is elementwise and each block peels its own head for the streamed
// stores, so each row's bits are the in-order loop's, bar a NaN's sign or
// payload as in PlainRowsInterleaved. Taken where it paid, by the
// parameters' bytes per element as read (TP): with 4-byte parameters (f32,
// or arranged as f32) at 4096 < D <= 65536; LayerNorm's two 16-bit arrays,
// half those bytes, at 8192 < D <= 32768. RMSNorm's one 16-bit array gained
// nothing; with 16-bit parameters, neither did D = 8192, where in order a
// row and its parameters stay in L1d, nor D = 65536 (docs/kernels.md, "Two
// rows at a time").
inline constexpr std::size_t kPairedBlock = 1024;
template <NormKind K, class TX, class TP>
inline constexpr bool kMayPairRows = sizeof(TX) == 2 && (K == NormKind::layer_norm || sizeof(TP) == 4);
template <class TP>
bool PairsRows(std::int64_t rows, std::size_t D) {
  if constexpr (sizeof(TP) == 4) return rows > 1 && D > 4096 && D <= 65536;
  return rows > 1 && D > 8192 && D <= 32768;
}
// WriteRow as a call: PlainRowsPaired's three uses share one copy of its
// forms instead of inlining each.
template <NormKind K, class DC, class TX, class TP>
HWY_NOINLINE void WriteRowCall(DC dc, const TX* x, TX* y, const TP* w, const TP* b, std::size_t n, const XhatForm& f,
                               double offset, OutputOpts& opts) {
  WriteRow<K>(dc, x, y, w, b, n, f, offset, opts);
}
template <NormKind K, class C, class TX, class TP>
void PlainRowsPaired(const ForwardArgs& a, std::int64_t begin, std::int64_t end, const TP* w, const TP* b,
                     double offset, OutputOpts& opts) {
  static_assert(kMayPairRows<K, TX, TP>, "16-bit rows only");
  constexpr bool kLayer = K == NormKind::layer_norm;
  const hn::ScalableTag<C> dc;
  static_assert(kPairedBlock % (2 * hn::MaxLanes(hn::ScalableTag<C>())) == 0, "blocks hold whole pairs");
  const std::size_t D = static_cast<std::size_t>(a.D);
  C* mean = static_cast<C*>(a.mean);
  C* rstd = static_cast<C*>(a.rstd);
  const auto prepare = [&](const TX* x, std::int64_t row) HWY_ATTR {
    const RowStats st = StatsOfRow<K, false>(dc, x, D, C{1}, opts.next);
    return PrepareRow<K>(dc, x, st, D, a.eps, mean ? mean + row : nullptr, rstd ? rstd + row : nullptr);
  };
  std::int64_t row = begin;
  for (; row + 1 < end; row += 2) {
    const TX* x0 = RowPtr<TX>(a.x, a.x_stride, row);
    const TX* x1 = RowPtr<TX>(a.x, a.x_stride, row + 1);
    // The pair's passes fetch the next pair: row + 2 during the statistics
    // passes, row + 3 during the output passes.
    opts.next.aim<sizeof(TX), 0>(x1, a.x_stride, nullptr, 0, end - row - 2, D);
    const XhatForm f0 = prepare(x0, row);
    const XhatForm f1 = prepare(x1, row + 1);
    const bool after_next = row + 3 < end;
    opts.next.aim<sizeof(TX), 0>(after_next ? RowPtr<TX>(a.x, a.x_stride, row + 2) : x1, a.x_stride, nullptr, 0,
                                 after_next ? end - row - 3 : 0, D);
    TX* y0 = RowPtr<TX>(a.y, a.y_stride, row);
    TX* y1 = RowPtr<TX>(a.y, a.y_stride, row + 1);
    for (std::size_t at = 0; at < D; at += kPairedBlock) {
      const std::size_t n = std::min(kPairedBlock, D - at);
      WriteRowCall<K>(dc, x0 + at, y0 + at, w + at, kLayer ? b + at : b, n, f0, offset, opts);
      WriteRowCall<K>(dc, x1 + at, y1 + at, w + at, kLayer ? b + at : b, n, f1, offset, opts);
    }
  }
  if (row < end) {  // an odd row out, in order
    const TX* x = RowPtr<TX>(a.x, a.x_stride, row);
    opts.next.aim<sizeof(TX), 0>(x, a.x_stride, nullptr, 0, 0, D);
    const XhatForm f = prepare(x, row);
    WriteRowCall<K>(dc, x, RowPtr<TX>(a.y, a.y_stride, row), w, b, D, f, offset, opts);
  }
}

// Rows [begin, end) with storage types TX (x, y), TR (residual, h), TP
// (weight, bias as read: the stored dtype, or Arranged) and compute type C.
// params_finite: every w + offset and b is finite (OutputOpts).
template <NormKind K, class C, class TX, class TR, class TP>
void ForwardRowLoop(const ForwardArgs& a, std::int64_t begin, std::int64_t end, ForwardStreams stream, const TP* w,
                    const TP* b, double offset, bool params_finite) {
  const hn::ScalableTag<C> dc;
  const std::size_t D = static_cast<std::size_t>(a.D);
  C* mean = static_cast<C*>(a.mean);
  C* rstd = static_cast<C*>(a.rstd);
  OutputOpts opts;
  opts.stream = stream.y;
  opts.params_finite = params_finite;
  if constexpr (std::is_same_v<TX, float>) {
    if (!a.residual && InterleavesRows<K, C>(stream, end - begin, D)) {
      PlainRowsInterleaved<K, C, TX>(a, begin, end, w, b, offset, opts);
      hwy::FlushStream();  // order the non-temporal stores before the join
      return;
    }
  }
  if constexpr (kMayPairRows<K, TX, TP>) {
    if (!a.residual && PairsRows<TP>(end - begin, D)) {
      PlainRowsPaired<K, C, TX>(a, begin, end, w, b, offset, opts);
      if (stream.y) hwy::FlushStream();  // order the non-temporal stores before the join
      return;
    }
  }
  if (!a.residual && end - begin > 1 && PipelinesRows<K, TX, TP>(D)) {  // one row: nothing to overlap
    PlainRowsPipelined<K, C, TX>(a, begin, end, w, b, offset, opts);
    if (stream.y) hwy::FlushStream();  // order the non-temporal stores before the join
    return;
  }
  C* kept = nullptr;  // the kept row of a streamed f16 h (kKeepsH), taken at its first use
  for (std::int64_t row = begin; row < end; ++row) {
    const TX* x = RowPtr<TX>(a.x, a.x_stride, row);
    TX* y = RowPtr<TX>(a.y, a.y_stride, row);
    C* mean_r = mean ? mean + row : nullptr;
    C* rstd_r = rstd ? rstd + row : nullptr;
    if (a.residual) {
      TR* h = RowPtr<TR>(a.h, a.h_stride, row);
      const TR* res = RowPtr<TR>(a.residual, a.residual_stride, row);
      opts.next.aim<sizeof(TX), sizeof(TR)>(x, a.x_stride, res, a.residual_stride, end - row - 1, D);
      // h streamed (fused_h_streams) where its row starts at the alignment
      // StreamPair needs (every pair of the row is then aligned): the output
      // pass forms h again from the cached x and residual, or reads an f16 h
      // kept widened (kKeepsH), instead of reading it back from memory.
      if (stream.h && StreamHead(h, StreamAlignment<kEvenOdd<TR>, TR>(dc), D) == 0) {
        // The kept row holds whole pairs: a tail pair is stored whole.
        if (kKeepsH<TR, true> && !kept)
          kept = static_cast<C*>(scratch_buffer((D + 2 * hn::Lanes(dc)) * sizeof(C), Scratch::kept_h));
        const RowStats st = FusedStatsOfRow<K, true>(dc, x, res, h, D, opts.next, kept);
        const auto src = [&] {
          if constexpr (kKeepsH<TR, true>) return KeptRow<C, TR>{kept};
          else return SumRow<TX, TR>{x, res};
        }();
        NormalizeRow<K>(dc, static_cast<const TR*>(h), src, st, y, w, b, D, a.eps, offset, mean_r, rstd_r, opts);
        continue;
      }
      const RowStats st = FusedStatsOfRow<K, false>(dc, x, res, h, D, opts.next);
      const TR* stored = h;
      NormalizeRow<K>(dc, stored, stored, st, y, w, b, D, a.eps, offset, mean_r, rstd_r, opts);
    } else {
      opts.next.aim<sizeof(TX), 0>(x, a.x_stride, nullptr, 0, end - row - 1, D);
      const RowStats st = StatsOfRow<K, false>(dc, x, D, C{1}, opts.next);
      NormalizeRow<K>(dc, x, x, st, y, w, b, D, a.eps, offset, mean_r, rstd_r, opts);
    }
  }
  if (stream.y || stream.h) hwy::FlushStream();  // order the non-temporal stores before the join
}

// Rows [begin, end) with storage types TX (x, y), TR (residual, h), TW
// (weight, bias) and compute type C: the parameters arranged once for the
// range where that pays (arrange-inl.hpp), else read as stored.
template <NormKind K, class C, class TX, class TR, class TW>
void ForwardRowsWithParams(const ForwardArgs& a, std::int64_t begin, std::int64_t end, ForwardStreams stream) {
  const TW* w = static_cast<const TW*>(a.weight);
  const TW* b = static_cast<const TW*>(a.bias);
  if constexpr (kArrange<C, TX, TW>) {
    const ArrangedRows<C> g = ArrangeForRows<kEvenOdd<TX>, ArrangedFor::forward>(
        hn::ScalableTag<C>(), end - begin, static_cast<std::size_t>(a.D), w, K == NormKind::layer_norm ? b : nullptr,
        static_cast<C>(a.weight_offset));
    if (g.w) return ForwardRowLoop<K, C, TX, TR>(a, begin, end, stream, g.w, g.b, 0.0, g.finite);
  }
  // Parameters read as stored: for bf16 rows, a pass over them finds whether
  // they are finite (WriteRow's NaN-free rows), as arranging would have,
  // where there are as many rows as arranging asks for.
  bool finite = false;
  if constexpr (kEvenOdd<TX>) {
    if (end - begin >= kArrangeMinRows)
      finite = ParamsFinite<kEvenOdd<TW>>(hn::ScalableTag<C>(), w, K == NormKind::layer_norm ? b : nullptr,
                                          static_cast<std::size_t>(a.D), static_cast<C>(a.weight_offset));
  }
  ForwardRowLoop<K, C, TX, TR>(a, begin, end, stream, w, b, a.weight_offset, finite);
}

// The valid (residual, weight) dtypes for 16-bit x: x's own or f32.
template <NormKind K, class TX>
void ForwardRowsOf16BitX(const ForwardArgs& a, std::int64_t begin, std::int64_t end, ForwardStreams stream) {
  const bool r32 = a.residual && a.res_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (r32 && w32) return ForwardRowsWithParams<K, float, TX, float, float>(a, begin, end, stream);
  if (r32) return ForwardRowsWithParams<K, float, TX, float, TX>(a, begin, end, stream);
  if (w32) return ForwardRowsWithParams<K, float, TX, TX, float>(a, begin, end, stream);
  return ForwardRowsWithParams<K, float, TX, TX, TX>(a, begin, end, stream);
}

// Rows [begin, end) of a forward of kind K, by x's dtype: f32 and f64 rows
// have parameters and residual of their own dtype, 16-bit rows may have f32
// ones. stream: which outputs take non-temporal stores (ForwardStreams).
template <NormKind K>
void ForwardRows(const ForwardArgs& a, std::int64_t begin, std::int64_t end, ForwardStreams stream) {
  switch (a.x_dtype) {
    case DType::f32: return ForwardRowsWithParams<K, float, float, float, float>(a, begin, end, stream);
    case DType::f64: return ForwardRowsWithParams<K, double, double, double, double>(a, begin, end, stream);
    case DType::f16: return ForwardRowsOf16BitX<K, hwy::float16_t>(a, begin, end, stream);
    case DType::bf16: return ForwardRowsOf16BitX<K, hwy::bfloat16_t>(a, begin, end, stream);
  }
}

}  // namespace

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_FORWARD_INL_HPP_
