// Whether an output's pages are already mapped in, which decides how the
// kernels write it (see forward_streams / backward_streams).
#pragma once

#include <cstddef>

namespace normkit::detail {

// True when the first, middle and last pages of [p, p + bytes) are resident
// (or when the system cannot tell). A large buffer fresh from the allocator
// is not: glibc serves it with a new mmap, and its first write faults each
// page in. The kernel zeroes a faulted page through the cache, so
// non-temporal stores into it must then evict lines that were just written:
// measured twice as slow as ordinary stores (docs/kernels.md). One mincore
// call per sampled page, about 1 µs in all, and only for outputs of
// kStreamMinBytes or more.
bool pages_resident(const void* p, std::size_t bytes);

}  // namespace normkit::detail
