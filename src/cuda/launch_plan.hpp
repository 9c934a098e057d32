// How a CUDA call is mapped onto the GPU: plain host code (no CUDA header),
// shared by the launchers (src/cuda/*.cu) and the unit tests, which run it
// on the CPU. Everything here is a function of the shape, the dtypes and
// the device's SM count, so a given call on a given GPU model always runs
// the same way — which is what makes dweight/dbias bitwise reproducible.
//
// A row is normalized by a team of threads that holds its values in
// registers, so x is read from memory once:
//   * warp_per_row:  D small enough for 32 threads; 4 teams (rows) per block;
//   * block_per_row: one block of up to kMaxThreads threads per row;
//   * split_row:     D too wide for one block: the row is cut into
//                    `chunks` segments, one block each (grid.y), and the
//                    kernel runs twice: once for per-segment statistics,
//                    once to combine them and write the outputs.
// A thread holds up to max_packs() "packs" of N = 16 / sizeof(x) elements,
// each one 16-byte access of x; the packs of a team are interleaved
// (thread t holds packs t, t + T, t + 2T, ...) so a team's loads coalesce.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define NORMKIT_HD __host__ __device__
#else
#define NORMKIT_HD
#endif

namespace normkit::detail::cuda {

enum class Mapping : std::uint8_t { warp_per_row, block_per_row, split_row };

const char* mapping_name(Mapping m) noexcept;

inline constexpr int kWarp = 32;
// The largest block. The kernels are compiled with __launch_bounds__ of this
// size, which lets each thread have up to 128 registers: room for a row of
// kForwardElems values (or the backward's four arrays of kBackwardElems).
inline constexpr int kMaxThreads = 512;
inline constexpr int kWarpsPerBlock = 4;  // warp_per_row: rows per block
// Resident threads per SM on sm_80 and sm_90: blocks per SM for the grid cap.
inline constexpr int kThreadsPerSm = 2048;
// Backward row partitions per SM: each partition writes one partial row of
// dweight/dbias, so more partitions cost more partial traffic (P·D floats),
// fewer leave SMs idle.
inline constexpr int kPartitionsPerSm = 2;

// Values a thread holds in registers (32-bit values; half as many f64).
inline constexpr int kForwardElems = 32;
inline constexpr int kBackwardElems = 16;

// Elements of x per 16-byte pack: f32 4, f16/bf16 8, f64 2.
NORMKIT_HD constexpr int pack_elems(std::size_t x_size) noexcept { return static_cast<int>(16 / x_size); }
// Packs a thread may hold: its register budget over the pack size (f64
// values take two registers each, so f64 gets half the elements).
NORMKIT_HD constexpr int max_packs(bool backward, std::size_t x_size) noexcept {
  const int elems = (backward ? kBackwardElems : kForwardElems) / (x_size == 8 ? 2 : 1);
  return elems / pack_elems(x_size);
}

struct PlanInput {
  bool backward = false;
  std::int64_t rows = 0, D = 0;  // rows >= 1, D >= 1
  std::size_t x_size = 4;        // bytes per element of x (dy in the backward)
  std::size_t compute_size = 4;  // 4 (f32 arithmetic) or 8 (f64)
  int param_grads = 0;           // backward: how many of dweight, dbias are wanted (0..2)
  int sm_count = 1;
};

struct Plan {
  Mapping mapping = Mapping::warp_per_row;
  int threads = kWarp;             // per block, a multiple of 32
  int packs_per_thread = 1;        // <= max_packs
  int chunks = 1;                  // segments per row (grid.y)
  std::int64_t chunk_elems = 0;    // elements per segment, a multiple of the pack (the last may be short)
  std::int64_t grid = 1;           // blocks along rows (grid.x)
  std::int64_t partitions = 0;     // backward with parameter gradients: row partitions (== grid)
  std::size_t shared_bytes = 0;    // dynamic shared memory per block
  // Scratch, one device allocation: per-(row, segment) statistics of the
  // split mapping, then the backward's partial sums (partitions × D per
  // wanted gradient), each part aligned to 256 bytes.
  std::size_t stats_bytes = 0, partial_bytes = 0;
  std::size_t scratch_bytes() const { return stats_bytes + partial_bytes; }
};

// The launch of a call; throws normkit::Error (naming `fn`) when its scratch
// memory would not fit in a size_t.
Plan plan_launch(const char* fn, const PlanInput& in);

// Values per (row, segment) in the split mapping's statistics: forward
// (mean, M2, scale exponent), backward (Σg, Σg·x̂).
NORMKIT_HD constexpr int stats_per_segment(bool backward) noexcept { return backward ? 2 : 3; }

// The fixed partition of rows among P blocks: block p takes rows
// [partition_begin(p), partition_begin(p + 1)), the first rows % P blocks
// one row more. No product of two row counts is formed, so it holds for
// any int64 rows.
NORMKIT_HD constexpr std::int64_t partition_begin(std::int64_t p, std::int64_t P, std::int64_t rows) noexcept {
  const std::int64_t q = rows / P, r = rows % P;
  return p * q + (p < r ? p : r);
}

NORMKIT_HD constexpr std::int64_t min64(std::int64_t a, std::int64_t b) noexcept { return a < b ? a : b; }

// The element offset of (row, col) in an array with row_stride, in 64 bits:
// tensors above 2^31 elements are addressed exactly.
NORMKIT_HD constexpr std::int64_t element_offset(std::int64_t row, std::int64_t row_stride,
                                                 std::int64_t col) noexcept {
  return row * row_stride + col;
}

// Can an array be read or written in 16-byte accesses at every pack? Its
// base address and its row stride in bytes must be multiples of 16 (packs
// start at multiples of N elements, N·size a multiple of 16). A null
// (absent) array does not prevent it.
inline bool vector_aligned(const void* p, std::int64_t row_stride, std::size_t elem_size) noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  return addr % 16 == 0 && (static_cast<std::uint64_t>(row_stride) * elem_size) % 16 == 0;
}

}  // namespace normkit::detail::cuda
