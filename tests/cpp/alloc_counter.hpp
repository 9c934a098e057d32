// Counts every heap allocation the process makes — operator new in all its
// forms and the C allocator (malloc, calloc, realloc, aligned_alloc,
// posix_memalign, memalign) — from any thread, including the OpenMP
// runtime's. The replacements live in alloc_counter.cc, which only the
// memory-test executable links: the counting allocator takes over the whole
// process, which a sanitizer's own allocator cannot share.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace normkit::test {

struct AllocCount {
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;
};

// Counting is off until a Counting scope is open.
class Counting {
 public:
  Counting();
  ~Counting();
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;
  // Allocations since this scope opened.
  AllocCount count() const;

 private:
  AllocCount start_;
};

}  // namespace normkit::test
