// Row-range threading for the CPU kernels. Threading lives here and only
// here: a kernel is a function of a row range [begin, end), and no row's
// reduction ever crosses threads, so forward results never depend on the
// thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "normkit/threading.hpp"

namespace normkit::detail {

// Below this much memory traffic per thread, waking another thread costs
// more than it saves: an OpenMP fork/join is a few microseconds, the time to
// move ~64 KiB at one core's DRAM bandwidth. A decode step (one row of 4096)
// therefore runs on the calling thread with no synchronisation at all.
inline constexpr std::int64_t kMinBytesPerThread = 64 * 1024;

// Records that an OpenMP team is about to start (see threading.cc: a
// process forked after that runs single-threaded).
void note_pool_started() noexcept;

// Threads worth using for `rows` rows that move `bytes_per_row` bytes each.
inline int threads_for(std::int64_t rows, std::int64_t bytes_per_row) {
  const std::int64_t by_bytes = std::max<std::int64_t>(1, rows * bytes_per_row / kMinBytesPerThread);
  return static_cast<int>(std::min<std::int64_t>({num_threads(), rows, by_bytes}));
}

// Calls fn(begin, end) on contiguous, disjoint row ranges covering [0, rows),
// one range per thread. Inside an enclosing OpenMP parallel region (nested
// parallelism off, the default) this runs on the calling thread.
template <class Fn>
void parallel_rows(std::int64_t rows, std::int64_t bytes_per_row, Fn&& fn) {
  const int n = threads_for(rows, bytes_per_row);
  if (n <= 1 || omp_in_parallel()) {
    fn(std::int64_t{0}, rows);
    return;
  }
  note_pool_started();
#pragma omp parallel num_threads(n)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

// Calls fn(i) for i in [0, count) with a static schedule over up to
// num_threads() threads. For work whose items are already sized (the fixed
// row blocks of a parameter-gradient reduction).
template <class Fn>
void parallel_items(std::int64_t count, std::int64_t bytes_per_item, Fn&& fn) {
  parallel_rows(count, bytes_per_item, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) fn(i);
  });
}

}  // namespace normkit::detail
