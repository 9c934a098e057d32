#include "cpu/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <initializer_list>

#include "cpu/introspect.hpp"

namespace normkit::detail {
namespace {

bool pages_resident(const void* p, std::size_t bytes) {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  if (bytes == 0 || page == 0) return true;
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(p);
  for (const std::uintptr_t at : {first, first + bytes / 2, first + bytes - 1}) {
    unsigned char resident = 0;
    // ENOMEM (not a mapping of this process) and the like: no evidence of a
    // fresh buffer, so keep the default.
    if (mincore(reinterpret_cast<void*>(at & ~(page - 1)), 1, &resident) != 0) return true;
    if (!(resident & 1)) return false;
  }
  return true;
}

}  // namespace

bool streams_output(const void* out, std::int64_t rows, std::int64_t D, std::int64_t row_stride,
                    std::size_t elem_size) {
  const auto size = static_cast<std::int64_t>(elem_size);
  if (rows * D * size < kStreamMinBytes) return false;
  return pages_resident(out, static_cast<std::size_t>(((rows - 1) * row_stride + D) * size));
}

}  // namespace normkit::detail
