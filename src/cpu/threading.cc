#include <omp.h>

#include <atomic>

#include "normkit/threading.hpp"

namespace normkit {
namespace {
std::atomic<int> g_threads{0};  // 0: use OpenMP's default
}  // namespace

void set_num_threads(int n) noexcept { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

int num_threads() noexcept {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
}


}  // namespace normkit
