// normkit bench --lines — the cache lines one call brings into L2 from
// beyond it, counted by callgrind's cache simulator, against the lines the
// op's bytes require (measure/traffic.hpp). Timings on a shared host vary
// by tens of percent between runs; these counts are the same every run, so
// they can tell an op that moves more bytes than it must (a row evicted
// before its second pass) from one that is merely slow.
//
// Each cell runs in its own process under valgrind (this executable again,
// with --lines-call): one call on a first buffer set to warm the code and
// parameters, then the counted call on a second set, so its activations
// start beyond the simulated caches. The simulated L1d and L2 take this
// CPU's sizes and associativity (sysfs); L2 is the last level simulated, so
// its misses are the lines L2 receives from L3 or memory.
//
// What the model leaves out (docs/kernels.md): every store allocates its
// line (streaming stores bypass the caches on the hardware), software and
// hardware prefetches are not simulated, replacement is exact LRU, and
// valgrind has no AVX-512, so the AVX2 kernels run (the same passes over
// the same bytes; the instruction counts are AVX2's).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_impls.hpp"
#include "bench_lines.hpp"
#include "cli_args.hpp"
#include "measure/memory.hpp"
#include "normkit/threading.hpp"

// The one function callgrind counts (--toggle-collect): unmangled, so the
// pattern cannot miss it.
extern "C" __attribute__((noinline)) void normkit_counted_call(const normkit::bench::Call& call) { call(1); }

namespace normkit::cli {

namespace {

using namespace normkit::bench;

constexpr std::int64_t kLine = 64;

const Op& op_named(const std::string& name) {
  for (const Op& op : kOps)
    if (op.name == name) return op;
  throw std::invalid_argument("--lines-call: unknown op '" + name + "'");
}

// A cache level of CPU 0 as callgrind's SIZE,WAYS,LINE.
std::string level_spec(int index, std::int64_t size) {
  std::int64_t ways = 8;
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/ways_of_associativity");
  if (f >> ways; ways <= 0) ways = 8;
  return std::to_string(size) + "," + std::to_string(ways) + "," + std::to_string(kLine);
}

// Each (rows, D) output over the input the API lets it overwrite: its lines
// are then cached when written, as the streaming stores of separate outputs
// keep them out of the caches on the hardware.
void alias_outputs(const Op& op, Tensors& t) {
  const auto over = [&](Array out, Array in) { t.p[static_cast<std::size_t>(out)] = t[in]; };
  switch (op.pass) {
    case Pass::forward: over(Array::y, Array::x); break;
    case Pass::backward:
    case Pass::backward_dx: over(Array::dx, Array::dy); break;
    case Pass::fused: over(Array::h, Array::residual), over(Array::y, Array::x); break;
    case Pass::fused_backward: over(Array::dh, Array::dh_out); break;
    default: throw std::invalid_argument("--in-place: " + std::string(op.name) + " is two calls; not with --in-place");
  }
}

bool has_in_place(const Op& op) { return !is_two_calls(op.pass); }

struct Counts {
  std::int64_t instructions = 0, lines_read = 0, lines_written = 0;
};

// The "events:" and "summary:" lines of a callgrind output file.
Counts read_counts(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::vector<std::string> events;
  std::vector<std::int64_t> totals;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key;
    ss >> key;
    if (key == "events:")
      for (std::string e; ss >> e;) events.push_back(e);
    else if (key == "summary:")
      for (std::int64_t v; ss >> v;) totals.push_back(v);
  }
  const auto at = [&](const std::string& name) -> std::int64_t {
    for (std::size_t i = 0; i < events.size(); ++i)
      if (events[i] == name) return i < totals.size() ? totals[i] : 0;
    throw std::runtime_error("bench --lines: no " + name + " count in " + file.string());
  };
  return {at("Ir"), at("DLmr"), at("DLmw")};
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

// The child: one op, dtype, D and rows, under callgrind.
int bench_lines_call(int argc, char** argv) {
  if (argc != 6)
    throw std::invalid_argument("--lines-call takes OP DTYPE D ROWS PARAM_DTYPE in-place|separate (run by bench --lines)");
  const Op& op = op_named(argv[0]);
  const Shape s{parse_int("ROWS", argv[3], 1), parse_int("D", argv[2], 1), parse_dtype("DTYPE", argv[1]),
                parse_dtype("PARAM_DTYPE", argv[4])};
  set_num_threads(1);
  Arena arena;
  std::vector<Tensors> sets = carve(arena, op, s, 2);
  if (std::string_view(argv[5]) == "in-place")
    for (Tensors& t : sets) alias_outputs(op, t);
  fill_inputs(op, s, sets, false);
  const Call call = impls()[0].prepare(op, s, sets);
  call(0);
  normkit_counted_call(call);
  return 0;
}

int bench_lines(const LinesOptions& o) {
  if (std::system("valgrind --version >/dev/null 2>&1") != 0)
    throw std::runtime_error("bench --lines runs callgrind: valgrind is not on PATH (Debian: apt install valgrind)");
  const Caches caches = read_caches();
  if (caches.l1d <= 0 || caches.l2 <= 0) throw std::runtime_error("bench --lines: no L1d/L2 sizes in sysfs");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  struct TempDir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("normkit-lines-" + std::to_string(::getpid()));
    TempDir() { std::filesystem::create_directories(path); }
    ~TempDir() { std::filesystem::remove_all(path); }
  } const temp;
  const std::filesystem::path& dir = temp.path;
  const std::string sim = "--D1=" + level_spec(0, caches.l1d) + " --LL=" + level_spec(2, caches.l2);

  std::printf("cache lines into L2 per call, callgrind's simulator (%s, LRU, every store allocates,\n"
              "no prefetch; AVX2 kernels), one thread, %s; x min: lines / the lines the op's bytes require\n\n",
              sim.c_str(), o.in_place ? "outputs over their inputs" : "outputs in buffers of their own");
  std::printf("%-28s %-5s %7s %6s %12s %6s %12s %6s %9s\n", "op", "dtype", "D", "rows", "lines read", "x min",
              "written", "x min", "instr/el");
  bool over = false;
  for (const Op* op : o.ops)
    for (DType act : o.dtypes)
      for (std::int64_t D : o.widths) {
        const std::optional<DType> param = cell_param_dtype(impls()[0], *op, act, o.f32_params);
        if (!param || (o.in_place && !has_in_place(*op))) continue;
        const Shape s{std::max<std::int64_t>(1, o.elements / D), D, act, *param};
        // The warm-up call on the first set must push the second set's
        // inputs (filled before it) out of the simulated L2.
        if (working_set_bytes(*op, s) < 2 * caches.l2)
          throw std::invalid_argument("--elements: " + std::string(op->name) + " " +
                                      std::string(dtype_name(act)) + " at D=" + std::to_string(D) + " touches " +
                                      std::to_string(working_set_bytes(*op, s) >> 10) +
                                      " KiB per call; --lines needs at least twice L2 (" +
                                      std::to_string(2 * caches.l2 >> 10) + " KiB)");
        const std::filesystem::path out = dir / "callgrind.out", log = dir / "valgrind.log";
        const std::string cmd =
            "OMP_NUM_THREADS=1 valgrind --tool=callgrind --cache-sim=yes " + sim +
            " --toggle-collect=normkit_counted_call --callgrind-out-file=" + quoted(out.string()) + " " +
            quoted(self) + " bench --lines-call " + std::string(op->name) + " " +
            std::string(dtype_name(act)) + " " + std::to_string(D) + " " + std::to_string(s.rows) + " " +
            std::string(dtype_name(*param)) + (o.in_place ? " in-place" : " separate") + " >" + quoted(log.string()) + " 2>&1";
        if (std::system(cmd.c_str()) != 0) {
          std::ifstream f(log);
          std::stringstream text;
          text << f.rdbuf();
          std::string tail = text.str();
          if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
          throw std::runtime_error("bench --lines: callgrind failed on " + std::string(op->name) + " D=" +
                                   std::to_string(D) + ":\n" + tail);
        }
        const Counts c = read_counts(out);
        const Traffic t = traffic(*op, s);
        const double need_read = static_cast<double>(t.read) / kLine, need_written = static_cast<double>(t.written) / kLine;
        const double rr = static_cast<double>(c.lines_read) / need_read;
        const double rw = static_cast<double>(c.lines_written) / need_written;
        // A call on cold buffers reads every line of its inputs at least once
        // (a few may share lines with the other set's arrays); fewer means
        // the counted call was not the one measured.
        if (c.instructions == 0 || rr < 0.9 || (!o.in_place && rw < 0.9))
          throw std::runtime_error("bench --lines: callgrind counted " + std::to_string(c.lines_read) +
                                   " lines read and " + std::to_string(c.lines_written) + " written for " +
                                   std::string(op->name) + " at D=" + std::to_string(D) +
                                   ", fewer than its cold inputs and outputs require");
        over = over || (o.max_ratio > 0 && (rr > o.max_ratio || (!o.in_place && rw > o.max_ratio)));
        std::printf("%-28s %-5s %7lld %6lld %12lld %6.2f %12lld %6.2f %9.2f\n", std::string(op->name).c_str(),
                    std::string(dtype_name(act)).c_str(), static_cast<long long>(D),
                    static_cast<long long>(s.rows), static_cast<long long>(c.lines_read), rr,
                    static_cast<long long>(c.lines_written), rw,
                    static_cast<double>(c.instructions) / static_cast<double>(s.rows * D));
        std::fflush(stdout);
      }
  if (over) {
    std::printf("\nsome cell moved more than %.2f x its lines (--max-lines-ratio)\n", o.max_ratio);
    return 1;
  }
  return 0;
}

}  // namespace normkit::cli
