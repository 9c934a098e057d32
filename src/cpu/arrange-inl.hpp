// Parameters arranged once per range of rows: weight + offset and bias
// converted to the compute type in the pair layout of the loops that read
// them, so a row pays no conversion for them. Compiled once per Highway
// target (see convert-inl.hpp).

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_ARRANGE_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_ARRANGE_INL_HPP_
#undef NORMKIT_CPU_ARRANGE_INL_HPP_
#else
#define NORMKIT_CPU_ARRANGE_INL_HPP_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/pairs-inl.hpp"
#include "cpu/scratch.hpp"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

// A parameter row arranged once per range of rows (ArrangeParams): values in
// the compute type, already in the pair layout of the loop that reads them,
// zero-padded to whole pairs plus one more zero pair. A pair of it is two
// plain loads in either layout, and its tail is loaded as a whole pair from
// where the tail starts: off the pair grid where the output pass peeled a
// head to stream y aligned (OutputRow), so it may reach into that last pair.
template <class C>
struct Arranged {
  C v;
};
template <class T>
inline constexpr bool kIsArranged = false;
template <class C>
inline constexpr bool kIsArranged<Arranged<C>> = true;

template <bool kEO, class DC, class C>
HWY_INLINE Pair<DC> LoadPair(DC dc, const Arranged<C>* HWY_RESTRICT p) {
  static_assert(std::is_same_v<C, hn::TFromD<DC>>);
  const std::size_t N = hn::Lanes(dc);
  return {hn::LoadU(dc, &p[0].v), hn::LoadU(dc, &p[N].v)};
}
template <bool kEO, class DC, class C>
HWY_INLINE Pair<DC> LoadPairTail(DC dc, const Arranged<C>* HWY_RESTRICT p, std::size_t /*n*/) {
  return LoadPair<kEO>(dc, p);
}

// Parameters are arranged (see Arranged) where that saves a conversion per
// row: 16-bit parameters, or f32 parameters of a bf16 row (whose even/odd
// loops would split them with shuffles); for at least kArrangeMinRows rows,
// so one row (a decode step) does not pay for a pass over the parameters;
// and up to a width per arranged row (ArrangeMaxRowBytes), past which the
// copy costs more than the conversions it saves.
template <class C, class TX, class TW>
inline constexpr bool kArrange = !std::is_same_v<TW, C> || kEvenOdd<TX>;
inline constexpr std::int64_t kArrangeMinRows = 4;

// The pass that reads the arranged parameters.
enum class ArrangedFor { forward, backward };

// The widest arranged row, in bytes, for compute type C and parameters TW:
// - 16 KiB (D <= 4096) on AVX-512 targets, and on every target for the
//   backward's 16-bit weights: there the arranged row, twice the stored one,
//   crowded L2 more than the conversions cost;
// - 256 KiB (D <= 65536, the widest measured) for the forward on AVX2 and
//   older targets, whose output pass converts half as many elements per
//   instruction, and for the backward's f32 weights of bf16 rows there,
//   whose arranged row takes no more room than the stored one.
// Measured in docs/kernels.md, "The affine x̂ and the arranged parameters".
template <class C, class TW>
constexpr std::size_t ArrangeMaxRowBytes(ArrangedFor pass) {
  constexpr std::size_t kNarrow = 16 * 1024, kWide = 256 * 1024;
  if (HWY_MAX_BYTES >= 64) return kNarrow;
  if (pass == ArrangedFor::forward || sizeof(TW) == sizeof(C)) return kWide;
  return kNarrow;
}

// Calls each(v, i, is_bias) with the vectors of gw = w + off and, if b is
// not null, of gb = b, pair by pair in layout kEO (i: the first element of
// v's lanes in that layout), in the compute type: the values the output
// pass forms from w and b itself (WriteRow), so nothing depends on whether
// they were arranged.
template <bool kEO, class DC, class TW, class Each>
HWY_INLINE void ForEachParamPair(DC dc, const TW* HWY_RESTRICT w, const TW* HWY_RESTRICT b, std::size_t D,
                                 hn::TFromD<DC> off, Each each) {
  const std::size_t N = hn::Lanes(dc);
  const std::size_t P = 2 * N;
  const auto Off = hn::Set(dc, off);
  auto load = [&](const TW* p, std::size_t i) HWY_ATTR {
    return D - i >= P ? LoadPair<kEO>(dc, p + i) : LoadPairTail<kEO>(dc, p + i, D - i);
  };
  for (std::size_t i = 0; i < D; i += P) {
    const Pair<DC> wv = load(w, i);
    each(off == 0 ? wv.a : hn::Add(wv.a, Off), i, false);
    each(off == 0 ? wv.b : hn::Add(wv.b, Off), i + N, false);
    if (b) {
      const Pair<DC> bv = load(b, i);
      each(bv.a, i, true);
      each(bv.b, i + N, true);
    }
  }
}

// Tracks whether every vector it is shown is finite: the largest exponent
// field, all ones only for Inf and NaN, at two integer operations per vector.
template <class DC>
class FiniteCheck {
 public:
  HWY_INLINE FiniteCheck()
      : exponent_(hn::BitCast(du_, hn::Set(DC(), std::numeric_limits<hn::TFromD<DC>>::infinity()))),
        widest_(hn::Zero(du_)) {}
  HWY_INLINE void operator()(hn::Vec<DC> v) { widest_ = hn::Max(widest_, hn::And(hn::BitCast(du_, v), exponent_)); }
  HWY_INLINE bool finite() const { return hn::AllFalse(du_, hn::Eq(widest_, exponent_)); }

 private:
  hn::RebindToUnsigned<DC> du_;
  hn::Vec<decltype(du_)> exponent_, widest_;
};

// gw = w + off and gb = b (if b is not null) as Arranged rows for loops of
// layout kEO (ForEachParamPair). Returns whether every value written is
// finite (the forward's NaN-free rows need it).
template <bool kEO, class DC, class TW>
HWY_NOINLINE bool ArrangeParams(DC dc, const TW* HWY_RESTRICT w, const TW* HWY_RESTRICT b, std::size_t D,
                                hn::TFromD<DC> off, Arranged<hn::TFromD<DC>>* HWY_RESTRICT gw,
                                Arranged<hn::TFromD<DC>>* HWY_RESTRICT gb) {
  FiniteCheck<DC> check;
  ForEachParamPair<kEO>(dc, w, b, D, off, [&](hn::Vec<DC> v, std::size_t i, bool is_bias) HWY_ATTR {
    check(v);
    hn::StoreU(v, dc, &(is_bias ? gb : gw)[i].v);
  });
  return check.finite();
}

// Whether every w + off and b (if b is not null) is finite, for rows whose
// parameters are not arranged: a pass over them, which pays where it spares
// enough rows a rounding case (WriteRow).
template <bool kEO, class DC, class TW>
HWY_NOINLINE bool ParamsFinite(DC dc, const TW* HWY_RESTRICT w, const TW* HWY_RESTRICT b, std::size_t D,
                               hn::TFromD<DC> off) {
  FiniteCheck<DC> check;
  ForEachParamPair<kEO>(dc, w, b, D, off, [&](hn::Vec<DC> v, std::size_t, bool) HWY_ATTR { check(v); });
  return check.finite();
}

// This thread's arranged weight (+ off) and, if b is not null, bias for
// `rows` rows of width D read by loops of layout kEO, in this thread's
// arranged_params scratch; both null where arranging does not pay
// (kArrangeMinRows, and ArrangeMaxRowBytes for the pass kPass).
template <class C>
struct ArrangedRows {
  const Arranged<C>* w = nullptr;
  const Arranged<C>* b = nullptr;
  bool finite = false;  // every value of w and b is finite
};
template <bool kEO, ArrangedFor kPass, class DC, class TW>
HWY_INLINE ArrangedRows<hn::TFromD<DC>> ArrangeForRows(DC dc, std::int64_t rows, std::size_t D, const TW* w,
                                                       const TW* b, hn::TFromD<DC> off) {
  using C = hn::TFromD<DC>;
  const std::size_t N = hn::Lanes(dc);
  const std::size_t padded = hwy::RoundUpTo(D, 2 * N);
  if (rows < kArrangeMinRows || padded * sizeof(C) > ArrangeMaxRowBytes<C, TW>(kPass)) return {};
  const std::size_t stride = padded + 2 * N;  // the zero pair a peeled tail may reach (Arranged)
  void* buffer = scratch_buffer((b ? 2 : 1) * stride * sizeof(C), Scratch::arranged_params);
  auto* gw = static_cast<Arranged<C>*>(buffer);
  Arranged<C>* gb = b ? gw + stride : nullptr;
  const bool finite = ArrangeParams<kEO>(dc, w, b, D, off, gw, gb);
  for (Arranged<C>* g : {gw, gb}) {
    if (!g) continue;
    hn::StoreU(hn::Zero(dc), dc, &g[padded].v);
    hn::StoreU(hn::Zero(dc), dc, &g[padded + N].v);
  }
  return {gw, gb, finite};
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_ARRANGE_INL_HPP_
