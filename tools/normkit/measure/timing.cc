#include "measure/timing.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace normkit::measure {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Involuntary context switches of all threads of this process so far: each
// is a moment when one of them was taken off its core for another task.
long involuntary_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nivcsw;
}

struct Sample {
  double per_call;   // wall seconds per call
  bool undisturbed;  // no thread of ours was switched out during it
};

constexpr int kFewestUndisturbed = 5;

// The figures of t from its samples.
void summarize(Timing& t) {
  t.samples = static_cast<int>(t.all_per_call.size());
  t.preempted = t.samples - static_cast<int>(t.kept_per_call.size());
  t.median_all_s = median(t.all_per_call);
  t.median_s = static_cast<int>(t.kept_per_call.size()) >= kFewestUndisturbed ? median(t.kept_per_call)
                                                                               : t.median_all_s;
  t.min_s = *std::min_element(t.all_per_call.begin(), t.all_per_call.end());
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Interleaved time_interleaved(const std::vector<std::function<void()>>& things, int warmup, int repeats) {
  const std::size_t n = things.size();
  Interleaved out;
  out.seconds.resize(n);
  for (int r = 0; r < warmup + repeats; ++r)
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (static_cast<std::size_t>(r) + k) % n;
      const auto t0 = Clock::now();
      things[i]();
      const double s = seconds_since(t0);
      if (r >= warmup) out.seconds[i].push_back(s);
    }
  return out;
}

TimingConfig TimingConfig::split(int rounds) const {
  TimingConfig c = *this;
  c.min_seconds /= rounds;
  c.max_seconds /= rounds;
  c.min_samples = (min_samples + rounds - 1) / rounds;
  c.max_samples = (max_samples + rounds - 1) / rounds;
  return c;
}

void pool(Timing& t, const Timing& more) {
  t.all_per_call.insert(t.all_per_call.end(), more.all_per_call.begin(), more.all_per_call.end());
  t.kept_per_call.insert(t.kept_per_call.end(), more.kept_per_call.begin(), more.kept_per_call.end());
  t.rounds += more.rounds;
  t.calls_per_sample = more.calls_per_sample;
  summarize(t);
}

Timing time_calls(const std::function<void(std::int64_t)>& call, const TimingConfig& cfg) {
  Timing t;
  std::int64_t i = 0;

  // Warm-up, which also estimates the time of one call.
  constexpr int warmup = 3;
  const auto w0 = Clock::now();
  for (int k = 0; k < warmup; ++k) call(i++);
  const double per_call = seconds_since(w0) / warmup;

  t.calls_per_sample = static_cast<int>(
      std::clamp(std::ceil(cfg.min_sample_seconds / std::max(per_call, 1e-9)), 1.0, 1e6));

  std::vector<Sample> samples;
  const auto undisturbed = [](const Sample& s) { return s.undisturbed; };
  const auto start = Clock::now();
  while (static_cast<int>(samples.size()) < cfg.max_samples) {
    // The switch count is read inside the timed interval; its cost (a
    // system call, ~1 µs) is why samples last at least min_sample_seconds.
    const auto s0 = Clock::now();
    const long switches0 = involuntary_switches();
    for (int k = 0; k < t.calls_per_sample; ++k) call(i++);
    const bool quiet = involuntary_switches() == switches0;
    const double wall = seconds_since(s0);
    samples.push_back({wall / t.calls_per_sample, quiet});

    const double elapsed = seconds_since(start);
    if (elapsed >= cfg.max_seconds) break;
    if (elapsed < cfg.min_seconds || static_cast<int>(samples.size()) < cfg.min_samples) continue;
    if (std::count_if(samples.begin(), samples.end(), undisturbed) >= cfg.min_samples) break;
  }

  t.rounds = 1;
  for (const Sample& s : samples) {
    t.all_per_call.push_back(s.per_call);
    if (undisturbed(s)) t.kept_per_call.push_back(s.per_call);
  }
  summarize(t);
  return t;
}

}  // namespace normkit::measure
