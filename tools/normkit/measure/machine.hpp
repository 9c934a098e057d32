// What a measurement records about the machine it ran on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace normkit::bench {

// The CPU's model name from /proc/cpuinfo.
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// The first three fields of /proc/loadavg: how busy the machine was.
inline std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

// The core's clock in GHz, from the time of a chain of dependent integer
// adds (x += x, which no core folds away as it can an add of a constant):
// each waits for the one before, and an add takes one cycle on every x86-64
// and AArch64 core, so the chain's length is its time in cycles. It
// works where the hardware counters are hidden (virtual machines), and turns
// a measured time into cycles for comparison with what the core can issue.
// The fastest of several tries: preemption only slows a try. 0 where the
// architecture has no chain here.
inline double core_clock_ghz() {
#if defined(__x86_64__) || defined(__aarch64__)
  constexpr std::int64_t kLoops = 200'000, kAddsPerLoop = 10;  // about 1 ms a try
  double best_ns = std::numeric_limits<double>::infinity();
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::int64_t x = 1, n = kLoops;
    const auto t0 = std::chrono::steady_clock::now();
#if defined(__x86_64__)
    asm volatile(
        "1:\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "dec %1\n\tjnz 1b"
        : "+r"(x), "+r"(n));
#else
    asm volatile(
        "1:\n\t"
        "add %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\t"
        "add %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\t"
        "subs %1, %1, #1\n\tb.ne 1b"
        : "+r"(x), "+r"(n)::"cc");
#endif
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best_ns = std::min(best_ns, ns);
  }
  return static_cast<double>(kLoops * kAddsPerLoop) / best_ns;
#else
  return 0;
#endif
}

}  // namespace normkit::bench
