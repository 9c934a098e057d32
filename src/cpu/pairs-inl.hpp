// Pairs of vectors: the unit every kernel loop steps by, in the consecutive
// layout or the even/odd layout of bf16 rows (below), with their tails.
// Compiled once per Highway target (see convert-inl.hpp).

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_PAIRS_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_PAIRS_INL_HPP_
#undef NORMKIT_CPU_PAIRS_INL_HPP_
#else
#define NORMKIT_CPU_PAIRS_INL_HPP_
#endif

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpu/convert-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

// Pairs: two vectors of compute lanes that hold 2·Lanes(dc) consecutive
// elements of a row, in one of two layouts chosen per loop (kEO):
//   false: a = elements [0, N), b = [N, 2N);
//   true:  a = the even-indexed elements, b = the odd-indexed ones.
// The second exists for bf16, whose value is the top half of an f32: one
// full-width integer load gives both halves with a shift and an AND, and a
// store rounds and packs both with integer work only (PackBf16Pair). The
// consecutive layout needs a widening shuffle per vector for that (and a
// narrowing one to store), and with one shuffle port on AVX-512 those
// shuffles were what limited the bf16 loops. Loops
// whose stored type is bf16 use the even/odd layout; their f32 operands are
// then split with ConcatEven/ConcatOdd. Elementwise results do not depend on
// the layout; sums over a row only associate differently.

template <class T>
inline constexpr bool kEvenOdd = std::is_same_v<T, hwy::bfloat16_t>;

template <class DC>
struct Pair {
  hn::Vec<DC> a, b;
};

// A bf16 pair in the even/odd layout from its 32-bit lanes (as loaded, or as
// PackBf16Pair packs them): the even element in the bottom half of a lane.
template <class DC>
HWY_INLINE Pair<DC> UnpackBf16Pair(DC dc, hn::Vec<hn::RebindToUnsigned<DC>> u) {
  const hn::RebindToUnsigned<DC> du;
  return {hn::BitCast(dc, hn::ShiftLeft<16>(u)), hn::BitCast(dc, hn::And(u, hn::Set(du, 0xffff0000u)))};
}

template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> LoadPair(DC dc, const T* HWY_RESTRICT p) {
  const std::size_t N = hn::Lanes(dc);
  if constexpr (!kEO) {
    return {LoadAs(dc, p), LoadAs(dc, p + N)};
  } else if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    static_assert(std::is_same_v<hn::TFromD<DC>, float>);
    return UnpackBf16Pair(dc, hn::LoadU(hn::RebindToUnsigned<DC>(), reinterpret_cast<const std::uint32_t*>(p)));
  } else {
    const auto lo = LoadAs(dc, p), hi = LoadAs(dc, p + N);
#if HWY_TARGET == HWY_SCALAR
    return {lo, hi};
#else
    return {hn::ConcatEven(dc, hi, lo), hn::ConcatOdd(dc, hi, lo)};
#endif
  }
}

// Stores the pair to 2·Lanes(dc) elements at p (rounding to nearest even)
// and returns it as stored. The even/odd layout stores bf16, and f32 for
// the parameter gradients of bf16 rows: those go through a buffer, element
// by element (Highway 1.0.3 interleaves only within 128-bit blocks), once
// per column per call. kNaNFree: v holds no NaN (see Bf16RoundedBits).
template <bool kEO, bool kNaNFree = false, class DC, class T>
HWY_INLINE Pair<DC> StorePair(DC dc, Pair<DC> v, T* HWY_RESTRICT p) {
  if constexpr (!kEO) {
    const std::size_t N = hn::Lanes(dc);
    return {StoreAs(dc, v.a, p), StoreAs(dc, v.b, p + N)};
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(std::is_same_v<hn::TFromD<DC>, float>);
    const std::size_t N = hn::Lanes(dc);
    HWY_ALIGN float even[kMaxLanes<float>], odd[kMaxLanes<float>];
    hn::Store(v.a, dc, even);
    hn::Store(v.b, dc, odd);
    for (std::size_t k = 0; k < N; ++k) {
      p[2 * k] = even[k];
      p[2 * k + 1] = odd[k];
    }
    return v;
  } else {
    static_assert(std::is_same_v<T, hwy::bfloat16_t>, "the even/odd layout stores bf16 and f32 only");
    const hn::RebindToUnsigned<DC> du;
    const auto packed = PackBf16Pair<kNaNFree>(dc, v.a, v.b);
    hn::StoreU(packed, du, reinterpret_cast<std::uint32_t*>(p));
    return UnpackBf16Pair(dc, packed);  // dead unless the caller uses it (the fused h)
  }
}

// Elements of T that StreamPair's p must be aligned to: the widest vector
// it stores, the whole pair where T is 16-bit (see StreamTwoAs).
template <bool kEO, class T, class DC>
HWY_INLINE std::size_t StreamAlignment(DC dc) {
  return (kEO || sizeof(T) < sizeof(hn::TFromD<DC>) ? 2 : 1) * hn::Lanes(dc);
}

// StorePair with non-temporal stores: p must be aligned to
// StreamAlignment<kEO, T>(dc) elements. Returns the pair as stored.
template <bool kEO, bool kNaNFree = false, class DC, class T>
HWY_INLINE Pair<DC> StreamPair(DC dc, Pair<DC> v, T* HWY_RESTRICT p) {
  if constexpr (!kEO) {
    StreamTwoAs(dc, v.a, v.b, p);
    return v;
  } else {
    static_assert(std::is_same_v<T, hwy::bfloat16_t>, "the even/odd layout stores bf16 only");
    const auto packed = PackBf16Pair<kNaNFree>(dc, v.a, v.b);
    hn::Stream(packed, hn::RebindToUnsigned<DC>(), reinterpret_cast<std::uint32_t*>(p));
    return UnpackBf16Pair(dc, packed);
  }
}

// The pair rounded to storage type T and widened back: what StorePair would
// store, without storing it.
template <bool kEO, class T, class DC>
HWY_INLINE Pair<DC> RoundPair(DC dc, Pair<DC> v) {
  if constexpr (kEO && std::is_same_v<T, hwy::bfloat16_t>) {
    return UnpackBf16Pair(dc, PackBf16Pair(dc, v.a, v.b));
  } else {
    return {RoundAs<T>(dc, v.a), RoundAs<T>(dc, v.b)};
  }
}

// The first n < 2·Lanes(dc) elements at p as a pair, zero-padded.
template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> LoadPairTail(DC dc, const T* HWY_RESTRICT p, std::size_t n) {
  HWY_ALIGN T buf[2 * kMaxLanes<hn::TFromD<DC>>];
  std::memset(static_cast<void*>(buf), 0, sizeof(buf));
  std::memcpy(static_cast<void*>(buf), p, n * sizeof(T));
  return LoadPair<kEO>(dc, buf);
}

// Stores the first n < 2·Lanes(dc) elements of v to p; returns v as stored.
template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> StorePairTail(DC dc, Pair<DC> v, T* HWY_RESTRICT p, std::size_t n) {
  HWY_ALIGN T buf[2 * kMaxLanes<hn::TFromD<DC>>];
  const Pair<DC> stored = StorePair<kEO>(dc, v, buf);
  std::memcpy(static_cast<void*>(p), buf, n * sizeof(T));
  return stored;
}

// Which lanes of a tail pair hold the first n < 2·Lanes(dc) elements.
template <bool kEO, class DC>
HWY_INLINE void PairTailMasks(DC dc, std::size_t n, hn::Mask<DC>& a, hn::Mask<DC>& b) {
  const std::size_t N = hn::Lanes(dc);
  if constexpr (kEO) {
    a = hn::FirstN(dc, (n + 1) / 2);
    b = hn::FirstN(dc, n / 2);
  } else {
    a = hn::FirstN(dc, std::min(n, N));
    b = hn::FirstN(dc, n > N ? n - N : 0);
  }
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_PAIRS_INL_HPP_
