// A cache of large output blocks for the Python binding.
//
// An output the caller did not pass is a new array on every call. For a
// large one the C library maps fresh pages from the kernel (glibc returns
// blocks of 32 MiB and more to the system when they are freed, and a smaller
// one when the heap top is trimmed), and the kernel's first write faults
// them in one 4 KiB page at a time: ~13 ms per 32 MiB on the machines this
// was measured on, several times the norm itself. A training step allocates
// the same shapes every step, so the binding keeps the blocks of freed
// outputs and hands them out again, as PyTorch's CUDA allocator does for
// device memory.
//
// * Blocks of at least kMinBytes come from here; smaller outputs use the
//   framework's allocator (its free lists already reuse them).
// * A block is mapped in whole 2 MiB units, aligned to 2 MiB and marked for
//   transparent huge pages (madvise), so that even its first use faults
//   512 times less often where the kernel allows huge pages.
// * A freed block is kept while the kept bytes stay within the limit
//   (`NORMKIT_OUTPUT_CACHE_BYTES`, default 1 GiB; 0 turns the cache off);
//   beyond it the least recently kept blocks are unmapped. A request takes
//   the smallest kept block that is large enough and at most twice the size.
// * Thread-safe: a framework may free an array from any thread, without the
//   GIL.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace normkit_py {

class OutputCache {
 public:
  static constexpr std::size_t kMinBytes = std::size_t{1} << 20;
  static constexpr std::size_t kUnit = std::size_t{2} << 20;  // x86-64's huge page

  struct Info {
    std::size_t limit_bytes;
    std::size_t cached_bytes, cached_blocks;  // kept for reuse
    std::size_t live_bytes, live_blocks;  // held by arrays now
    std::uint64_t hits, misses;
  };

  // The process's cache. Never destroyed: arrays may be freed after the
  // interpreter has torn the module down.
  static OutputCache& get();

  // A block of at least `bytes` bytes (which must be >= kMinBytes), or null
  // if the system has no memory for it. Its size is `*mapped`, which must be
  // given back to release().
  void* acquire(std::size_t bytes, std::size_t* mapped);
  void release(void* p, std::size_t mapped) noexcept;

  // Whether an output of `bytes` bytes should come from here.
  bool serves(std::size_t bytes) const;
  void set_limit(std::size_t bytes);
  void empty() noexcept;  // unmap every kept block
  Info info() const;

 private:
  struct Block {
    void* p;
    std::size_t size;
  };
  explicit OutputCache(std::size_t limit) : limit_(limit) {}
  // Unmaps kept blocks, oldest first, until the kept bytes are within
  // `limit`; `mu_` must be held.
  void trim_locked(std::size_t limit) noexcept;

  mutable std::mutex mu_;
  std::atomic<std::size_t> limit_;  // written under mu_; read without it by serves()
  std::vector<Block> kept_;  // oldest first
  std::size_t kept_bytes_ = 0, live_bytes_ = 0, live_blocks_ = 0;
  std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace normkit_py
