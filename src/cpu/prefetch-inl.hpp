// The next-row prefetcher of the kernel loops (NextRows). Compiled once per
// Highway target (see convert-inl.hpp).

// Re-inclusion guard that toggles once per target (the Highway convention).
#if defined(NORMKIT_CPU_PREFETCH_INL_HPP_) == defined(HWY_TARGET_TOGGLE)
#ifdef NORMKIT_CPU_PREFETCH_INL_HPP_
#undef NORMKIT_CPU_PREFETCH_INL_HPP_
#else
#define NORMKIT_CPU_PREFETCH_INL_HPP_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cpu/introspect.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

// The next rows' inputs (one or two arrays), fetched while this row is
// processed, so the next row's first pass finds them in cache. The fetches
// are spread over the row (the first and the last pass each fetch half a
// row in step with their progress) so that memory never idles while a pass
// reads cached data.
//
// Rows of up to kNearAheadBytes (all arrays together) are fetched at two
// distances: the row after next from memory into L2, and the next row from
// L2 into L1, because a short row's first pass is over before the L1
// hardware prefetcher has followed it.
//
// Wider rows fetch only the next row, into L2, and only while no array's
// row exceeds g_next_row_max_bytes (introspect.hpp): the current row's
// inputs must stay in L2 until its last pass, next to the parameters (and
// the backward's partials), where L2 can hold them.
//
// A row with a wider array is fetched from within: the first pass fetches
// its own row kInRowAheadBytes (a page) ahead of where it reads, into L2, and
// stops at the row's end, because the L2 hardware prefetcher does not cross
// a 4 KiB page.
//
// Each rule's measurements: docs/kernels.md ("Memory", and "Fetching a wide
// row from within").
inline constexpr std::size_t kNearAheadBytes = 4 * 1024;
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
    if (D * std::max(S0, S1) > g_next_row_max_bytes) {  // a wide row: fetched from within
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
    // Nothing to fetch: one row, the last, or a wide row's later passes. One
    // test up front keeps a one-row call (a decode step) from paying for the
    // cursors (docs/kernels.md).
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

// Runs step(i) at i, i + unit, ... while a whole unit of kPairs pairs of
// dc's vectors fits below n, and returns the index after the last. `next`
// advances once per group of units that moves each cursor by at least a
// cache line, then once per unit for the rest: advance issues at least one
// prefetch per cursor and call, so a call per 16-bit pair fetched each line
// four times, and the cursors' tests cost about as many instructions as the
// pair (docs/kernels.md, "Fetching once per line"). The units run in order,
// so sums accumulate as unit by unit.
template <std::size_t S0, std::size_t S1, std::size_t kPairs, class DC, class Step>
HWY_INLINE std::size_t FetchingLoop(DC dc, std::size_t i, std::size_t n, NextRows& next, const Step& step) {
  const std::size_t unit = kPairs * 2 * hn::Lanes(dc);
  constexpr std::size_t kMaxUnit = kPairs * 2 * hn::MaxLanes(DC());
  constexpr std::size_t kSmallest = S1 == 0 ? S0 : std::min(S0, S1);
  // advance fetches half the covered elements' bytes (a row's two passes
  // share the next row), so a line needs 2·64 bytes' worth of elements.
  constexpr std::size_t kLineElements = 2 * 64 / kSmallest;
  constexpr std::size_t kGroup = std::max<std::size_t>(1, (kLineElements + kMaxUnit - 1) / kMaxUnit);
  for (; i + kGroup * unit <= n; i += kGroup * unit) {
    next.advance<S0, S1>(kGroup * unit);
    for (std::size_t k = 0; k < kGroup; ++k) step(i + k * unit);
  }
  for (; i + unit <= n; i += unit) {
    next.advance<S0, S1>(unit);
    step(i);
  }
  return i;
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // NORMKIT_CPU_PREFETCH_INL_HPP_
