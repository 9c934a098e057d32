#include "measure/stream.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "normkit/half.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "measure/stream.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace normkit::measure {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

std::uint64_t ReadSum(const std::byte* p, std::size_t bytes) {
  const hn::ScalableTag<std::uint64_t> d;
  const std::size_t N = hn::Lanes(d);
  const auto* w = reinterpret_cast<const std::uint64_t*>(p);
  const std::size_t words = bytes / sizeof(std::uint64_t);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  std::size_t i = 0;
  for (; i + 4 * N <= words; i += 4 * N) {
    a0 = hn::Add(a0, hn::LoadU(d, w + i));
    a1 = hn::Add(a1, hn::LoadU(d, w + i + N));
    a2 = hn::Add(a2, hn::LoadU(d, w + i + 2 * N));
    a3 = hn::Add(a3, hn::LoadU(d, w + i + 3 * N));
  }
  // Lanes summed in unsigned scalar code: the AVX-512 reduction intrinsic
  // behind SumOfLanes adds as signed 64-bit, which overflows (UB) here.
  HWY_ALIGN std::uint64_t lanes[hn::MaxLanes(d)];
  hn::Store(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), d, lanes);
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < N; ++k) sum += lanes[k];
  for (; i < words; ++i) sum += w[i];
  for (std::size_t b = words * sizeof(std::uint64_t); b < bytes; ++b)
    sum += static_cast<std::uint8_t>(p[b]);
  return sum;
}

void VectorCopy(std::byte* dst, const std::byte* src, std::size_t bytes) {
  const hn::ScalableTag<std::uint8_t> d;
  const std::size_t N = hn::Lanes(d);
  auto* o = reinterpret_cast<std::uint8_t*>(dst);
  const auto* s = reinterpret_cast<const std::uint8_t*>(src);
  std::size_t i = 0;
  for (; i + 4 * N <= bytes; i += 4 * N) {
    const auto v0 = hn::LoadU(d, s + i), v1 = hn::LoadU(d, s + i + N);
    const auto v2 = hn::LoadU(d, s + i + 2 * N), v3 = hn::LoadU(d, s + i + 3 * N);
    hn::StoreU(v0, d, o + i);
    hn::StoreU(v1, d, o + i + N);
    hn::StoreU(v2, d, o + i + 2 * N);
    hn::StoreU(v3, d, o + i + 3 * N);
  }
  if (i < bytes) std::memcpy(o + i, s + i, bytes - i);
}

void StreamCopy(std::byte* dst, const std::byte* src, std::size_t bytes) {
  const hn::ScalableTag<std::uint8_t> d;
  const std::size_t N = hn::Lanes(d);
  auto* o = reinterpret_cast<std::uint8_t*>(dst);
  const auto* s = reinterpret_cast<const std::uint8_t*>(src);
  // Non-temporal stores need aligned destinations: copy up to the first.
  std::size_t i = std::min(bytes, (N - reinterpret_cast<std::uintptr_t>(o) % N) % N);
  std::memcpy(o, s, i);
  for (; i + 4 * N <= bytes; i += 4 * N) {
    const auto v0 = hn::LoadU(d, s + i), v1 = hn::LoadU(d, s + i + N);
    const auto v2 = hn::LoadU(d, s + i + 2 * N), v3 = hn::LoadU(d, s + i + 3 * N);
    hn::Stream(v0, d, o + i);
    hn::Stream(v1, d, o + i + N);
    hn::Stream(v2, d, o + i + 2 * N);
    hn::Stream(v3, d, o + i + 3 * N);
  }
  if (i < bytes) std::memcpy(o + i, s + i, bytes - i);
  hwy::FlushStream();
}

// bf16 <-> f32 by bit shifts: bf16 is the top half of an f32. Rounding to
// nearest even adds 0x7fff plus the lowest kept bit before truncating (the
// inputs here are finite, so NaN needs no special case).
template <class DF>
hn::Vec<DF> LoadBF16(DF df, const std::uint16_t* p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<std::uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

template <class DF>
void StoreBF16(DF /*df*/, hn::Vec<DF> v, std::uint16_t* p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb)));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, rounded)), du16, p);
}

void Add(DType t, const void* a, const void* b, void* out, std::size_t n) {
  const hn::ScalableTag<float> df;
  const std::size_t N = hn::Lanes(df);
  std::size_t i = 0;
  switch (t) {
    case DType::f32: {
      const auto* pa = static_cast<const float*>(a);
      const auto* pb = static_cast<const float*>(b);
      auto* po = static_cast<float*>(out);
      for (; i + N <= n; i += N)
        hn::StoreU(hn::Add(hn::LoadU(df, pa + i), hn::LoadU(df, pb + i)), df, po + i);
      for (; i < n; ++i) po[i] = pa[i] + pb[i];
      return;
    }
    case DType::bf16: {
      const auto* pa = static_cast<const std::uint16_t*>(a);
      const auto* pb = static_cast<const std::uint16_t*>(b);
      auto* po = static_cast<std::uint16_t*>(out);
      for (; i + N <= n; i += N)
        StoreBF16(df, hn::Add(LoadBF16(df, pa + i), LoadBF16(df, pb + i)), po + i);
      const auto* sa = static_cast<const bfloat16_t*>(a);
      const auto* sb = static_cast<const bfloat16_t*>(b);
      auto* so = static_cast<bfloat16_t*>(out);
      for (; i < n; ++i) so[i] = to_bf16(to_float(sa[i]) + to_float(sb[i]));
      return;
    }
    case DType::f16: {
      // hwy::float16_t and normkit::half_t are both 16 bits of IEEE binary16.
      const hn::Rebind<hwy::float16_t, decltype(df)> dh;
      const auto* pa = static_cast<const hwy::float16_t*>(a);
      const auto* pb = static_cast<const hwy::float16_t*>(b);
      auto* po = static_cast<hwy::float16_t*>(out);
      for (; i + N <= n; i += N) {
        const auto sum = hn::Add(hn::PromoteTo(df, hn::LoadU(dh, pa + i)),
                                 hn::PromoteTo(df, hn::LoadU(dh, pb + i)));
        hn::StoreU(hn::DemoteTo(dh, sum), dh, po + i);
      }
      const auto* sa = static_cast<const half_t*>(a);
      const auto* sb = static_cast<const half_t*>(b);
      auto* so = static_cast<half_t*>(out);
      for (; i < n; ++i) so[i] = to_f16(to_float(sa[i]) + to_float(sb[i]));
      return;
    }
    case DType::f64: break;
  }
  throw std::logic_error("measure add: f32, bf16 or f16 only");
}

}  // namespace HWY_NAMESPACE
}  // namespace normkit::measure
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::measure {

HWY_EXPORT(ReadSum);
HWY_EXPORT(VectorCopy);
HWY_EXPORT(StreamCopy);
HWY_EXPORT(Add);

std::uint64_t read_sum(const std::byte* p, std::size_t bytes) {
  return HWY_DYNAMIC_DISPATCH(ReadSum)(p, bytes);
}

void vector_copy(std::byte* dst, const std::byte* src, std::size_t bytes) {
  HWY_DYNAMIC_DISPATCH(VectorCopy)(dst, src, bytes);
}

void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes) {
  HWY_DYNAMIC_DISPATCH(StreamCopy)(dst, src, bytes);
}

void add(DType t, const void* a, const void* b, void* out, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(Add)(t, a, b, out, n);
}

}  // namespace normkit::measure
#endif
