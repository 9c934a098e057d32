// Loading any storage dtype as compute lanes (f32, or f64 for f64 data) and
// storing compute lanes back with round-to-nearest-even, whole vectors and
// zero-padded tails. Compiled once per Highway target: include this after
// <hwy/highway.h> in a file that uses foreach_target.h.
//
// Storage types: float, double, hwy::float16_t, hwy::bfloat16_t. The 16-bit
// types are converted in registers and never used for arithmetic.

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_CONVERT_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_CONVERT_INL_HPP_
#undef NORMKIT_CPU_CONVERT_INL_HPP_
#else
#define NORMKIT_CPU_CONVERT_INL_HPP_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/introspect.hpp"
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
// kNaNFree: the caller knows v holds no NaN (the forward's NaN-free rows,
// forward-inl.hpp), so the NaN case is left out: 4 integer operations per vector instead of 7.
// Inf and overflow to Inf round the same either way.
template <bool kNaNFree = false, class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Bf16RoundedBits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), lsb);
  if constexpr (kNaNFree) return rounded;
  const auto quiet_nan = hn::Or(u, hn::Set(du, 0x00400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded);
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
// the integer path. kNaNFree: see Bf16RoundedBits.
template <bool kNaNFree = false, class DF>
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
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4
  // The rounding runs once on the packed words instead of once per vector:
  // 9 operations per pair instead of 11 (14 instead of 17 with the NaN
  // case), 2 of them shifts instead of 5. Each lane's two words are the even
  // and the odd element's: `top` the bf16 that truncation would give, `low`
  // the bits that rounding drops.
  const hn::Repartition<std::uint16_t, DF> dw;
  const hn::RebindToSigned<decltype(dw)> dsw;
  const auto ue = hn::BitCast(du, even), uo = hn::BitCast(du, odd);
  const auto top = hn::OddEven(hn::BitCast(dw, uo), hn::BitCast(dw, hn::ShiftRight<16>(ue)));
  const auto low = hn::OddEven(hn::BitCast(dw, hn::ShiftLeft<16>(uo)), hn::BitCast(dw, ue));
  // Round to nearest even: top + 1 where low + (top & 1) > 0x8000, tested as
  // the signed (low − 0x8000) +sat (top & 1) > 0. This is Bf16RoundedBits'
  // carry out of the bottom half, so the words are its top halves.
  const auto lsb = hn::And(top, hn::Set(dw, 1));
  const auto centred = hn::BitCast(dsw, hn::Xor(low, hn::Set(dw, 0x8000)));
  const auto up = hn::Gt(hn::SaturatedAdd(centred, hn::BitCast(dsw, lsb)), hn::Zero(dsw));
  auto words = hn::Sub(top, hn::BitCast(dw, hn::VecFromMask(dsw, up)));
  if constexpr (!kNaNFree) {  // a NaN: its top half with the quiet bit set
    const auto nan = hn::OddEven(hn::BitCast(dw, hn::VecFromMask(df, hn::IsNaN(odd))),
                                 hn::BitCast(dw, hn::VecFromMask(df, hn::IsNaN(even))));
    words = hn::IfThenElse(hn::MaskFromVec(nan), hn::Or(top, hn::Set(dw, 0x0040)), words);
  }
  return hn::BitCast(du, words);
#else
  // Each vector rounded alone: AVX-512 merges the halves with one
  // ternary-logic instruction (10 operations per pair either way, fewer with
  // the NaN case), and SSSE3 has no 16-bit blend.
  return hn::OrAnd(hn::ShiftRight<16>(Bf16RoundedBits<kNaNFree>(df, even)), Bf16RoundedBits<kNaNFree>(df, odd),
                   hn::Set(du, 0xffff0000u));
#endif
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

// 16-bit values held in u32 lanes, narrowed to u16 lanes: they are < 2^16,
// so the saturating i32 -> u16 narrowing is exact.
template <class D16>
HWY_INLINE hn::Vec<D16> Narrow16(D16 d16, hn::Vec<hn::Rebind<std::uint32_t, D16>> bits) {
  return hn::DemoteTo(d16, hn::BitCast(hn::Rebind<std::int32_t, D16>(), bits));
}

// A value rounded to a 16-bit dtype: the bits to store, one per u16 lane,
// and the value they hold, widened back (RoundTo16).
template <class DC>
struct Rounded16 {
  hn::Vec<hn::Rebind<std::uint16_t, DC>> bits;
  hn::Vec<DC> value;
};

// v rounded to nearest even as the 16-bit storage type T. Each target
// computes the bits and the value from the same rounding, so a caller that
// needs the rounded value (the fused h) does not reload it; a caller that
// needs only one of the two gets the other removed as dead code.
template <class T, class DC>
HWY_INLINE Rounded16<DC> RoundTo16(DC dc, hn::Vec<DC> v) {
  static_assert(std::is_same_v<hn::TFromD<DC>, float>);
  const hn::Rebind<std::uint16_t, DC> du16;
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    const auto r = Bf16RoundedBits(dc, v);
    return {Narrow16(du16, hn::ShiftRight<16>(r)),
            hn::BitCast(dc, hn::And(r, hn::Set(hn::RebindToUnsigned<DC>(), 0xffff0000u)))};
  } else {
    static_assert(std::is_same_v<T, hwy::float16_t>);
#if NORMKIT_HW_F16
    const auto h = hn::DemoteTo(hn::Rebind<hwy::float16_t, DC>(), v);
    return {hn::BitCast(du16, h), hn::PromoteTo(dc, h)};
#else
    const auto bits = F16BitsFromF32(dc, v);
    return {Narrow16(du16, bits), F32FromF16Bits(dc, bits)};
#endif
  }
}

// Stores v to Lanes(dc) elements of storage type T at p, rounding to nearest
// even, and returns the value as stored (widened back).
template <class DC, class T>
HWY_INLINE hn::Vec<DC> StoreAs(DC dc, hn::Vec<DC> v, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<DC>>) {
    hn::StoreU(v, dc, p);
    return v;
  } else {
    const Rounded16<DC> r = RoundTo16<T>(dc, v);
    hn::StoreU(r.bits, hn::Rebind<std::uint16_t, DC>(), reinterpret_cast<std::uint16_t*>(p));
    return r.value;
  }
}

// StoreAs of two vectors with non-temporal stores, lo to the Lanes(dc)
// elements at p and hi to the Lanes(dc) after them; both are returned as
// stored. Used only for large outputs that will not be read back. p must be
// aligned to the vectors stored: Lanes(dc) elements where T is the compute
// type, 2·Lanes(dc) for f16, whose two rounded halves are joined and
// written by one store. Two half-vector stores leave a line's
// write-combining buffer half full between them, and with several input
// streams in flight the buffer was at times flushed half written, which
// costs a read-modify-write of the line in memory (docs/kernels.md, "Whole
// lines for non-temporal stores").
template <class DC, class T>
HWY_INLINE void StreamTwoAs(DC dc, hn::Vec<DC>& lo, hn::Vec<DC>& hi, T* HWY_RESTRICT p) {
  if constexpr (std::is_same_v<T, hn::TFromD<DC>>) {
    hn::Stream(lo, dc, p);
    hn::Stream(hi, dc, p + hn::Lanes(dc));
  } else {
    static_assert(std::is_same_v<T, hwy::float16_t>, "bf16 is streamed in the even/odd layout (StreamPair)");
    // The joined pair fills at least a 128-bit register, which every target
    // but the scalar one (one element per vector: a 4-byte pair) can stream.
#if HWY_TARGET == HWY_SCALAR
    lo = StoreAs(dc, lo, p);
    hi = StoreAs(dc, hi, p + hn::Lanes(dc));
#else
    const Rounded16<DC> rlo = RoundTo16<T>(dc, lo), rhi = RoundTo16<T>(dc, hi);
    const hn::Twice<hn::Rebind<std::uint16_t, DC>> dw;  // the joined pair's u16 lanes
    hn::Stream(hn::Combine(dw, rhi.bits, rlo.bits), dw, reinterpret_cast<std::uint16_t*>(p));
    lo = rlo.value;
    hi = rhi.value;
#endif
  }
}

// v rounded to storage type T and widened back: the value StoreAs would
// store, without storing it.
template <class T, class DC>
HWY_INLINE hn::Vec<DC> RoundAs(DC dc, hn::Vec<DC> v) {
  if constexpr (std::is_same_v<T, hn::TFromD<DC>>) {
    return v;
  } else {
    return RoundTo16<T>(dc, v).value;
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

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_CONVERT_INL_HPP_
