// normkit measure — where timed buffers live, and the memory-bandwidth
// ceilings measured in those same buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "measure/traffic.hpp"
#include "measure/timing.hpp"

namespace normkit::measure {

// One large, page-aligned block that every record carves its buffer sets
// from. Allocated (and every page touched) once and grown on demand, so no
// record pays page faults in its timing and memory use stays at one block.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();
  // At least `bytes` bytes, 4 KiB aligned; contents unspecified.
  std::byte* get(std::size_t bytes);

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Carves `sets` buffer sets for op at shape s from the arena: each array the
// op touches gets its own 4 KiB-aligned range; sets follow one another.
std::vector<Tensors> carve(Arena& arena, const Op& op, const Shape& s, std::int64_t sets);

// Bytes between consecutive sets (the working set, rounded up to pages).
std::int64_t set_stride(const Op& op, const Shape& s);

// Fills every array the op only reads with finite, normal, non-constant
// values of either sign (magnitudes about 2^-7 to 2 whichever dtype the bits
// are read as), so no timing meets a NaN or a subnormal. `positive`: x and
// the residual get the same magnitudes all positive (a row mean several times
// its standard deviation). Arrays the op writes are left as they are.
void fill_inputs(const Op& op, const Shape& s, const std::vector<Tensors>& sets, bool positive);

// Cache sizes of CPU 0 from sysfs (0 when unknown).
struct Caches {
  std::int64_t l1d = 0, l2 = 0, l3 = 0;
};
Caches read_caches();

// Where a footprint of `bytes` (touched again and again) can live: "L1",
// "L2", "L3" or "DRAM", by the sizes sysfs reports.
std::string residence(std::int64_t bytes, const Caches& c);

// The ceilings at one working-set size, set count and thread count.
struct Ceiling {
  double copy_gbps = 0;      // (read + written bytes) / time of the better copy loop
  double read_gbps = 0;      // read bytes / time of the read loop
  std::string copy_method;   // "memcpy", "vector" or "stream" (whichever was faster)
  double copy_median_s = 0;  // time of one copy of the whole working set
};

// Measures the machine's copy and read bandwidth for buffers the size of an
// op's working set, rotated over as many sets as the op's buffers are and
// split among the same threads, so the ceiling sees the same caches the op
// does. Copy: each set is half source, half destination, one copy per call;
// each thread copies its own contiguous part with memcpy, with a vector loop
// of ordinary stores and with one of non-temporal stores (the fastest
// counts: the kernels stream large outputs, so streaming is within reach). Read: each thread sums its part of the set.
//
// Other processes share the machine, and its memory bandwidth drifts over
// minutes. An op's time is the median of samples taken in several rounds far
// apart (see pool in measure/timing.hpp), so its ceiling is measured the same way: again
// whenever it is asked for and its last measurement is older than
// `refresh_seconds`, every measurement's samples pooled with the earlier
// ones, and the figures are the medians of the pooled samples. Percentages of
// the ceiling are computed from those at the end of the run. (Until 2026-11
// the ceiling was the best single measurement of the run: against the median
// of the op's samples, that set the top of the host's drift against its
// middle, and the more often a ceiling was measured the higher it went.)
// The ceiling for t threads is the better of those of 1..t threads (a small
// copy is faster on one thread than split).
class Ceilings {
 public:
  Ceilings(Arena& arena, TimingConfig cfg, double refresh_seconds)
      : arena_(arena), cfg_(cfg), refresh_seconds_(refresh_seconds) {}

  // Measures the ceilings of 1..threads threads at this size and set count
  // unless each was measured less than refresh_seconds ago.
  void refresh(std::int64_t working_set, std::int64_t sets, int threads);

  // The figures so far at this size and set count, up to `threads` threads.
  // refresh() must have been called for them.
  Ceiling at(std::int64_t working_set, std::int64_t sets, int threads) const;

  // How many measurements have run (each overwrites part of the arena).
  int measurements() const { return measurements_; }

  // (bucketed working set, sets, threads) -> the pooled samples of exactly
  // that many threads, and how many times they were measured.
  struct Entry {
    Timing copy[3];  // memcpy, vector loop, streaming vector loop
    Timing read;
    std::int64_t copy_bytes = 0, read_bytes = 0;  // per call
    int times = 0;
    double last = 0;    // seconds since the start of the run
    Ceiling best_once;  // the best single measurement, for the report
    Ceiling figures() const;  // from the pooled medians
  };
  using Key = std::tuple<std::int64_t, std::int64_t, int>;
  const std::map<Key, Entry>& all() const { return done_; }

 private:
  // One more measurement into e; returns its own figures.
  Ceiling measure(std::int64_t working_set, std::int64_t sets, int threads, Entry& e);
  Arena& arena_;
  TimingConfig cfg_;
  double refresh_seconds_;
  std::map<Key, Entry> done_;
  int measurements_ = 0;
};

// The least time in which the traffic could move at these ceilings, as GB/s
// of the traffic's total bytes. As many bytes as are written are paired
// with as many read bytes and move at the copy bandwidth; the reads left
// over move at the read bandwidth (and writes left over, unpaired, at the
// copy bandwidth: a store streams its line in before writing it).
double ceiling_gbps(const Traffic& t, const Ceiling& c);

}  // namespace normkit::measure
