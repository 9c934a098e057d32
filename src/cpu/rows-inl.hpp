// Rows as the kernels walk them: the pointer to row r, the head a row peels
// before non-temporal stores, and the slow-path scans of the statistics'
// rescue. Compiled once per Highway target (see convert-inl.hpp).

#ifndef NORMKIT_ALWAYS_INLINE
// The kernels' lambdas over a row are inlined by force, like the Highway ops
// they call: left to the compiler's heuristics, which weigh the whole
// translation unit, adding an instantiation elsewhere once kept the closure
// in memory and reloaded a pass's constants on every pair.
#define NORMKIT_ALWAYS_INLINE __attribute__((always_inline))
#endif

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_ROWS_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_ROWS_INL_HPP_
#undef NORMKIT_CPU_ROWS_INL_HPP_
#else
#define NORMKIT_CPU_ROWS_INL_HPP_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/convert-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

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

#endif  // NORMKIT_CPU_ROWS_INL_HPP_
