// normkit bench — the one timing helper: warm-up, repeats, median.
#pragma once

#include <cstdint>
#include <functional>

namespace normkit::bench {

struct TimingConfig {
  double min_seconds = 0.25;        // keep sampling at least this long...
  int min_samples = 21;             // ...and at least this many samples
  int max_samples = 2001;           // then stop, however short the call
  double min_sample_seconds = 2e-5; // batch calls until a sample lasts this long
};

struct Timing {
  double median_s = 0;       // median over samples of the time per call
  double min_s = 0;          // fastest sample, per call
  int samples = 0;
  int calls_per_sample = 0;
  // Samples during which the process ran less than 90% of the wall time
  // (not even one thread busy throughout): another process took the core.
  int preempted = 0;
};

// Times call(i) for i = 0, 1, 2, ... The caller maps i to a buffer set
// (i % sets), so consecutive calls rotate through the sets.
//
// Warm-up: 3 calls (cold instruction cache, lazy initialisation, thread
// pool start-up). Page faults need no warm-up: the bench touches every page
// of its buffers when it allocates them and fills the inputs just before.
// Then samples of `calls_per_sample` consecutive calls, batched only when one
// call is too short to time alone (~20 µs, far above the ~20 ns clock
// overhead). The median is reported: on a shared 2-core VM a thread is
// sometimes descheduled for milliseconds, which ruins a mean but not a median.
Timing time_calls(const std::function<void(std::int64_t)>& call, const TimingConfig& cfg);

}  // namespace normkit::bench
