#include "cuda/launch_plan.hpp"

#include <algorithm>
#include <string>

#include "normkit/error.hpp"

namespace normkit::detail::cuda {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// The team for `packs` packs of one row (or segment): the fewest packs per
// thread that fit in kMaxThreads threads, so that a row spreads over as many
// threads (memory requests in flight) as the block allows.
void size_team(std::int64_t packs, int max_packs_, Plan& p) {
  const std::int64_t ppt = std::max<std::int64_t>(1, ceil_div(packs, kMaxThreads));
  p.packs_per_thread = static_cast<int>(std::min<std::int64_t>(ppt, max_packs_));
  p.threads = static_cast<int>(round_up(ceil_div(packs, p.packs_per_thread), kWarp));
}

// grid.y, which numbers a row's segments, is at most 65535.
constexpr std::int64_t kMaxChunks = 65535;

[[noreturn]] void too_large(const char* fn, const PlanInput& in) {
  throw Error(std::string(fn) + ": x of shape (" + std::to_string(in.rows) + ", " + std::to_string(in.D) +
              ") needs more CUDA scratch memory than a size_t can count");
}

// a·b·c bytes rounded up to 256, or overflow.
bool bytes_of(std::int64_t a, std::int64_t b, std::int64_t c, std::size_t& out) {
  std::int64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) || abc > INT64_MAX - 255)
    return false;
  out = static_cast<std::size_t>(round_up(abc, 256));
  return true;
}

}  // namespace

const char* mapping_name(Mapping m) noexcept {
  switch (m) {
    case Mapping::warp_per_row: return "warp_per_row";
    case Mapping::block_per_row: return "block_per_row";
    case Mapping::split_row: return "split_row";
  }
  return "?";
}

Plan plan_launch(const char* fn, const PlanInput& in) {
  Plan p;
  const int N = pack_elems(in.x_size);
  const int mp = max_packs(in.backward, in.x_size);
  const std::int64_t packs = ceil_div(in.D, N);
  std::int64_t rows_per_block = 1;
  if (packs <= std::int64_t{kWarp} * mp) {
    // A warp per row: no shared memory or block barrier in the row's
    // reductions, and 4 rows per block keep the SM's block slots for
    // occupancy rather than spending one on each small row.
    p.mapping = Mapping::warp_per_row;
    p.packs_per_thread = static_cast<int>(ceil_div(packs, kWarp));
    p.threads = kWarp * kWarpsPerBlock;
    p.chunk_elems = in.D;
    rows_per_block = kWarpsPerBlock;
  } else if (packs <= std::int64_t{kMaxThreads} * mp) {
    p.mapping = Mapping::block_per_row;
    size_team(packs, mp, p);
    p.chunk_elems = in.D;
  } else {
    // Cut the row into the fewest segments a full block can hold, of equal
    // size in whole packs, so 16-byte accesses stay aligned in every one.
    p.mapping = Mapping::split_row;
    const std::int64_t per_block = std::int64_t{kMaxThreads} * mp;
    const std::int64_t chunks = ceil_div(packs, per_block);
    if (chunks > kMaxChunks)
      throw Error(std::string(fn) + ": x has D = " + std::to_string(in.D) + ", expected at most " +
                  std::to_string(kMaxChunks * per_block * N) + " on a CUDA device");
    const std::int64_t chunk_packs = ceil_div(packs, chunks);
    size_team(chunk_packs, mp, p);
    p.chunk_elems = chunk_packs * N;
    p.chunks = static_cast<int>(ceil_div(in.D, p.chunk_elems));
  }

  const std::int64_t sms = std::max(1, in.sm_count);
  const std::int64_t row_blocks = ceil_div(in.rows, rows_per_block);
  if (in.backward && in.param_grads > 0) {
    // The partition is fixed by the shape and the SM count alone (not by
    // timing or occupancy), so dweight/dbias are the same bits on every run.
    p.partitions = std::min(row_blocks, sms * kPartitionsPerSm);
    p.grid = p.partitions;
  } else {
    // Rows are independent: a full wave of blocks that stride over the rows.
    const std::int64_t blocks_per_sm = std::max(1, kThreadsPerSm / p.threads);
    p.grid = std::min(row_blocks, sms * blocks_per_sm);
  }
  // The warp mapping's backward sums its teams' partials in shared memory:
  // one row of each wanted gradient, in the arithmetic's type.
  if (in.backward && in.param_grads > 0 && p.mapping == Mapping::warp_per_row)
    p.shared_bytes = static_cast<std::size_t>(in.D) * static_cast<std::size_t>(in.param_grads) * in.compute_size;

  if (p.mapping == Mapping::split_row &&
      !bytes_of(in.rows, std::int64_t{p.chunks} * stats_per_segment(in.backward),
                static_cast<std::int64_t>(in.compute_size), p.stats_bytes))
    too_large(fn, in);
  if (in.backward && in.param_grads > 0 &&
      !bytes_of(p.partitions, in.D, in.param_grads * static_cast<std::int64_t>(in.compute_size), p.partial_bytes))
    too_large(fn, in);
  if (p.stats_bytes > SIZE_MAX - p.partial_bytes) too_large(fn, in);
  return p;
}

}  // namespace normkit::detail::cuda
