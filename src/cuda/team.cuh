// The threads that share one row (or one segment of a row): a warp, or the
// whole block (see launch_plan.hpp). Row sums go through CUB's warp
// reduction, then, for a block, through shared memory in warp order: a
// fixed tree for a given team size, so a row's statistics are the same bits
// on every run.
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <cstdint>

#include "cuda/launch_plan.hpp"

namespace normkit::detail::cuda {

struct Team {
  int lane;   // this thread's index in the team
  int size;   // threads in the team
  int index;  // the team's index in its block (warp teams), else 0
  int per_block;  // teams per block
  bool block;  // the team is the whole block
};

__device__ __forceinline__ Team make_team(bool warp_team) {
  const int t = static_cast<int>(threadIdx.x);
  if (warp_team) return {t % kWarp, kWarp, t / kWarp, static_cast<int>(blockDim.x) / kWarp, false};
  return {t, static_cast<int>(blockDim.x), 0, 1, true};
}

// Shared memory of a block's team reductions: one slot per warp per value.
template <class C>
struct TeamShared {
  typename cub::WarpReduce<C>::TempStorage warp[kMaxThreads / kWarp];
  C slot[2][kMaxThreads / kWarp];
};

// The NaN-propagating maximum: a row holding a NaN must not look finite.
struct MaxKeepNan {
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    return (a != a || a > b) ? a : b;
  }
};

// Sums of a and b over the team, returned to every thread of it. Every
// thread of the team must call it (a block team: every thread of the block).
template <class C>
__device__ __forceinline__ void team_sum2(const Team& t, TeamShared<C>& sh, C& a, C& b) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  a = cub::WarpReduce<C>(sh.warp[warp]).Sum(a);
  __syncwarp();
  b = cub::WarpReduce<C>(sh.warp[warp]).Sum(b);
  a = __shfl_sync(0xffffffffu, a, 0);  // the warp's total is valid in lane 0
  b = __shfl_sync(0xffffffffu, b, 0);
  if (!t.block) return;
  if (t.lane % kWarp == 0) {
    sh.slot[0][warp] = a;
    sh.slot[1][warp] = b;
  }
  __syncthreads();
  const int warps = t.size / kWarp;
  a = sh.slot[0][0];
  b = sh.slot[1][0];
  for (int w = 1; w < warps; ++w) {  // in warp order, the same in every thread
    a += sh.slot[0][w];
    b += sh.slot[1][w];
  }
  __syncthreads();  // the slots are free again
}

template <class C>
__device__ __forceinline__ C team_sum(const Team& t, TeamShared<C>& sh, C a) {
  C unused = C(0);
  team_sum2(t, sh, a, unused);
  return a;
}

// The largest |value| over the team (NaN if any is NaN), to every thread.
template <class C>
__device__ __forceinline__ C team_max(const Team& t, TeamShared<C>& sh, C a) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  a = cub::WarpReduce<C>(sh.warp[warp]).Reduce(a, MaxKeepNan{});
  a = __shfl_sync(0xffffffffu, a, 0);
  if (!t.block) return a;
  if (t.lane % kWarp == 0) sh.slot[0][warp] = a;
  __syncthreads();
  a = sh.slot[0][0];
  for (int w = 1; w < t.size / kWarp; ++w) a = MaxKeepNan{}(a, sh.slot[0][w]);
  __syncthreads();
  return a;
}

}  // namespace normkit::detail::cuda
