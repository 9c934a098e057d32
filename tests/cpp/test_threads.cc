// Determinism: every output, including the parameter gradients reduced
// over rows, is bitwise identical for 1, 2 and 7 threads, and a backward's
// outputs do not depend on which parameter gradients it is asked for.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "cases.hpp"

namespace normkit::test {
namespace {

struct Outputs {
  std::vector<unsigned char> y, stats, dx, dweight, dbias;
  bool operator==(const Outputs&) const = default;
};

Outputs run_all(const Case& c, const Array& x, const Array& dy, const Params& p) {
  const std::int64_t rows = x.rows(), D = x.cols();
  Array y(c.x, rows, D), mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows), dx(c.x, rows, D);
  Array dweight(c.w, 1, D), dbias(c.w, 1, D);
  if (c.op == NormKind::layer_norm) {
    layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec());
    layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), dbias.vec());
  } else {
    rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset);
    rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), dweight.vec(), p.offset);
  }
  std::vector<unsigned char> stats = mean.bytes();
  stats.insert(stats.end(), rstd.bytes().begin(), rstd.bytes().end());
  return {y.bytes(), stats, dx.bytes(), dweight.bytes(), dbias.bytes()};
}

TEST(Determinism, BitwiseAcrossThreadCounts) {
  std::mt19937_64 rng(9);
  for (const Case& c : all_cases()) {
    if (c.affine == Affine::none || c.affine == Affine::bias) continue;
    for (auto [rows, D] : {std::pair<std::int64_t, std::int64_t>{1000, 768}, {333, 4097}, {5, 65537}}) {
      Array x(c.x, rows, D), dy(c.x, rows, D);
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng);
      const Params p = make_params(c, D, rng);
      set_num_threads(1);
      const Outputs one = run_all(c, x, dy, p);
      for (int t : {2, 7}) {
        set_num_threads(t);
        EXPECT_TRUE(run_all(c, x, dy, p) == one) << name_of(c) << " rows=" << rows << " D=" << D << " threads=" << t;
      }
      set_num_threads(0);
    }
  }
}

// A backward asked for dx alone (frozen parameters), or for one of dweight
// and dbias, skips the other partial sums and splits the rows differently;
// what it writes is the same bits as the call asked for every gradient.
TEST(Determinism, BackwardBitwiseWhateverGradientsAreAsked) {
  std::mt19937_64 rng(10);
  set_num_threads(2);
  for (const Case& c : all_cases()) {
    if (c.affine == Affine::none || c.affine == Affine::bias) continue;
    const bool layer = c.op == NormKind::layer_norm;
    for (auto [rows, D] : {std::pair<std::int64_t, std::int64_t>{1000, 768}, {70, 111}, {5, 65537}}) {
      Array x(c.x, rows, D), dy(c.x, rows, D);
      fill_normal(x, rng, 0.5, 2.0);
      fill_normal(dy, rng);
      const Params p = make_params(c, D, rng);
      const Outputs all = run_all(c, x, dy, p);
      Array mean(stat_dtype(c.x), 1, rows), rstd(stat_dtype(c.x), 1, rows), y(c.x, rows, D);
      if (layer)
        layer_norm(x.cmat(), p.w(), p.b(), 1e-5, y.mat(), mean.vec(), rstd.vec());
      else
        rms_norm(x.cmat(), p.w(), 1e-5, y.mat(), rstd.vec(), p.offset);
      for (int asked = 0; asked < (layer ? 3 : 1); ++asked) {  // none, dweight, dbias
        SCOPED_TRACE(name_of(c) + " rows=" + std::to_string(rows) + " D=" + std::to_string(D) +
                     (asked == 0 ? " dx alone" : asked == 1 ? " dx, dweight" : " dx, dbias"));
        Array dx(c.x, rows, D), dweight(c.w, 1, D), dbias(c.w, 1, D);
        const Vector dw = asked == 1 ? dweight.vec() : Vector{}, db = asked == 2 ? dbias.vec() : Vector{};
        if (layer)
          layer_norm_backward(dy.cmat(), x.cmat(), mean.cvec(), rstd.cvec(), p.w(), dx.mat(), dw, db);
        else
          rms_norm_backward(dy.cmat(), x.cmat(), rstd.cvec(), p.w(), dx.mat(), {}, p.offset);
        EXPECT_TRUE(dx.bytes() == all.dx);
        if (asked == 1) {
          EXPECT_TRUE(dweight.bytes() == all.dweight);
        }
        if (asked == 2) {
          EXPECT_TRUE(dbias.bytes() == all.dbias);
        }
      }
    }
  }
  set_num_threads(0);
}

TEST(Threading, SettingIsReadBack) {
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(0);
  EXPECT_GE(num_threads(), 1);
}

// GNU OpenMP cannot start a team in a child forked after its pool started;
// normkit must then run single-threaded instead of waiting forever.
TEST(Threading, ForkedChildRunsKernels) {
  std::mt19937_64 rng(3);
  const Case c{NormKind::rms_norm, DType::f32, DType::f32, Affine::weight};
  const std::int64_t rows = 256, D = 2048;  // enough traffic for two threads
  Array x(c.x, rows, D), dy(c.x, rows, D);
  fill_normal(x, rng);
  fill_normal(dy, rng);
  const Params p = make_params(c, D, rng);
  set_num_threads(2);
  const Outputs parent = run_all(c, x, dy, p);  // starts the OpenMP pool
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);  // a hung child dies of SIGALRM instead of hanging the suite
    const bool same = run_all(c, x, dy, p) == parent && num_threads() == 1;
    _exit(same ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  set_num_threads(0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's results differ, or it did not run single-threaded";
}

}  // namespace
}  // namespace normkit::test
