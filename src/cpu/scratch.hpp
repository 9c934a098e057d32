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

// A 64-byte aligned buffer of at least `bytes` bytes, one per (thread, slot).
// Contents are unspecified.
void* scratch_buffer(std::size_t bytes, int slot);

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
// At least this many rows per block, so the partial sums (2·D f32
// accumulators per block, written once and read once by the reduction) stay
// small next to the rows they summarise (3·D elements each). At 8 rows they
// added a third to a bf16 backward's memory traffic: beyond cache on one
// thread, bf16 LayerNorm backward at D = 8192 (512 rows, 64 blocks) ran at
// 62-65% of the ceiling, at 74-76% with 32 rows per block (16 blocks); at
// D = 65536 (64 rows) 63-64% against 72%. The price: a call with few rows
// has few blocks to spread over threads (64 rows: 2 blocks).
inline constexpr std::int64_t kMinRowsPerBlock = 32;
// Upper bound on the partial-sum memory (unless a single block needs more).
inline constexpr std::size_t kParamScratchBytes = std::size_t{16} << 20;

ParamBlocks param_blocks(std::int64_t rows, std::int64_t D_padded, std::size_t acc_bytes);

}  // namespace normkit::detail
