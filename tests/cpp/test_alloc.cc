// Heap use per call, counted by replacing the process's allocator
// (alloc_counter.cc): the forward ops allocate nothing once warm — not in
// the library, not in the OpenMP runtime it calls — whatever the shape,
// dtype and thread count. The backward's allocations are counted and bounded
// here and documented in docs/reliability.md.
#include <gtest/gtest.h>

#include <iostream>

#include "alloc_counter.hpp"
#include "cases.hpp"

namespace normkit::test {
namespace {

struct Shape {
  std::int64_t rows, D;
};
// One decode row, a batch the library splits over threads, a wide row.
const std::vector<Shape> kShapes = {{1, 4096}, {1000, 768}, {3, 65537}};

template <class F>
AllocCount count_steady(F&& call, int reps = 10) {
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
        Buffer x(c.x, s.rows, s.D), r(c.x, s.rows, s.D), y(c.x, s.rows, s.D), h(c.x, s.rows, s.D);
        Buffer mean(stat_dtype(c.x), 1, s.rows), rstd(stat_dtype(c.x), 1, s.rows);
        fill_normal(x, rng);
        fill_normal(r, rng);
        const Params p = make_params(c, s.D, rng);
        AllocCount plain, fused;
        if (c.op == Op::layer) {
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

// The backward's per-call heap use: printed (for docs/reliability.md) and
// bounded by what a parameter-gradient reduction over threads needs — a few
// allocations per call, at most a few partial (D) sums per thread in f32
// (f64 for f64) plus a fixed amount — independent of the number of rows.
TEST(Allocation, BackwardIsBoundedAndIndependentOfRows) {
  std::mt19937_64 rng(2);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : all_cases()) {
      if (c.affine != Affine::both && c.affine != Affine::offset) continue;
      for (std::int64_t D : {std::int64_t{768}, std::int64_t{4097}}) {
        std::vector<AllocCount> per_rows;
        for (std::int64_t rows : {std::int64_t{64}, std::int64_t{1024}}) {
          SCOPED_TRACE(name_of(c) + " " + std::to_string(rows) + "x" + std::to_string(D));
          Buffer x(c.x, rows, D), dy(c.x, rows, D), y(c.x, rows, D), dx(c.x, rows, D);
          Buffer mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows), dw(c.w, 1, D), db(c.w, 1, D);
          fill_normal(x, rng);
          fill_normal(dy, rng);
          const Params p = make_params(c, D, rng);
          AllocCount n;
          if (c.op == Op::layer) {
            layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec());
            n = count_steady([&] {
              layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), db.vec());
            });
          } else {
            rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset);
            n = count_steady([&] {
              rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dw.vec(), p.offset);
            });
          }
          const std::uint64_t calls = n.calls / 10, bytes = n.bytes / 10;
          std::cout << "backward " << name_of(c) << " " << rows << "x" << D << " threads=" << threads << ": "
                    << calls << " allocations, " << bytes << " bytes per call\n";
          per_rows.push_back(n);
          const std::uint64_t acc = c.x == DType::f64 ? 8 : 4;
          // 2 partial sums (dweight, dbias) per row block; at most 64 blocks.
          const std::uint64_t bound = 2 * 64 * static_cast<std::uint64_t>(D) * acc + 4096;
          EXPECT_LE(calls, 8u);
          EXPECT_LE(bytes, bound);
        }
        EXPECT_EQ(per_rows[0].calls, per_rows[1].calls) << name_of(c) << " D=" << D << ": grows with rows";
        EXPECT_EQ(per_rows[0].bytes, per_rows[1].bytes) << name_of(c) << " D=" << D << ": grows with rows";
      }
    }
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace normkit::test
