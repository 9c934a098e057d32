#include <omp.h>
#include <pthread.h>

#include <atomic>

#include "cpu/parallel.hpp"
#include "normkit/threading.hpp"

namespace normkit {
namespace {
std::atomic<int> g_threads{0};  // 0: use OpenMP's default

// GNU OpenMP cannot run a parallel region in a process forked after its
// thread pool started: the child waits forever for threads that were not
// copied. Such a child runs every kernel on its calling thread.
std::atomic<bool> g_pool_started{false}, g_forked_after_pool{false};

void on_fork_child() {
  if (g_pool_started.load(std::memory_order_relaxed)) g_forked_after_pool.store(true, std::memory_order_relaxed);
}
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, on_fork_child);  // registers at load
}  // namespace

void set_num_threads(int n) noexcept { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

int num_threads() noexcept {
  if (g_forked_after_pool.load(std::memory_order_relaxed)) return 1;
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
}

namespace detail {
void note_pool_started() noexcept {
  if (!g_pool_started.load(std::memory_order_relaxed)) g_pool_started.store(true, std::memory_order_relaxed);
}
}  // namespace detail

}  // namespace normkit
