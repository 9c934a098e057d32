// Per-target building blocks shared by the forward and backward kernels:
// loading any storage dtype as compute lanes (f32, or f64 for f64 data),
// storing compute lanes back with round-to-nearest-even, zero-padded tails,
// and row scans. Compiled once per Highway target: include this after
// <hwy/highway.h> in a file that uses foreach_target.h.
//
// Storage types: float, double, hwy::float16_t, hwy::bfloat16_t. The 16-bit
// types are converted in registers and never used for arithmetic.

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_VEC_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_VEC_INL_HPP_
#undef NORMKIT_CPU_VEC_INL_HPP_
#else
#define NORMKIT_CPU_VEC_INL_HPP_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/introspect.hpp"
#include "cpu/scratch.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The F16C instructions (vcvtph2ps / vcvtps2ph) round to nearest even and
// handle subnormals, Inf and NaN exactly; Highway uses them on AVX2 and
// AVX-512. Highway 1.0.3's fallbacks for older targets truncate and mishandle
// Inf/NaN, so there we convert with the integer code below instead.
#undef NORMKIT_HW_F16
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define NORMKIT_HW_F16 1
#else
#define NORMKIT_HW_F16 0
#endif

// Most compute lanes of any target: tail buffers are sized by this.
template <class C>
inline constexpr std::size_t kMaxLanes = HWY_MAX_BYTES / sizeof(C);

// f16 bits (in the low half of u32 lanes) -> f32, exact for every input.
template <class DF>
HWY_INLINE hn::Vec<DF> F32FromF16Bits(DF df, hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto em = hn::And(h, hn::Set(du, 0x7fffu));
  // Normal and subnormal halves: the 15 magnitude bits placed at the top of an
  // f32 mantissa are the value times 2^-112 (a subnormal f32 for f16
  // subnormals), so one exact multiply rebiases the exponent.
  const auto finite = hn::BitCast(
      du, hn::Mul(hn::BitCast(df, hn::ShiftLeft<13>(em)), hn::Set(df, 0x1p112f)));
  const auto special = hn::Or(hn::ShiftLeft<13>(em), hn::Set(du, 0x7f800000u));  // Inf, NaN
  const auto is_special = hn::RebindMask(du, hn::Gt(hn::BitCast(di, em), hn::Set(di, 0x7bff)));
  return hn::BitCast(df, hn::Or(hn::IfThenElse(is_special, special, finite), sign));
}

// f32 -> f16 bits (low half of u32 lanes), round to nearest even; identical to
// normkit::to_f16 for every input.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> F16BitsFromF32(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const auto a = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto mag = hn::Abs(v);
  // Normal result: rebias the exponent, round the 13 dropped bits to even.
  const auto rebased = hn::Sub(a, hn::Set(du, 112u << 23));
  const auto round = hn::Add(hn::Set(du, 0xfffu), hn::And(hn::ShiftRight<13>(rebased), hn::Set(du, 1u)));
  const auto normal = hn::ShiftRight<13>(hn::Add(rebased, round));
  // Subnormal result: scale by 2^24 (exact) and let the FPU round to an
  // integer by adding 2^23, whose ulp is 1.
  const auto scaled = hn::Add(hn::Mul(mag, hn::Set(df, 0x1p24f)), hn::Set(df, 0x1p23f));
  const auto sub = hn::Sub(hn::BitCast(du, scaled), hn::Set(du, 0x4b000000u));
  auto bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(mag, hn::Set(df, 0x1p-14f))), sub, normal);
  bits = hn::IfThenElse(hn::RebindMask(du, hn::Ge(mag, hn::Set(df, 65520.0f))), hn::Set(du, 0x7c00u), bits);
  bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0x7e00u), bits);
  return hn::Or(bits, sign);
}

// f32 -> the nearest bf16 (ties to even), identical to normkit::to_bf16 for
// every input: the bf16 bits are the top half of each returned u32 lane, the
// bottom half is left over and must be discarded. Highway 1.0.3's
// DemoteTo(bf16) truncates, which would double the output error, so we round
// here. A NaN keeps its sign and top payload bits and gets the quiet bit
// (rounding could carry it into Inf). NaN is found with IsNaN: on AVX-512,
// 1.0.3's Ne is an ordered compare and is false for NaN.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16RoundedBits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb);
  const auto quiet_nan = hn::Or(u, hn::Set(du, 0x00400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
}

// f32 -> bf16 bits (low half of u32 lanes), rounded as Bf16RoundedBits.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16BitsFromF32(DF df, hn::Vec<DF> v) {
  return hn::ShiftRight<16>(Bf16RoundedBits(df, v));
}

// Two f32 vectors rounded to bf16 and packed into one vector of u32 lanes:
// the even-indexed bf16 from `even` in the bottom half of each lane, the
// odd-indexed from `odd` in the top half (little-endian memory order).
//
// On AVX-512 with the BF16 extension (g_bf16_instructions) one
// vcvtne2ps2bf16 rounds both vectors and a vpermw interleaves them: 2 vector
// instructions and a test instead of 16, which were half the arithmetic of a
// bf16 forward pass. Inf, NaN (quieted, payload kept) and overflow to Inf
// round as Bf16RoundedBits does, but the instruction flushes subnormal inputs
// to zero.
// A subnormal can only have become ±0, so a pair without a ±0 result is
// exact; one with a ±0 checks its inputs and, if a lane is subnormal, takes
// the integer path.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PackBf16Pair(DF df, hn::Vec<DF> even, hn::Vec<DF> odd) {
  const hn::RebindToUnsigned<DF> du;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if constexpr (hn::MaxLanes(DF()) == 16) {
    if (g_bf16_instructions) {
      __m512i halves;  // bf16 of even in words 0-15, of odd in words 16-31
      asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(odd.raw), "v"(even.raw));
      constexpr int kSubnormal = 0x20;  // vfpclassps category
      if (HWY_LIKELY(_mm512_testn_epi16_mask(halves, _mm512_set1_epi16(0x7fff)) == 0) ||
          _kortestz_mask16_u8(_mm512_fpclass_ps_mask(even.raw, kSubnormal),
                              _mm512_fpclass_ps_mask(odd.raw, kSubnormal))) {
        alignas(64) static constexpr std::uint16_t kInterleave[32] = {
            0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
        return hn::Vec<decltype(du)>{_mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), halves)};
      }
    }
  }
#endif
  return hn::OrAnd(hn::ShiftRight<16>(Bf16RoundedBits(df, even)), Bf16RoundedBits(df, odd),
                   hn::Set(du, 0xffff0000u));
}

// Loads Lanes(dc) elements of storage type T at p as compute lanes.
template <class DC, class T>
HWY_INLINE hn::Vec<DC> LoadAs(DC dc, const T* HWY_RESTRICT p) {
  using C = hn::TFromD<DC>;
  if constexpr (std::is_same_v<T, C>) {
    return hn::LoadU(dc, p);
  } else if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    static_assert(std::is_same_v<C, float>);
    return hn::PromoteTo(dc, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DC>(), p));
  } else {
    static_assert(std::is_same_v<T, hwy::float16_t> && std::is_same_v<C, float>);
#if NORMKIT_HW_F16
    return hn::PromoteTo(dc, hn::LoadU(hn::Rebind<hwy::float16_t, DC>(), p));
#else
    const hn::Rebind<std::uint16_t, DC> du16;
    const hn::RebindToUnsigned<DC> du32;
    const auto h = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const std::uint16_t*>(p)));
    return F32FromF16Bits(dc, h);
#endif
  }
}

// Stores v to Lanes(dc) elements of storage type T at p, rounding to nearest
// even, and returns the value as stored (widened back), so a caller that
// needs the rounded result (the fused h) does not reload it.
template <class DC, class T>
HWY_INLINE hn::Vec<DC> StoreAs(DC dc, hn::Vec<DC> v, T* HWY_RESTRICT p) {
  using C = hn::TFromD<DC>;
  if constexpr (std::is_same_v<T, C>) {
    hn::StoreU(v, dc, p);
    return v;
  } else {
    static_assert(std::is_same_v<C, float>);
    const hn::Rebind<std::uint16_t, DC> du16;
    const hn::RebindToUnsigned<DC> du32;
    const hn::RebindToSigned<DC> di32;
    hn::Vec<decltype(du32)> bits;
    if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
      bits = Bf16BitsFromF32(dc, v);
    } else {
      static_assert(std::is_same_v<T, hwy::float16_t>);
#if NORMKIT_HW_F16
      const hn::Rebind<hwy::float16_t, DC> df16;
      const auto h = hn::DemoteTo(df16, v);
      hn::StoreU(h, df16, p);
      return hn::PromoteTo(dc, h);
#else
      bits = F16BitsFromF32(dc, v);
#endif
    }
    // bits < 2^16, so the saturating i32 -> u16 narrowing is exact.
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, bits)), du16, reinterpret_cast<std::uint16_t*>(p));
    if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
      return hn::BitCast(dc, hn::ShiftLeft<16>(bits));
    } else {
      return F32FromF16Bits(dc, bits);
    }
  }
}

// StoreAs with a non-temporal store: p must be aligned to the stored
// vector's size. Used only for large outputs that will not be read back.
template <class DC, class T>
HWY_INLINE void StreamAs(DC dc, hn::Vec<DC> v, T* HWY_RESTRICT p) {
  using C = hn::TFromD<DC>;
  if constexpr (std::is_same_v<T, C>) {
    hn::Stream(v, dc, p);
  } else if constexpr (hn::MaxLanes(hn::Rebind<std::uint16_t, DC>()) * 2 < 16) {
    // The 16-bit vector is only part of a register (SSE4 and older): a
    // non-temporal store would write the whole register, so store normally.
    StoreAs(dc, v, p);
  } else {
    static_assert(std::is_same_v<C, float>);
    const hn::Rebind<std::uint16_t, DC> du16;
    hn::Vec<decltype(du16)> bits16;
    if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
      bits16 = hn::DemoteTo(du16, hn::BitCast(hn::RebindToSigned<DC>(), Bf16BitsFromF32(dc, v)));
    } else {
#if NORMKIT_HW_F16
      bits16 = hn::BitCast(du16, hn::DemoteTo(hn::Rebind<hwy::float16_t, DC>(), v));
#else
      bits16 = hn::DemoteTo(du16, hn::BitCast(hn::RebindToSigned<DC>(), F16BitsFromF32(dc, v)));
#endif
    }
    hn::Stream(bits16, du16, reinterpret_cast<std::uint16_t*>(p));
  }
}

// The first n < Lanes(dc) elements at p, zero-padded. Copies through a small
// buffer so nothing past the end of the row is touched.
template <class DC, class T>
HWY_INLINE hn::Vec<DC> LoadTail(DC dc, const T* HWY_RESTRICT p, std::size_t n) {
  HWY_ALIGN T buf[kMaxLanes<hn::TFromD<DC>>];
  std::memset(static_cast<void*>(buf), 0, sizeof(buf));
  std::memcpy(static_cast<void*>(buf), p, n * sizeof(T));
  return LoadAs(dc, buf);
}

// Stores the first n < Lanes(dc) lanes of v to p; returns v as stored.
template <class DC, class T>
HWY_INLINE hn::Vec<DC> StoreTail(DC dc, hn::Vec<DC> v, T* HWY_RESTRICT p, std::size_t n) {
  HWY_ALIGN T buf[kMaxLanes<hn::TFromD<DC>>];
  const auto stored = StoreAs(dc, v, buf);
  std::memcpy(static_cast<void*>(p), buf, n * sizeof(T));
  return stored;
}

// ---------------------------------------------------------------------------
// Pairs: two vectors of compute lanes that hold 2·Lanes(dc) consecutive
// elements of a row, in one of two layouts chosen per loop (kEO):
//   false: a = elements [0, N), b = [N, 2N);
//   true:  a = the even-indexed elements, b = the odd-indexed ones.
// The second exists for bf16, whose value is the top half of an f32: one
// full-width integer load gives both halves with a shift and an AND, and a
// store packs two rounded halves with a shift and one bitwise op. The
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

template <bool kEO, class DC, class T>
HWY_INLINE Pair<DC> LoadPair(DC dc, const T* HWY_RESTRICT p) {
  const std::size_t N = hn::Lanes(dc);
  if constexpr (!kEO) {
    return {LoadAs(dc, p), LoadAs(dc, p + N)};
  } else if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    static_assert(std::is_same_v<hn::TFromD<DC>, float>);
    const hn::RebindToUnsigned<DC> du;
    const auto u = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
    return {hn::BitCast(dc, hn::ShiftLeft<16>(u)), hn::BitCast(dc, hn::And(u, hn::Set(du, 0xffff0000u)))};
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
// per column per call.
template <bool kEO, class DC, class T>
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
    const auto packed = PackBf16Pair(dc, v.a, v.b);
    hn::StoreU(packed, du, reinterpret_cast<std::uint32_t*>(p));
    // The stored values, dead unless the caller uses them (the fused h).
    return {hn::BitCast(dc, hn::ShiftLeft<16>(packed)), hn::BitCast(dc, hn::And(packed, hn::Set(du, 0xffff0000u)))};
  }
}

// StorePair with non-temporal stores: p must be aligned to 2·Lanes(dc)
// elements of T.
template <bool kEO, class DC, class T>
HWY_INLINE void StreamPair(DC dc, Pair<DC> v, T* HWY_RESTRICT p) {
  if constexpr (!kEO) {
    const std::size_t N = hn::Lanes(dc);
    StreamAs(dc, v.a, p);
    StreamAs(dc, v.b, p + N);
  } else {
    static_assert(std::is_same_v<T, hwy::bfloat16_t>, "the even/odd layout stores bf16 only");
    hn::Stream(PackBf16Pair(dc, v.a, v.b), hn::RebindToUnsigned<DC>(), reinterpret_cast<std::uint32_t*>(p));
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

// A parameter row arranged once per range of rows (ArrangeParams in
// forward-inl.hpp): values in the compute type, already in the pair layout of
// the loop that reads them, zero-padded to whole pairs. A pair of it is two
// plain loads in either layout, and its tail is the whole padded pair.
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
// and up to kArrangeMaxRowBytes per arranged row. Arranged f32 rows are twice
// the 16-bit ones, and wider ones cost more L2 room than the conversions
// they save: bf16 and f16 LayerNorm at D = 4096 gained 1-11 points of the
// ceiling beyond cache and 5-26% in L2, at D = 8192 to 65536 they lost 2-10
// points beyond cache (docs/kernels.md).
template <class C, class TX, class TW>
inline constexpr bool kArrange = !std::is_same_v<TW, C> || kEvenOdd<TX>;
inline constexpr std::int64_t kArrangeMinRows = 4;
inline constexpr std::size_t kArrangeMaxRowBytes = 16 * 1024;

inline bool ArrangesParams(std::int64_t rows, std::size_t arranged_row_bytes) {
  return rows >= kArrangeMinRows && arranged_row_bytes <= kArrangeMaxRowBytes;
}

// gw = w + off and gb = b (if b is not null) as Arranged rows for loops of
// layout kEO, in the compute type: the same values the loops would form
// from w and b themselves, so results do not depend on the arrangement.
template <bool kEO, class DC, class TW>
HWY_NOINLINE void ArrangeParams(DC dc, const TW* HWY_RESTRICT w, const TW* HWY_RESTRICT b, std::size_t D,
                                hn::TFromD<DC> off, Arranged<hn::TFromD<DC>>* HWY_RESTRICT gw,
                                Arranged<hn::TFromD<DC>>* HWY_RESTRICT gb) {
  const std::size_t N = hn::Lanes(dc);
  const std::size_t P = 2 * N;
  const auto Off = hn::Set(dc, off);
  auto load = [&](const TW* p, std::size_t i) HWY_ATTR {
    return D - i >= P ? LoadPair<kEO>(dc, p + i) : LoadPairTail<kEO>(dc, p + i, D - i);
  };
  for (std::size_t i = 0; i < D; i += P) {
    const Pair<DC> wv = load(w, i);
    hn::StoreU(hn::Add(wv.a, Off), dc, &gw[i].v);
    hn::StoreU(hn::Add(wv.b, Off), dc, &gw[i + N].v);
    if (b) {
      const Pair<DC> bv = load(b, i);
      hn::StoreU(bv.a, dc, &gb[i].v);
      hn::StoreU(bv.b, dc, &gb[i + N].v);
    }
  }
}

// This thread's arranged weight (+ off) and, if b is not null, bias for
// `rows` rows of width D read by loops of layout kEO, in scratch slot 2; both
// null where arranging does not pay (ArrangesParams).
template <class C>
struct ArrangedRows {
  const Arranged<C>* w = nullptr;
  const Arranged<C>* b = nullptr;
};
template <bool kEO, class DC, class TW>
HWY_INLINE ArrangedRows<hn::TFromD<DC>> ArrangeForRows(DC dc, std::int64_t rows, std::size_t D, const TW* w,
                                                       const TW* b, hn::TFromD<DC> off) {
  using C = hn::TFromD<DC>;
  const std::size_t padded = hwy::RoundUpTo(D, 2 * hn::Lanes(dc));
  if (!ArrangesParams(rows, padded * sizeof(C))) return {};
  auto* gw = static_cast<Arranged<C>*>(scratch_buffer((b ? 2 : 1) * padded * sizeof(C), 2));
  Arranged<C>* gb = b ? gw + padded : nullptr;
  ArrangeParams<kEO>(dc, w, b, D, off, gw, gb);
  return {gw, gb};
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

// The next rows' inputs (one or two arrays), fetched while this row is
// processed, so the next row's first pass finds them in cache. Memory should
// never wait for the loops, so the fetches are spread over the row: the
// first and the last pass over this row each fetch half a row, in step with
// their progress. Fetching it all in the last pass leaves the memory idle
// during the first: on this machine LayerNorm f32 at D = 16384 ran at 62-65%
// of the ceiling that way, 68-70% with the fetches spread.
//
// Rows of up to kNearAheadBytes (all arrays together) are fetched at two
// distances: the row after next from memory into L2, and the next row from
// L2 into L1. A short row's first pass is over before the L1 prefetcher has
// followed it, so it waited on L2: in cache, f32 RMSNorm at D = 768 ran at
// 58-59% of the ceiling, 70-71% with the fetch into L1; beyond cache, bf16
// LayerNorm and RMSNorm at D = 768 went from 67-70% to 76-82%. Fetching the
// next row from memory straight into L1 instead lost 5-7 points beyond cache
// (L1 has few miss buffers, and each holds a line for a whole memory
// latency); wider rows gained nothing in cache and lost up to 5 points
// beyond it. See docs/kernels.md.
//
// Wider rows fetch only the next row, into L2, and only while no array's
// row exceeds kMaxAheadBytes: the current row's inputs must stay in L2 until
// its last pass, next to the parameters (and the backward's
// parameter-gradient partials). Measured beyond cache on one thread, as % of
// the ceiling (two runs each), fetched against not fetched:
//   forward f32, D = 65536 (one 256 KiB array): LayerNorm 72-74 against
//     78-80, RMSNorm 75-76 against 84-86;
//   forward bf16, D = 65536 (one 128 KiB array): LayerNorm 72-74 against
//     59-60, RMSNorm 78-84 against 66;
//   backward bf16, D = 65536 (two 128 KiB arrays): 63-65 against 53-54;
//   backward f32, D = 65536 (two 256 KiB arrays): 47-58 against 65-85 when
//     first measured.
// So the limit is per array, not per row of all arrays together.
//
// A row with a wider array is fetched from within: the first pass fetches
// its own row kInRowAheadBytes (a page) ahead of where it reads, into L2,
// and stops at the row's end. The L2 hardware prefetcher does not cross a
// 4 KiB page, so without this every page of a 256 KiB row started with
// misses that waited on memory. Beyond cache, f32 at D = 65536, GB/s in
// interleaved calls (not fetched / a page ahead; three runs on one thread,
// two on two): LayerNorm forward 10.7-10.8 / 11.8-12.3 on one thread,
// 19.9-20.1 / 23.2-24.0 on two; its backward 9.5-10.0 / 10.1-10.8 and
// 18.4-19.4 / 20.2-20.5; RMSNorm 12.0-13.2 / 11.3-13.0 and 23.4-24.3 /
// 25.5-25.8; add+RMSNorm 11.7-12.9 / 11.9-12.7 and 24.3-24.7 / 25.2.
// 1-2 KiB ahead gained less on two threads, 8-32 KiB no more on one.
inline constexpr std::size_t kNearAheadBytes = 4 * 1024;
inline constexpr std::size_t kMaxAheadBytes = 128 * 1024;
inline constexpr std::size_t kInRowAheadBytes = 4 * 1024;

struct NextRows {
  const char* p0 = nullptr;  // cursor in a later row of the first array (into L2); null: none
  const char* p1 = nullptr;  // the same in a second array, or null
  const char* n0 = nullptr;  // cursor in the next row of the first array (into L1); null: none
  const char* n1 = nullptr;
  const char* e0 = nullptr;  // non-null: p0 and p1 run ahead in this row, up to its end e0 and e1
  const char* e1 = nullptr;

  // Aims the cursors for the rows after this one. row0/row1: this row of one
  // or two arrays (row1 null and S1 0 for one) of S0- and S1-byte elements,
  // stride0/stride1 the elements between their rows, `after` the rows that
  // follow this one in the range, D the elements of a row.
  template <std::size_t S0, std::size_t S1>
  void aim(const void* row0, std::int64_t stride0, const void* row1, std::int64_t stride1, std::int64_t after,
           std::size_t D) {
    const char* a = static_cast<const char*>(row0);
    const char* b = static_cast<const char*>(row1);
    const std::ptrdiff_t step0 = stride0 * std::ptrdiff_t{S0}, step1 = stride1 * std::ptrdiff_t{S1};
    p0 = p1 = n0 = n1 = nullptr;
    e0 = e1 = nullptr;
    if (D * std::max(S0, S1) > kMaxAheadBytes) {  // a wide row: fetched from within
      p0 = a + kInRowAheadBytes;
      e0 = a + D * S0;
      if (b) {
        p1 = b + kInRowAheadBytes;
        e1 = b + D * S1;
      }
      return;
    }
    if (after < 1) return;
    if (D * (S0 + S1) <= kNearAheadBytes) {
      n0 = a + step0;
      n1 = b ? b + step1 : nullptr;
      if (after < 2) return;
      p0 = a + 2 * step0;
      p1 = b ? b + 2 * step1 : nullptr;
    } else {
      p0 = a + step0;
      p1 = b ? b + step1 : nullptr;
    }
  }

  // Fetches `bytes` from p on (into L1 for kLocality 3, L2 for 2), moving p.
  template <int kLocality>
  static HWY_INLINE void fetch(const char*& p, std::size_t bytes) {
    if (!p) return;
    for (std::size_t k = 0; k < bytes; k += 64) __builtin_prefetch(p + k, 0, kLocality);
    p += bytes;
  }

  // fetch<2> of at most the bytes left before e (a wide row's end); p
  // becomes null there.
  static HWY_INLINE void fetch_before(const char*& p, const char* e, std::size_t bytes) {
    if (!p) return;
    fetch<2>(p, std::min(bytes, static_cast<std::size_t>(e - p)));
    if (p >= e) p = nullptr;
  }

  // A pass over this row has covered n more elements; the arrays' elements
  // have S0 and S1 bytes. Fetches the next n/2 elements' lines of each
  // array at each distance; in a wide row, the n elements' lines a page
  // ahead (the first pass covers the row, the later passes find the cursors
  // at its end).
  template <std::size_t S0, std::size_t S1>
  HWY_INLINE void advance(std::size_t n) {
    // Nothing to fetch: one row, the last, or a wide row's later passes. The
    // early return keeps a one-row call as fast as before the wide rows'
    // cursors: f32 LayerNorm, one row of 768, 0.165-0.182 µs before them,
    // 0.176-0.190 µs with them, 0.173-0.182 µs with this (five alternating
    // runs each).
    if (!p0 && !n0) return;
    if (e0) {
      fetch_before(p0, e0, n * S0);
      if constexpr (S1 != 0) fetch_before(p1, e1, n * S1);
      return;
    }
    fetch<2>(p0, n * S0 / 2);
    fetch<3>(n0, n * S0 / 2);
    if constexpr (S1 != 0) {
      fetch<2>(p1, n * S1 / 2);
      fetch<3>(n1, n * S1 / 2);
    }
  }
};

// Row r of an array whose rows are `stride` elements apart.
template <class T>
const T* RowPtr(const void* base, std::int64_t stride, std::int64_t r) {
  return static_cast<const T*>(base) + r * stride;
}
template <class T>
T* RowPtr(void* base, std::int64_t stride, std::int64_t r) {
  return static_cast<T*>(base) + r * stride;
}

// Elements to write with ordinary stores at the start of a row of n
// elements at p before StreamPair can take over: up to the first address
// aligned to a pair of vectors (`pair` elements of T).
template <class T>
std::size_t StreamHead(const T* p, std::size_t pair, std::size_t n) {
  const std::size_t bytes = pair * sizeof(T);
  return std::min(n, ((bytes - reinterpret_cast<std::uintptr_t>(p) % bytes) % bytes) / sizeof(T));
}

// Sum of all lanes, widened to double.
template <class DC>
HWY_INLINE double SumToDouble(DC dc, hn::Vec<DC> v) {
  return static_cast<double>(hn::GetLane(hn::SumOfLanes(dc, v)));
}

// Whether every element of the row is finite (a slow path: only called for a
// row whose statistics came out non-finite).
template <class DC, class T>
HWY_NOINLINE bool RowIsFinite(DC dc, const T* HWY_RESTRICT p, std::size_t n) {
  const std::size_t N = hn::Lanes(dc);
  std::size_t i = 0;
  for (; i + N <= n; i += N)
    if (!hn::AllTrue(dc, hn::IsFinite(LoadAs(dc, p + i)))) return false;
  if (i < n && !hn::AllTrue(dc, hn::IsFinite(LoadTail(dc, p + i, n - i)))) return false;
  return true;
}

// max |x| over a row of finite values (slow path, as above).
template <class DC, class T>
HWY_NOINLINE double RowMaxAbs(DC dc, const T* HWY_RESTRICT p, std::size_t n) {
  const std::size_t N = hn::Lanes(dc);
  auto m = hn::Zero(dc);
  std::size_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::Abs(LoadAs(dc, p + i)));
  if (i < n) m = hn::Max(m, hn::Abs(LoadTail(dc, p + i, n - i)));
  return static_cast<double>(hn::GetLane(hn::MaxOfLanes(dc, m)));
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_VEC_INL_HPP_
