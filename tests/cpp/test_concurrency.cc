// The library called concurrently: many std::threads at once on different
// tensors, from inside an OpenMP parallel region, from a thread pool, and
// while another thread keeps changing set_num_threads. Every call must give
// the oracle's result (within budget) and bitwise the same bytes as the
// same call made alone.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "cases.hpp"
#include "tolerance.hpp"

namespace normkit::test {
namespace {

using Bytes = std::vector<std::vector<unsigned char>>;

// One call's inputs and how to run it; run() allocates its own outputs and
// returns their bytes, so any number of threads can run the same job.
struct Job {
  std::string name;
  Case c;
  bool fused = false;
  std::shared_ptr<const Array> x, residual, dy;
  std::shared_ptr<const Params> p;
  Bytes expected;

  Bytes run() const {
    const std::int64_t rows = x->rows(), D = x->cols();
    const DType st = stat_dtype(c.x);
    Array y(c.x, rows, D), h(c.x, rows, D), mean(st, 1, rows), rstd(st, 1, rows), dx(c.x, rows, D);
    Array dweight(c.w, 1, D), dbias(c.w, 1, D);
    const double eps = 1e-5;
    const bool layer = c.op == NormKind::layer_norm;
    if (fused && layer) {
      add_layer_norm(x->cmat(), residual->cmat(), p->w(), p->b(), eps, h.mat(), y.mat(), mean.vec(), rstd.vec());
      add_layer_norm_backward(dy->cmat(), {}, h.cmat(), mean.cvec(), rstd.cvec(), p->w(), dx.mat(), dweight.vec(),
                              dbias.vec());
    } else if (fused) {
      add_rms_norm(x->cmat(), residual->cmat(), p->w(), eps, h.mat(), y.mat(), rstd.vec(), p->offset);
      add_rms_norm_backward(dy->cmat(), {}, h.cmat(), rstd.cvec(), p->w(), dx.mat(), dweight.vec(), p->offset);
    } else if (layer) {
      layer_norm(x->cmat(), p->w(), p->b(), eps, y.mat(), mean.vec(), rstd.vec());
      layer_norm_backward(dy->cmat(), x->cmat(), mean.cvec(), rstd.cvec(), p->w(), dx.mat(), dweight.vec(),
                          dbias.vec());
    } else {
      rms_norm(x->cmat(), p->w(), eps, y.mat(), rstd.vec(), p->offset);
      rms_norm_backward(dy->cmat(), x->cmat(), rstd.cvec(), p->w(), dx.mat(), dweight.vec(), p->offset);
    }
    return {y.bytes(), h.bytes(), mean.bytes(), rstd.bytes(), dx.bytes(), dweight.bytes(), dbias.bytes()};
  }

  // The outputs of one run against the oracle: y (of x, or of h as stored)
  // and dx, with the budgets of tolerance.hpp.
  void check_against_oracle() const {
    SCOPED_TRACE(name);
    const std::int64_t rows = x->rows(), D = x->cols();
    Array y(c.x, rows, D), h(c.x, rows, D), mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows);
    Array dx(c.x, rows, D);
    const Bytes b = run();
    std::memcpy(y.data(), b[0].data(), b[0].size());
    std::memcpy(h.data(), b[1].data(), b[1].size());
    std::memcpy(dx.data(), b[4].data(), b[4].size());
    const Array& xin = fused ? h : *x;
    const std::vector<double> xv = xin.values(), dyv = dy->values();
    const reference::Forward f = reference_forward(c, xin.cmat(), *p, 1e-5);
    const reference::Backward bw = reference_backward(c, dy->cmat(), xin.cmat(), *p, 1e-5);
    const Scales s = scales(xv, &dyv, rows, D, p->gain_size, p->shift, f, c.op == NormKind::layer_norm, c.x);
    EXPECT_TRUE(within_budget(y.values(), f.y, s.y, c.x, c.x, growth(D), "y"));
    EXPECT_TRUE(within_budget(dx.values(), bw.dx, s.dx, c.x, c.x, growth(D), "dx"));
  }
};

// Jobs of every op kind and dtype; large enough (≥ 256 KiB) that the
// library itself splits them over several threads when it may.
std::vector<Job> make_jobs() {
  std::vector<Job> jobs;
  std::mt19937_64 rng(123);
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{256, 768}, {97, 1111}, {1024, 64}, {3, 20000}};
  int k = 0;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (NormKind op : kNormKinds) {
      for (bool fused : {false, true}) {
        Job j;
        j.c = {op, t, t, op == NormKind::layer_norm ? Affine::both : Affine::offset};
        j.fused = fused;
        const auto [rows, D] = shapes[static_cast<std::size_t>(k++) % shapes.size()];
        j.name = name_of(j.c) + (fused ? "_fused" : "") + "_" + std::to_string(rows) + "x" + std::to_string(D);
        Array x(t, rows, D), residual(t, rows, D), dy(t, rows, D);
        fill_normal(x, rng, 0.5, 2.0);
        fill_normal(residual, rng);
        fill_normal(dy, rng);
        j.x = std::make_shared<const Array>(std::move(x));
        j.residual = std::make_shared<const Array>(std::move(residual));
        j.dy = std::make_shared<const Array>(std::move(dy));
        j.p = std::make_shared<const Params>(make_params(j.c, D, rng));
        jobs.push_back(std::move(j));
      }
    }
  }
  // Expected bytes: each job run alone, on the calling thread only.
  set_num_threads(1);
  for (Job& j : jobs) j.expected = j.run();
  set_num_threads(0);
  return jobs;
}

const std::vector<Job>& jobs() {
  static const std::vector<Job> all = make_jobs();
  return all;
}

TEST(Concurrency, SingleThreadedResultsMatchOracle) {
  for (const Job& j : jobs()) j.check_against_oracle();
  // And the library's own threading gives the same bytes as one thread.
  for (const Job& j : jobs()) EXPECT_TRUE(j.run() == j.expected) << j.name;
}

// Runs every job `reps` times on each of `n` std::threads at once (thread i
// starts at job i, so different threads work on different tensors at any
// moment); returns the names of jobs that ever differed from running alone.
std::vector<std::string> hammer(int n, int reps, const std::function<void()>& on_the_side = {}) {
  std::mutex m;
  std::vector<std::string> bad;
  std::atomic<bool> done{false};
  std::thread side;
  if (on_the_side) side = std::thread([&] {
    while (!done.load()) on_the_side();
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      const auto& all = jobs();
      for (int r = 0; r < reps; ++r)
        for (std::size_t k = 0; k < all.size(); ++k) {
          const Job& j = all[(k + static_cast<std::size_t>(i)) % all.size()];
          if (j.run() != j.expected) {
            std::lock_guard<std::mutex> lock(m);
            bad.push_back(j.name);
          }
        }
    });
  for (std::thread& t : threads) t.join();
  done = true;
  if (side.joinable()) side.join();
  return bad;
}

TEST(Concurrency, ManyThreadsAtOnceBitwiseAsAlone) {
  (void)jobs();
  const std::vector<std::string> bad = hammer(12, 2);
  EXPECT_TRUE(bad.empty()) << bad.size() << " runs differed, first: " << bad.front();
}

// set_num_threads is process-wide and may change between (and during) any
// other thread's calls; results never depend on it.
TEST(Concurrency, SetNumThreadsChangedConcurrently) {
  (void)jobs();
  int n = 0;
  const std::vector<std::string> bad = hammer(8, 2, [&n] {
    set_num_threads(n % 9);  // 0 (the default), 1, ..., 8
    ++n;
    std::this_thread::yield();
  });
  set_num_threads(0);
  EXPECT_GT(n, 0);
  EXPECT_TRUE(bad.empty()) << bad.size() << " runs differed, first: " << bad.front();
}

// The caller is itself an OpenMP parallel region: each of its threads calls
// the library on its own tensors (the library then stays on that thread).
// Also with nested parallelism allowed, where the library could fork again.
TEST(Concurrency, InsideOpenMPParallelRegion) {
  const auto& all = jobs();
  for (int levels : {1, 2}) {
    omp_set_max_active_levels(levels);
    std::atomic<int> mismatches{0}, calls{0};
#pragma omp parallel num_threads(8)
    {
      const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
      for (std::size_t k = 0; k < all.size(); ++k) {
        const Job& j = all[(k + t) % all.size()];
        if (j.run() != j.expected) ++mismatches;
        ++calls;
      }
    }
    EXPECT_EQ(calls.load(), 8 * static_cast<int>(all.size())) << "levels=" << levels;
    EXPECT_EQ(mismatches.load(), 0) << "levels=" << levels;
  }
  omp_set_max_active_levels(1);
}

// A minimal fixed-size pool, as a server would keep one: workers pull tasks
// from a queue until it is closed.
class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 0; i < n; ++i)
      workers_.emplace_back([this] {
        for (;;) {
          std::function<void()> task;
          {
            std::unique_lock<std::mutex> lock(m_);
            cv_.wait(lock, [this] { return closed_ || !tasks_.empty(); });
            if (tasks_.empty()) return;
            task = std::move(tasks_.front());
            tasks_.pop_front();
          }
          task();
        }
      });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      closed_ = true;
    }
    cv_.notify_all();
    for (std::thread& w : workers_) w.join();
  }
  template <class F>
  std::future<bool> submit(F f) {
    auto task = std::make_shared<std::packaged_task<bool()>>(std::move(f));
    std::future<bool> fut = task->get_future();
    {
      std::lock_guard<std::mutex> lock(m_);
      tasks_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return fut;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
  bool closed_ = false;
};

TEST(Concurrency, FromAThreadPool) {
  const auto& all = jobs();
  std::vector<std::future<bool>> results;
  {
    Pool pool(8);
    for (int rep = 0; rep < 3; ++rep)
      for (const Job& j : all) results.push_back(pool.submit([&j] { return j.run() == j.expected; }));
    for (std::size_t i = 0; i < results.size(); ++i)
      EXPECT_TRUE(results[i].get()) << all[i % all.size()].name;
  }
}

}  // namespace
}  // namespace normkit::test
