// Scratch memory for the CPU kernels: stand-in rows for absent weights and
// biases, and the grow-only buffers of the parameter-gradient reduction.
//
// Everything here is per calling thread (thread_local) and grow-only: a call
// allocates only when it needs more than any earlier call on the same thread,
// and the memory is released when that thread exits. The largest holders are
// the parameter-gradient partial sums, bounded by kParamScratchBytes below.
#pragma once

#include <cstddef>
#include <cstdint>

#include "normkit/tensor.hpp"

namespace normkit::detail {

// D copies of `value` (0 or 1) in dtype t. An absent weight reads as a row of
// ones and an absent bias as a row of zeros, so the kernels have a single
// code path; the extra stream is read from cache.
const void* constant_row(DType t, std::int64_t D, int value);

// What each of a thread's scratch buffers holds; one buffer per (thread, use).
enum class Scratch : int {
  param_partials,   // the backward's per-block dweight/dbias partial sums
  gradient_sums,    // the f64 row those partials are summed into
  arranged_params,  // weight (+ offset) and bias arranged for the loops
  kept_h,           // the fused forward's streamed f16 h, widened, for its output pass
  count,
};

// A 64-byte aligned buffer of at least `bytes` bytes, one per (thread, use).
// Contents are unspecified.
void* scratch_buffer(std::size_t bytes, Scratch use);

// The fixed partition of rows used by dweight/dbias: row block b covers rows
// [b·rows_per_block, min(rows, (b+1)·rows_per_block)). It depends only on
// rows, D and the accumulator size, never on the thread count, and the block
// partial sums are added in block order, so the gradients are bitwise
// identical for any number of threads.
struct ParamBlocks {
  std::int64_t count = 1;
  std::int64_t rows_per_block = 1;
};

// At most this many blocks: enough to keep 64 threads busy.
inline constexpr std::int64_t kMaxParamBlocks = 64;
// Rows per block. Each block costs 2·D partial sums, accumulated, written and
// read back by the reduction, so blocks should be large; but they are also
// the unit of work for threads, so a small call needs several. A block has
// kRowsPerBlock rows while that leaves at least kMinParamBlocks blocks, fewer
// rows (down to kMinRowsPerBlock) for smaller calls, more where
// kMaxParamBlocks or the memory bound would be exceeded (measured in
// docs/kernels.md, "Backward").
inline constexpr std::int64_t kRowsPerBlock = 32;
inline constexpr std::int64_t kMinRowsPerBlock = 8;
inline constexpr std::int64_t kMinParamBlocks = 4;
// Upper bound on the partial-sum memory (unless a single block needs more):
// the partials must stay in the L2 of a core, or they add to the memory
// traffic the op is bound by (docs/kernels.md, "Backward").
inline constexpr std::size_t kParamScratchBytes = std::size_t{1} << 20;

ParamBlocks param_blocks(std::int64_t rows, std::int64_t D_padded, std::size_t acc_bytes);

}  // namespace normkit::detail
