#include "output_cache.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>

namespace normkit_py {
namespace {

constexpr std::size_t kDefaultLimit = std::size_t{1} << 30;

std::size_t limit_from_environment() {
  const char* s = std::getenv("NORMKIT_OUTPUT_CACHE_BYTES");
  if (!s || !*s) return kDefaultLimit;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  // Anything but a plain decimal count keeps the default (a typo should not
  // turn the cache off, nor make it unbounded).
  if (errno != 0 || *end != '\0' || *s == '-') return kDefaultLimit;
  return v > std::numeric_limits<std::size_t>::max() ? std::numeric_limits<std::size_t>::max()
                                                     : static_cast<std::size_t>(v);
}

// `size` bytes (a multiple of kUnit) at a kUnit-aligned address: a mapping
// one unit larger, trimmed at both ends.
void* map_block(std::size_t size) {
  const std::size_t unit = OutputCache::kUnit;
  void* raw = mmap(nullptr, size + unit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (base + unit - 1) & ~(std::uintptr_t{unit} - 1);
  if (start > base) munmap(raw, start - base);
  const std::uintptr_t end = base + size + unit;
  if (end > start + size) munmap(reinterpret_cast<void*>(start + size), end - (start + size));
  void* p = reinterpret_cast<void*>(start);
  // A request, not a requirement: without transparent huge pages the block
  // is faulted in 4 KiB pages as any other.
  (void)madvise(p, size, MADV_HUGEPAGE);
  return p;
}

}  // namespace

OutputCache& OutputCache::get() {
  static OutputCache* cache = [] {
    auto* c = new OutputCache(limit_from_environment());
    // A fork while another thread holds the lock would leave it held forever
    // in the child (DataLoader workers are forked): hold it across the fork,
    // so both sides start with it free.
    pthread_atfork([] { get().mu_.lock(); }, [] { get().mu_.unlock(); }, [] { get().mu_.unlock(); });
    return c;
  }();
  return *cache;
}

bool OutputCache::serves(std::size_t bytes) const {
  return bytes >= kMinBytes && limit_.load(std::memory_order_relaxed) > 0;
}

void* OutputCache::acquire(std::size_t bytes, std::size_t* mapped) {
  const std::size_t size = (bytes + kUnit - 1) / kUnit * kUnit;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest kept block that fits and wastes at most the request;
    // among equals the most recently kept (its pages are the likeliest to be
    // in cache).
    std::size_t best = kept_.size();
    for (std::size_t i = kept_.size(); i-- > 0;) {
      const std::size_t s = kept_[i].size;
      if (s >= size && s / 2 <= size && (best == kept_.size() || s < kept_[best].size)) best = i;
    }
    if (best != kept_.size()) {
      const Block b = kept_[best];
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
      kept_bytes_ -= b.size;
      live_bytes_ += b.size;
      ++live_blocks_;
      ++hits_;
      *mapped = b.size;
      return b.p;
    }
  }
  void* p = map_block(size);
  if (!p) {
    // Kept blocks of other sizes may be what the system is missing.
    empty();
    p = map_block(size);
    if (!p) return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ += size;
  ++live_blocks_;
  ++misses_;
  *mapped = size;
  return p;
}

void OutputCache::trim_locked(std::size_t limit) noexcept {
  std::size_t n = 0;
  for (; n < kept_.size() && kept_bytes_ > limit; ++n) {
    kept_bytes_ -= kept_[n].size;
    munmap(kept_[n].p, kept_[n].size);
  }
  kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(n));
}

void OutputCache::release(void* p, std::size_t mapped) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  live_bytes_ -= mapped;
  --live_blocks_;
  const std::size_t limit = limit_.load(std::memory_order_relaxed);
  if (mapped <= limit) {
    try {
      kept_.push_back({p, mapped});
      kept_bytes_ += mapped;
      trim_locked(limit);
      return;
    } catch (const std::bad_alloc&) {  // no memory for the bookkeeping: unmap the block
    }
  }
  munmap(p, mapped);
}

void OutputCache::set_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_.store(bytes, std::memory_order_relaxed);
  trim_locked(bytes);
}

void OutputCache::empty() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  trim_locked(0);
}

OutputCache::Info OutputCache::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {limit_.load(std::memory_order_relaxed), kept_bytes_, kept_.size(), live_bytes_, live_blocks_, hits_,
          misses_};
}

}  // namespace normkit_py
