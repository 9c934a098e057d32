// The CUDA launch plan (src/cuda/launch_plan.hpp): plain host code, so its
// rules are checked here on every machine, with or without CUDA or a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda/launch_plan.hpp"
#include "normkit/error.hpp"

namespace normkit::detail::cuda {
namespace {

struct Shape {
  bool backward;
  std::size_t x_size;
  int grads;
};

PlanInput input(const Shape& s, std::int64_t rows, std::int64_t D, int sms = 132) {
  PlanInput in;
  in.backward = s.backward;
  in.rows = rows;
  in.D = D;
  in.x_size = s.x_size;
  in.compute_size = s.x_size == 8 ? 8 : 4;
  in.param_grads = s.backward ? s.grads : 0;
  in.sm_count = sms;
  return in;
}

const std::vector<Shape> kShapes = {{false, 4, 0}, {false, 2, 0}, {false, 8, 0}, {true, 4, 2},
                                    {true, 2, 1},  {true, 2, 0},  {true, 8, 2}};
const std::vector<std::int64_t> kD = {1,    2,     3,     7,     8,     31,     32,     33,     127,   128,
                                      129,  768,   1000,  1024,  2048,  4096,   4097,   8192,   16384, 16385,
                                      32768, 65536, 65537, 131072, 262144, 262147, 1 << 20, 3000001};

// Every element of a row belongs to exactly one thread's packs: the team of
// a row (or of a segment) holds at least its elements, no thread holds more
// packs than its registers allow, and a split row's segments tile it.
TEST(CudaPlan, TeamsCoverEveryElementWithinTheRegisterBudget) {
  for (const Shape& s : kShapes)
    for (std::int64_t D : kD) {
      SCOPED_TRACE("backward=" + std::to_string(s.backward) + " x_size=" + std::to_string(s.x_size) +
                   " D=" + std::to_string(D));
      const Plan p = plan_launch("test", input(s, 1000, D));
      const int N = pack_elems(s.x_size);
      EXPECT_GE(p.packs_per_thread, 1);
      EXPECT_LE(p.packs_per_thread, max_packs(s.backward, s.x_size));
      EXPECT_EQ(p.threads % kWarp, 0);
      EXPECT_LE(p.threads, kMaxThreads);
      const std::int64_t team = p.mapping == Mapping::warp_per_row ? kWarp : p.threads;
      EXPECT_GE(team * p.packs_per_thread * N, p.chunk_elems);
      EXPECT_TRUE(p.chunk_elems % N == 0 || p.chunks == 1);
      EXPECT_GE(std::int64_t{p.chunks} * p.chunk_elems, D);
      EXPECT_LT(std::int64_t{p.chunks - 1} * p.chunk_elems, D);  // no empty segment
      if (p.mapping != Mapping::split_row) {
        EXPECT_EQ(p.chunks, 1);
        EXPECT_EQ(p.chunk_elems, D);
      }
    }
}

// The mapping follows D: a warp for rows a warp can hold, a block up to what
// a block can hold, segments beyond; never a wider mapping than needed.
TEST(CudaPlan, MappingGrowsWithTheRow) {
  for (const Shape& s : kShapes) {
    const std::int64_t warp_max = std::int64_t{kWarp} * max_packs(s.backward, s.x_size) * pack_elems(s.x_size);
    const std::int64_t block_max =
        std::int64_t{kMaxThreads} * max_packs(s.backward, s.x_size) * pack_elems(s.x_size);
    EXPECT_EQ(plan_launch("t", input(s, 4, warp_max)).mapping, Mapping::warp_per_row);
    EXPECT_EQ(plan_launch("t", input(s, 4, warp_max + 1)).mapping, Mapping::block_per_row);
    EXPECT_EQ(plan_launch("t", input(s, 4, block_max)).mapping, Mapping::block_per_row);
    EXPECT_EQ(plan_launch("t", input(s, 4, block_max + 1)).mapping, Mapping::split_row);
  }
  // The widest required row, 262144, is a split row of f32 forward.
  EXPECT_EQ(plan_launch("t", input(kShapes[0], 1, 262144)).mapping, Mapping::split_row);
}

// The grid never has a block without rows, and with parameter gradients it
// is the fixed partition: a function of rows, D and the SM count only.
TEST(CudaPlan, GridAndPartitions) {
  for (const Shape& s : kShapes)
    for (std::int64_t rows : {1, 3, 4, 5, 263, 1000, 100000})
      for (int sms : {1, 108, 132}) {
        const Plan p = plan_launch("t", input(s, rows, 768, sms));
        const std::int64_t per_block = p.mapping == Mapping::warp_per_row ? kWarpsPerBlock : 1;
        EXPECT_GE(p.grid, 1);
        EXPECT_LE(p.grid, (rows + per_block - 1) / per_block);
        if (s.backward && s.grads > 0) {
          EXPECT_EQ(p.partitions, p.grid);
          EXPECT_LE(p.partitions, std::int64_t{sms} * kPartitionsPerSm);
          EXPECT_EQ(p.partial_bytes % 256, 0u);
          EXPECT_GE(p.partial_bytes, static_cast<std::size_t>(p.partitions * 768 * s.grads) * (s.x_size == 8 ? 8 : 4));
        } else {
          EXPECT_EQ(p.partitions, 0);
          EXPECT_EQ(p.partial_bytes, 0u);
        }
      }
}

// The warp mapping's backward sums its teams' partial gradients in shared
// memory: one row per wanted gradient in the arithmetic's type.
TEST(CudaPlan, SharedMemoryOfTheWarpBackward) {
  const Plan p = plan_launch("t", input({true, 2, 2}, 1000, 256));
  ASSERT_EQ(p.mapping, Mapping::warp_per_row);
  EXPECT_EQ(p.shared_bytes, 256u * 2 * 4);
  EXPECT_EQ(plan_launch("t", input({true, 2, 0}, 1000, 256)).shared_bytes, 0u);
  EXPECT_EQ(plan_launch("t", input({false, 2, 0}, 1000, 256)).shared_bytes, 0u);
}

// A split row keeps per-(row, segment) statistics in scratch.
TEST(CudaPlan, SplitRowStatistics) {
  for (bool backward : {false, true}) {
    const Plan p = plan_launch("t", input({backward, 4, 0}, 7, 1 << 20));
    ASSERT_EQ(p.mapping, Mapping::split_row);
    const std::size_t need = 7u * static_cast<std::size_t>(p.chunks) * stats_per_segment(backward) * 4;
    EXPECT_GE(p.stats_bytes, need);
    EXPECT_LT(p.stats_bytes, need + 256);
    EXPECT_EQ(p.scratch_bytes(), p.stats_bytes + p.partial_bytes);
  }
}

// The fixed partition of rows: contiguous, complete, sizes differing by at
// most one, and exact for row counts far beyond 2^31.
TEST(CudaPlan, PartitionOfRows) {
  for (std::int64_t rows : {std::int64_t{1}, std::int64_t{7}, std::int64_t{1000}, std::int64_t{1} << 33,
                            std::numeric_limits<std::int64_t>::max() / 3})
    for (std::int64_t P : {std::int64_t{1}, std::int64_t{3}, std::int64_t{264}}) {
      if (P > rows) continue;
      EXPECT_EQ(partition_begin(0, P, rows), 0);
      EXPECT_EQ(partition_begin(P, P, rows), rows);
      const std::int64_t q = rows / P;
      for (std::int64_t p : {std::int64_t{0}, P / 2, P - 1}) {
        const std::int64_t n = partition_begin(p + 1, P, rows) - partition_begin(p, P, rows);
        EXPECT_TRUE(n == q || n == q + 1) << "rows=" << rows << " P=" << P << " p=" << p;
      }
    }
}

// Offsets are 64-bit: an element past 2^31 (and past 2^32) is addressed
// exactly, as a tensor above 2^31 elements needs.
TEST(CudaPlan, OffsetsAre64Bit) {
  EXPECT_EQ(element_offset(3, std::int64_t{1} << 30, 5), (std::int64_t{3} << 30) + 5);
  EXPECT_EQ(element_offset((std::int64_t{1} << 31) + 1, 4096, 4095),
            ((std::int64_t{1} << 31) + 1) * 4096 + 4095);
}

TEST(CudaPlan, VectorAccessNeedsAlignedBaseAndStride) {
  alignas(16) static float buf[64];
  EXPECT_TRUE(vector_aligned(buf, 4, 4));
  EXPECT_FALSE(vector_aligned(buf + 1, 4, 4));  // base off by 4 bytes
  EXPECT_FALSE(vector_aligned(buf, 5, 4));      // rows drift off alignment
  EXPECT_TRUE(vector_aligned(buf, 8, 2));       // 16 bytes of f16
  EXPECT_FALSE(vector_aligned(buf, 12, 2));
}

// Shapes the GPU cannot run are refused with an Error naming the function,
// not launched with a wrapped grid or a truncated scratch size.
TEST(CudaPlan, RefusesWhatCannotRun) {
  try {
    plan_launch("rms_norm", input({false, 4, 0}, 1, std::int64_t{1} << 40));
    FAIL() << "a row too wide for grid.y was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rms_norm: x has D = "), std::string::npos) << e.what();
  }
  try {
    plan_launch("layer_norm", input({false, 4, 0}, std::numeric_limits<std::int64_t>::max() / 2, 1 << 22));
    FAIL() << "scratch beyond a size_t was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_norm: x of shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace normkit::detail::cuda
