#include "cpu/scratch.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "normkit/half.hpp"

namespace normkit::detail {
namespace {

constexpr std::align_val_t kAlign{64};

class GrowBuffer {
 public:
  GrowBuffer() = default;
  GrowBuffer(const GrowBuffer&) = delete;
  GrowBuffer& operator=(const GrowBuffer&) = delete;
  ~GrowBuffer() { ::operator delete[](data_, kAlign); }

  // Returns a buffer of at least `bytes` bytes; `grew` tells whether the old
  // contents were lost.
  std::byte* get(std::size_t bytes, bool& grew) {
    grew = bytes > size_;
    if (grew) {
      ::operator delete[](data_, kAlign);
      data_ = nullptr;
      size_ = 0;
      data_ = static_cast<std::byte*>(::operator new[](bytes, kAlign));
      size_ = bytes;
    }
    return data_;
  }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

template <class T>
void fill(std::byte* p, std::size_t n, T v) {
  for (std::size_t i = 0; i < n; ++i) std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

const void* constant_row(DType t, std::int64_t D, int value) {
  thread_local GrowBuffer rows[4][2];
  GrowBuffer& buf = rows[static_cast<int>(t)][value != 0];
  const std::size_t size = dtype_size(t);
  // Grow geometrically so a sequence of widening calls allocates O(log D) times.
  const std::size_t want = static_cast<std::size_t>(D) * size;
  bool grew = false;
  std::byte* p = buf.get(want > buf.size() ? std::max(want, 2 * buf.size()) : want, grew);
  if (grew) {
    const std::size_t n = buf.size() / size;
    const float f = static_cast<float>(value);
    switch (t) {
      case DType::f32: fill(p, n, f); break;
      case DType::f64: fill(p, n, static_cast<double>(value)); break;
      case DType::f16: fill(p, n, to_f16(f)); break;
      case DType::bf16: fill(p, n, to_bf16(f)); break;
    }
  }
  return p;
}

void* scratch_buffer(std::size_t bytes, Scratch use) {
  thread_local GrowBuffer buffers[static_cast<int>(Scratch::count)];
  bool grew = false;
  return buffers[static_cast<int>(use)].get(bytes, grew);
}

ParamBlocks param_blocks(std::int64_t rows, std::int64_t D_padded, std::size_t acc_bytes) {
  const std::int64_t block_bytes = 2 * D_padded * static_cast<std::int64_t>(acc_bytes);
  const std::int64_t by_memory =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(kParamScratchBytes) / block_bytes);
  const std::int64_t max_blocks = std::min(kMaxParamBlocks, by_memory);
  std::int64_t per = std::clamp((rows + kMinParamBlocks - 1) / kMinParamBlocks, kMinRowsPerBlock, kRowsPerBlock);
  per = std::max(per, (rows + max_blocks - 1) / max_blocks);
  per = std::min(per, rows);
  return {(rows + per - 1) / per, per};
}

}  // namespace normkit::detail
