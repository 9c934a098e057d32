// normkit measure — the one timing helper: warm-up, repeats, median.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace normkit::measure {

struct TimingConfig {
  double min_seconds = 0.25;         // keep sampling at least this long...
  int min_samples = 21;              // ...until this many samples ran undisturbed
  double max_seconds = 3.0;          // give up waiting for undisturbed samples here
  int max_samples = 2001;            // and stop here, however short the call
  double min_sample_seconds = 2e-4;  // batch calls until a sample lasts this long

  // Each of `rounds` rounds' share: the times and sample counts divided
  // (rounded up), the sample length kept.
  TimingConfig split(int rounds) const;
};

struct Timing {
  double median_s = 0;      // median time per call over the undisturbed samples
  double median_all_s = 0;  // median time per call over every sample
  double min_s = 0;         // fastest sample, per call
  int samples = 0;          // every sample taken
  int preempted = 0;        // samples left out as disturbed (see below)
  int calls_per_sample = 0;  // of the last round
  int rounds = 0;           // separate timings whose samples are pooled here
  std::vector<double> all_per_call, kept_per_call;  // every sample of every round; the undisturbed ones
};

// Times call(i) for i = 0, 1, 2, ... The caller maps i to a buffer set
// (i % sets), so consecutive calls rotate through the sets.
//
// Warm-up: 3 calls (cold instruction cache, lazy initialisation, thread
// pool start-up). Page faults need no warm-up: the bench touches every page
// of its buffers when it allocates them and fills the inputs just before.
// Then samples of `calls_per_sample` consecutive calls, batched when one
// call is shorter than 200 µs (the clocks read per sample cost ~1 µs).
//
// Other processes share this 2-core VM and take a core for milliseconds at
// a time. So each sample also counts the involuntary context switches of
// the process (getrusage: all its threads): a sample during which any of
// our threads was switched out for another task is counted as preempted and
// left out of the median. (If fewer than 5 samples were undisturbed by
// max_seconds, the median is over every sample.) median_all_s keeps the
// unfiltered figure. An earlier test, the process's CPU time over the wall
// time, misjudged samples of two threads: the kernel brings a running
// thread's CPU time up to date at its scheduler ticks (4 ms here), so over
// a 1-2 ms sample the other thread's time read as 0 or a whole tick, and
// the filter kept a biased half of the samples.
Timing time_calls(const std::function<void(std::int64_t)>& call, const TimingConfig& cfg);

// Adds the samples of `more` (another timing of the same thing) to t; t's
// figures are then over the pooled samples. The bench times each record in
// rounds far apart in time, so that a slow spell of the shared host's
// memory, which lasts minutes, moves the median less than when every sample
// falls in it; the ceilings pool their measurements the same way.
void pool(Timing& t, const Timing& more);

}  // namespace normkit::measure

namespace normkit::measure {

// The median of v (v not empty).
double median(std::vector<double> v);

// Several things to compare, timed in turns: repeat r runs each of them once,
// starting with thing r % n and going round, so a slow spell of the shared
// host (which lasts seconds to minutes) falls on all of them instead of on
// whichever was timed then, and none always runs first after another's
// caches. The first `warmup` repeats are not kept. seconds[i] holds thing i's
// kept times; median(i) is their median.
struct Interleaved {
  std::vector<std::vector<double>> seconds;
  double median_s(std::size_t i) const { return median(seconds[i]); }
};
Interleaved time_interleaved(const std::vector<std::function<void()>>& things, int warmup, int repeats);

}  // namespace normkit::measure
