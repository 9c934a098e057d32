#include "measure/memory.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <random>

#include "measure/stream.hpp"

namespace normkit::measure {
namespace {

constexpr std::int64_t kPage = 4096;

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

// 1 MiB of 16-bit words (sign ± and exponent 0x3c/0xbc as f16, bf16, or the
// high half of an f32, with 8 random low bits), copied into every input.
const std::vector<std::uint16_t>& pattern() {
  static const std::vector<std::uint16_t> words = [] {
    std::vector<std::uint16_t> w(1u << 19);
    std::mt19937 rng(12345);
    for (auto& v : w) {
      const auto r = rng();
      v = static_cast<std::uint16_t>(((r & 0x100u) ? 0xbc00u : 0x3c00u) | (r & 0xffu));
    }
    return w;
  }();
  return words;
}

void fill(std::byte* p, std::int64_t bytes) {
  const auto& w = pattern();
  const auto chunk = static_cast<std::int64_t>(w.size() * sizeof(std::uint16_t));
  for (std::int64_t off = 0; off < bytes; off += chunk)
    std::memcpy(p + off, w.data(), static_cast<std::size_t>(std::min(chunk, bytes - off)));
}

std::int64_t read_cache_size(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  std::int64_t n = std::atoll(s.c_str());
  if (s.back() == 'K') n <<= 10;
  if (s.back() == 'M') n <<= 20;
  return n;
}

std::string read_cache_type(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/type");
  std::string s;
  f >> s;
  return s;
}

int read_cache_level(int index) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/level");
  int level = 0;
  f >> level;
  return level;
}

// Splits [0, n) bytes into k contiguous, 64-byte aligned parts; part i.
std::pair<std::int64_t, std::int64_t> part(std::int64_t n, int i, int k) {
  const std::int64_t b = i == 0 ? 0 : (n * i / k) / 64 * 64;
  const std::int64_t e = i + 1 == k ? n : (n * (i + 1) / k) / 64 * 64;
  return {b, e};
}

// Runs fn(part index, part count) on k threads (no OpenMP region for one).
template <class Fn>
void on_threads(int k, Fn&& fn) {
  if (k <= 1) {
    fn(0, 1);
    return;
  }
#pragma omp parallel num_threads(k)
  fn(omp_get_thread_num(), omp_get_num_threads());
}

// Ceilings are measured at the working set rounded up to 1/32 of its power
// of two (at most ~3% more bytes), so ops of nearly equal size share one.
std::int64_t bucket(std::int64_t bytes) {
  const auto floor_pow2 = static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(std::max<std::int64_t>(bytes, 1))));
  return round_up(bytes, std::max<std::int64_t>(floor_pow2 / 32, 64));
}

}  // namespace

Arena::~Arena() { std::free(data_); }

std::byte* Arena::get(std::size_t bytes) {
  if (bytes <= size_) return data_;
  std::free(data_);
  size_ = static_cast<std::size_t>(round_up(static_cast<std::int64_t>(bytes), 1 << 21));
  data_ = static_cast<std::byte*>(std::aligned_alloc(kPage, size_));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, size_);  // touch every page now, not inside a timing
  return data_;
}

std::int64_t set_stride(const Op& op, const Shape& s) {
  std::int64_t n = 0;
  for (int i = 0; i < kArrayCount; ++i) {
    const auto a = static_cast<Array>(i);
    if (op.reads.has(a) || op.writes.has(a)) n += round_up(array_bytes(a, s), kPage);
  }
  return n;
}

std::vector<Tensors> carve(Arena& arena, const Op& op, const Shape& s, std::int64_t sets) {
  const std::int64_t stride = set_stride(op, s);
  std::byte* base = arena.get(static_cast<std::size_t>(stride * sets));
  std::vector<Tensors> out(static_cast<std::size_t>(sets));
  for (std::int64_t k = 0; k < sets; ++k) {
    std::byte* p = base + k * stride;
    for (int i = 0; i < kArrayCount; ++i) {
      const auto a = static_cast<Array>(i);
      if (!op.reads.has(a) && !op.writes.has(a)) continue;
      out[static_cast<std::size_t>(k)].p[static_cast<std::size_t>(i)] = p;
      p += round_up(array_bytes(a, s), kPage);
    }
  }
  return out;
}

void fill_inputs(const Op& op, const Shape& s, const std::vector<Tensors>& sets, bool positive) {
  for (const Tensors& t : sets)
    for (int i = 0; i < kArrayCount; ++i) {
      const auto a = static_cast<Array>(i);
      if (!op.reads.has(a) || op.writes.has(a)) continue;
      fill(t[a], array_bytes(a, s));
      if (positive && (a == Array::x || a == Array::residual)) {
        // Clear bit 15 of every 16-bit word: the sign of a 16-bit value and
        // of an f32 (its high word); in an f32's low word a mantissa bit.
        auto* w = reinterpret_cast<std::uint16_t*>(t[a]);
        for (std::int64_t k = 0; k < array_bytes(a, s) / 2; ++k) w[k] &= 0x7fffu;
      }
    }
}

Caches read_caches() {
  Caches c;
  for (int i = 0; i < 8; ++i) {
    const int level = read_cache_level(i);
    if (level == 0) break;
    const std::int64_t size = read_cache_size(i);
    if (level == 1 && read_cache_type(i) != "Instruction") c.l1d = size;
    if (level == 2) c.l2 = size;
    if (level == 3) c.l3 = size;
  }
  return c;
}

std::string residence(std::int64_t bytes, const Caches& c) {
  if (c.l1d && bytes <= c.l1d) return "L1";
  if (c.l2 && bytes <= c.l2) return "L2";
  if (c.l3 && bytes <= c.l3) return "L3";
  return "DRAM";
}

namespace {

double seconds_now() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Keeps the better of each figure (the copy method and time go with the
// copy bandwidth).
void keep_better(Ceiling& best, const Ceiling& c) {
  if (c.copy_gbps > best.copy_gbps) {
    best.copy_gbps = c.copy_gbps;
    best.copy_method = c.copy_method;
    best.copy_median_s = c.copy_median_s;
  }
  best.read_gbps = std::max(best.read_gbps, c.read_gbps);
}

constexpr const char* kCopyMethods[] = {"memcpy", "vector", "stream"};

// The figures of one set of copy and read timings: the fastest copy method.
Ceiling figures_of(const Timing (&copy)[3], const Timing& read, std::int64_t copy_bytes,
                   std::int64_t read_bytes) {
  int fastest = 0;
  for (int m = 1; m < 3; ++m)
    if (copy[m].median_s < copy[fastest].median_s) fastest = m;
  Ceiling c;
  c.copy_median_s = copy[fastest].median_s;
  c.copy_method = kCopyMethods[fastest];
  c.copy_gbps = static_cast<double>(copy_bytes) / c.copy_median_s / 1e9;
  c.read_gbps = static_cast<double>(read_bytes) / read.median_s / 1e9;
  return c;
}

}  // namespace

Ceiling Ceilings::Entry::figures() const { return figures_of(copy, read, copy_bytes, read_bytes); }

void Ceilings::refresh(std::int64_t working_set, std::int64_t sets, int threads) {
  const std::int64_t ws = bucket(working_set);
  for (int t = 1; t <= threads; ++t) {
    Entry& e = done_[{ws, sets, t}];
    if (e.times > 0 && seconds_now() - e.last < refresh_seconds_) continue;
    keep_better(e.best_once, measure(ws, sets, t, e));
    ++e.times;
    e.last = seconds_now();
  }
}

Ceiling Ceilings::at(std::int64_t working_set, std::int64_t sets, int threads) const {
  const std::int64_t ws = bucket(working_set);
  Ceiling b;
  for (int t = 1; t <= threads; ++t)
    if (auto it = done_.find({ws, sets, t}); it != done_.end()) keep_better(b, it->second.figures());
  return b;
}

Ceiling Ceilings::measure(std::int64_t ws, std::int64_t sets, int threads, Entry& e) {
  ++measurements_;
  const std::int64_t stride = round_up(ws, kPage);
  std::byte* base = arena_.get(static_cast<std::size_t>(stride * sets));
  fill(base, stride * sets);
  const std::int64_t half = ws / 2;

  Timing copies[3];  // in the order of kCopyMethods
  for (int m = 0; m < 3; ++m) {
    copies[m] = time_calls(
        [&](std::int64_t i) {
          std::byte* set = base + (i % sets) * stride;
          on_threads(threads, [&](int t, int k) {
            const auto [b, en] = part(half, t, k);
            const auto n = static_cast<std::size_t>(en - b);
            if (m == 0) std::memcpy(set + half + b, set + b, n);
            if (m == 1) vector_copy(set + half + b, set + b, n);
            if (m == 2) stream_copy(set + half + b, set + b, n);
          });
        },
        cfg_);
    pool(e.copy[m], copies[m]);
  }

  std::atomic<std::uint64_t> sink{0};
  const Timing read = time_calls(
      [&](std::int64_t i) {
        const std::byte* set = base + (i % sets) * stride;
        on_threads(threads, [&](int t, int k) {
          const auto [b, en] = part(ws, t, k);
          sink.fetch_add(read_sum(set + b, static_cast<std::size_t>(en - b)), std::memory_order_relaxed);
        });
      },
      cfg_);
  pool(e.read, read);
  e.copy_bytes = 2 * half;
  e.read_bytes = ws;
  return figures_of(copies, read, e.copy_bytes, e.read_bytes);
}

double ceiling_gbps(const Traffic& t, const Ceiling& c) {
  const auto r = static_cast<double>(t.read), w = static_cast<double>(t.written);
  const double paired = std::min(r, w);
  const double seconds =
      (2 * paired) / (c.copy_gbps * 1e9) + (r - paired) / (c.read_gbps * 1e9) +
      2 * (w - paired) / (c.copy_gbps * 1e9);
  return (r + w) / seconds / 1e9;
}

}  // namespace normkit::measure
