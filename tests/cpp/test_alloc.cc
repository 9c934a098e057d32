// Heap use per call, counted by replacing the process's allocator
// (alloc_counter.cc): the forward ops allocate nothing once warm — not in
// the library, not in the OpenMP runtime it calls — whatever the shape,
// dtype and thread count. The backward's allocations are counted and bounded
// here and documented in docs/reliability.md.
#include <gtest/gtest.h>

#include <iostream>
#include <thread>

#include "alloc_counter.hpp"
#include "cases.hpp"
#include "cpu/scratch.hpp"

namespace normkit::test {
namespace {

struct Shape {
  std::int64_t rows, D;
};
// One decode row, a batch the library splits over threads, a wide row.
const std::vector<Shape> kShapes = {{1, 4096}, {256, 768}, {3, 65537}};

template <class F>
AllocCount count_steady(F&& call, int reps = 5) {
  call();  // warm: first-call setup (the OpenMP thread pool) is not per call
  call();
  const Counting counting;
  for (int i = 0; i < reps; ++i) call();
  return counting.count();
}

TEST(Allocation, ForwardAllocatesNothing) {
  std::mt19937_64 rng(1);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : all_cases()) {
      if (c.affine == Affine::none || c.affine == Affine::bias) continue;
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(name_of(c) + " " + std::to_string(s.rows) + "x" + std::to_string(s.D) + " threads=" +
                     std::to_string(threads));
        Array x(c.x, s.rows, s.D), r(c.x, s.rows, s.D), y(c.x, s.rows, s.D), h(c.x, s.rows, s.D);
        Array mean(stat_dtype(c.x), 1, s.rows), rstd(stat_dtype(c.x), 1, s.rows);
        fill_normal(x, rng);
        fill_normal(r, rng);
        const Params p = make_params(c, s.D, rng);
        AllocCount plain, fused;
        if (c.op == NormKind::layer_norm) {
          plain = count_steady([&] { layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec()); });
          fused = count_steady([&] {
            add_layer_norm(x.cmat(), r.cmat(), p.w(), p.b(), 1e-5, h.mat(), y.mat(), mean.vec(), rstd.vec());
          });
        } else {
          plain = count_steady([&] { rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset); });
          fused = count_steady(
              [&] { add_rms_norm(x.cmat(), r.cmat(), p.w(), 1e-5, h.mat(), y.mat(), rstd.vec(), p.offset); });
        }
        EXPECT_EQ(plain.calls, 0u) << plain.bytes << " bytes";
        EXPECT_EQ(fused.calls, 0u) << fused.bytes << " bytes";
      }
    }
  }
  set_num_threads(0);
}

// The counter sees what it should: a vector allocation inside a scope is
// one call of its size (so a zero above is not a counter that never counts).
TEST(Allocation, CounterCounts) {
  const Counting counting;
  std::vector<char> v(12345);
  v[0] = 1;
  EXPECT_EQ(counting.count().calls, 1u);
  EXPECT_EQ(counting.count().bytes, 12345u);
}

// The backward allocates nothing either once warm: its scratch (the
// parameter gradients' per-block partial sums) is thread_local and grow-only
// (src/cpu/scratch.hpp).
TEST(Allocation, BackwardAllocatesNothingOnceWarm) {
  std::mt19937_64 rng(2);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : all_cases()) {
      if (c.affine != Affine::both && c.affine != Affine::offset) continue;
      for (const Shape& s : kShapes) {
        SCOPED_TRACE(name_of(c) + " " + std::to_string(s.rows) + "x" + std::to_string(s.D) + " threads=" +
                     std::to_string(threads));
        Array x(c.x, s.rows, s.D), dy(c.x, s.rows, s.D), y(c.x, s.rows, s.D), dx(c.x, s.rows, s.D);
        Array mean(stat_dtype(c.x), 1, s.rows), rstd(stat_dtype(c.x), 1, s.rows), dw(c.w, 1, s.D), db(c.w, 1, s.D);
        fill_normal(x, rng);
        fill_normal(dy, rng);
        const Params p = make_params(c, s.D, rng);
        AllocCount n;
        if (c.op == NormKind::layer_norm) {
          layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec());
          n = count_steady([&] {
            layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), db.vec());
          });
        } else {
          rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset);
          n = count_steady(
              [&] { rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), p.offset); });
        }
        EXPECT_EQ(n.calls, 0u) << n.bytes << " bytes";
      }
    }
  }
  set_num_threads(0);
}

// The first call on a new thread sets up that thread's scratch: a bounded
// amount (printed, for docs/reliability.md). The backward's partial sums
// are at most kParamScratchBytes, or one row block's 2·D accumulators if
// that is more; add the D doubles of the final sum and the stand-in
// rows of ones/zeros for an absent weight or bias (< 4·D·8 bytes), and, with
// threads, what the OpenMP runtime sets up for a new team.
TEST(Allocation, FirstCallOnANewThreadIsBounded) {
  std::mt19937_64 rng(3);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : {Case{NormKind::layer_norm, DType::f32, DType::f32, Affine::none},
                          Case{NormKind::rms_norm, DType::bf16, DType::f32, Affine::offset},
                          Case{NormKind::layer_norm, DType::f64, DType::f64, Affine::both}}) {
      for (const Shape& s : {Shape{64, 768}, Shape{20000, 768}, Shape{64, 65537}}) {
        SCOPED_TRACE(name_of(c) + " " + std::to_string(s.rows) + "x" + std::to_string(s.D) + " threads=" +
                     std::to_string(threads));
        Array x(c.x, s.rows, s.D), dy(c.x, s.rows, s.D), y(c.x, s.rows, s.D), dx(c.x, s.rows, s.D);
        Array mean(stat_dtype(c.x), 1, s.rows), rstd(stat_dtype(c.x), 1, s.rows), dw(c.w, 1, s.D), db(c.w, 1, s.D);
        fill_normal(x, rng);
        fill_normal(dy, rng);
        const Params p = make_params(c, s.D, rng);
        AllocCount fwd, bwd;
        std::thread([&] {
          {
            const Counting counting;
            if (c.op == NormKind::layer_norm)
              layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec());
            else
              rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset);
            fwd = counting.count();
          }
          const Counting counting;
          if (c.op == NormKind::layer_norm)
            layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), db.vec());
          else
            rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), p.offset);
          bwd = counting.count();
        }).join();
        std::cout << "first call on a new thread, " << name_of(c) << " " << s.rows << "x" << s.D
                  << " threads=" << threads << ": forward " << fwd.calls << " allocations, " << fwd.bytes
                  << " bytes; backward " << bwd.calls << " allocations, " << bwd.bytes << " bytes\n";
        const std::uint64_t acc = c.x == DType::f64 ? 8 : 4, D = static_cast<std::uint64_t>(s.D);
        const std::uint64_t padded = (D + 15) / 16 * 16;
        const std::uint64_t partials = std::max<std::uint64_t>(detail::kParamScratchBytes, 2 * padded * acc);
        const std::uint64_t openmp = threads > 1 ? 64 * 1024 : 0;
        EXPECT_LE(fwd.bytes, 4 * D * 8 + openmp);
        EXPECT_LE(bwd.bytes, partials + D * 8 + 4 * D * 8 + openmp);
        EXPECT_LE(fwd.calls + bwd.calls, 16u);
      }
    }
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace normkit::test
