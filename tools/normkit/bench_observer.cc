// normkit bench --observer — what the op observer costs a call: a one-row
// norm (the call where a fixed cost shows most) with no observer installed
// and with a no-op one, timed in alternating rounds, medians of each.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "measure/timing.hpp"
#include "normkit/observer.hpp"
#include "normkit/ops.hpp"
#include "normkit/threading.hpp"

namespace normkit::cli {

namespace {

class NoOp : public OpObserver {
 public:
  void on_op(const OpRecord&) override {}
};

}  // namespace

int bench_observer(int argc, char** argv) {
  std::int64_t D = 768;
  int rounds = 15;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc || (a != "--D" && a != "--rounds"))
      throw std::invalid_argument("--observer: unknown option or missing value '" + a + "' (takes --D N, --rounds N)");
    const std::string v = argv[++i];
    if (a == "--D") D = parse_int(a, v, 1);
    else rounds = static_cast<int>(parse_int(a, v, 1));
  }
  std::vector<float> x(static_cast<std::size_t>(D)), y(x.size()), w(x.size(), 1.0f), rstd(1);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  const auto call = [&](std::int64_t) {
    rms_norm(matrix(x.data(), 1, D), vector(w.data(), D), 1e-6, matrix(y.data(), 1, D), vector(rstd.data(), 1));
  };
  set_num_threads(1);
  NoOp noop;
  measure::TimingConfig cfg;
  cfg = cfg.split(rounds);
  measure::Timing none, observed;
  // Alternating which goes first, so neither always follows the other.
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < 2; ++k) {
      const bool observe = (r + k) % 2 == 1;
      set_op_observer(observe ? &noop : nullptr);
      measure::pool(observe ? observed : none, measure::time_calls(call, cfg));
    }
  set_op_observer(nullptr);
  std::printf("op observer cost: rms_norm, one row of D = %lld f32, one thread, %d rounds alternating\n",
              static_cast<long long>(D), rounds);
  std::printf("  no observer installed   %8.1f ns per call (median of %d samples)\n", none.median_s * 1e9,
              static_cast<int>(none.kept_per_call.size()));
  std::printf("  a no-op observer        %8.1f ns per call (median of %d samples)\n", observed.median_s * 1e9,
              static_cast<int>(observed.kept_per_call.size()));
  std::printf("  observing costs         %8.1f ns per call (two clock reads, the record, a virtual call)\n",
              (observed.median_s - none.median_s) * 1e9);
  return 0;
}

}  // namespace normkit::cli
