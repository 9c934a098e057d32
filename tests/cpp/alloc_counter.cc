// The counting allocator of alloc_counter.hpp. The C functions forward to
// glibc's __libc_* entry points, which every glibc exports for exactly this
// purpose (interposing malloc); operator new forwards to malloc.
#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace normkit::test {
namespace {

std::atomic<int> g_armed{0};
std::atomic<std::uint64_t> g_calls{0}, g_bytes{0};

void note(std::size_t n) {
  if (g_armed.load(std::memory_order_relaxed) > 0) {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(n, std::memory_order_relaxed);
  }
}

AllocCount now() { return {g_calls.load(), g_bytes.load()}; }

}  // namespace

Counting::Counting() : start_(now()) { g_armed.fetch_add(1); }
Counting::~Counting() { g_armed.fetch_sub(1); }
AllocCount Counting::count() const {
  const AllocCount n = now();
  return {n.calls - start_.calls, n.bytes - start_.bytes};
}

}  // namespace normkit::test

using normkit::test::note;

extern "C" {

void* malloc(std::size_t n) {
  note(n);
  return __libc_malloc(n);
}
void* calloc(std::size_t k, std::size_t n) {
  note(k * n);
  return __libc_calloc(k, n);
}
void* realloc(void* p, std::size_t n) {
  note(n);
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t a, std::size_t n) {
  note(n);
  return __libc_memalign(a, n);
}
void* aligned_alloc(std::size_t a, std::size_t n) {
  note(n);
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  note(n);
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}

}  // extern "C"

// operator new/delete, every replaceable form, on top of the counted malloc.
namespace {
void* checked(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return checked(malloc(n == 0 ? 1 : n)); }
void* operator new[](std::size_t n) { return checked(malloc(n == 0 ? 1 : n)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return malloc(n == 0 ? 1 : n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return malloc(n == 0 ? 1 : n); }
void* operator new(std::size_t n, std::align_val_t a) {
  return checked(aligned_alloc(static_cast<std::size_t>(a), n == 0 ? 1 : n));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return checked(aligned_alloc(static_cast<std::size_t>(a), n == 0 ? 1 : n));
}
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, std::size_t) noexcept { free(p); }
void operator delete[](void* p, std::size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { free(p); }
