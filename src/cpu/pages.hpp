// Whether a kernel writes an output with non-temporal stores: the one rule
// behind forward_streams and backward_streams.
#pragma once

#include <cstddef>
#include <cstdint>

namespace normkit::detail {

// True for an output of `rows` rows of D elements (elem_size bytes each,
// rows row_stride elements apart) that holds at least kStreamMinBytes and
// whose pages are already mapped in: its first, middle and last pages are
// resident (or the system cannot tell). A large buffer fresh from the
// allocator is not: glibc serves it with a new mmap, and its first write
// faults each page in. The kernel zeroes a faulted page through the cache, so
// non-temporal stores into it must then evict lines that were just written:
// measured twice as slow as ordinary stores (docs/kernels.md). The check is
// one mincore call per sampled page, about 1 µs in all, made only for
// outputs that large. In-place outputs are the caller's to exclude.
bool streams_output(const void* out, std::int64_t rows, std::int64_t D, std::int64_t row_stride,
                    std::size_t elem_size);

}  // namespace normkit::detail
