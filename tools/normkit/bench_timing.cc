#include "bench_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <vector>

namespace normkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time used so far by all threads of this process.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

Timing time_calls(const std::function<void(std::int64_t)>& call, const TimingConfig& cfg) {
  std::int64_t i = 0;

  // Warm-up, which also estimates the time of one call.
  constexpr int warmup = 3;
  const auto w0 = Clock::now();
  for (std::int64_t k = 0; k < warmup; ++k) call(i++);
  const double per_call = seconds_since(w0) / warmup;

  Timing t;
  t.calls_per_sample = static_cast<int>(
      std::clamp(std::ceil(cfg.min_sample_seconds / std::max(per_call, 1e-9)), 1.0, 1e6));

  std::vector<double> samples;
  const auto start = Clock::now();
  while (static_cast<int>(samples.size()) < cfg.max_samples) {
    const double cpu0 = process_cpu_seconds();
    const auto s0 = Clock::now();
    for (int k = 0; k < t.calls_per_sample; ++k) call(i++);
    const double wall = seconds_since(s0);
    if (process_cpu_seconds() - cpu0 < 0.9 * wall) ++t.preempted;
    samples.push_back(wall / t.calls_per_sample);
    if (static_cast<int>(samples.size()) >= cfg.min_samples && seconds_since(start) >= cfg.min_seconds)
      break;
  }

  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  t.samples = static_cast<int>(n);
  t.median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.min_s = samples.front();
  return t;
}

}  // namespace normkit::bench
