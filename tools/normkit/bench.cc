// normkit bench — every op against the machine's memory-bandwidth ceiling.
//
// For each size class, width D, op, dtype, thread count and implementation:
// measure the copy and read bandwidth at the op's working-set size (the
// ceilings), carve the op's buffers, fill its inputs, prepare the call, time
// it (warm-up, then the median of many samples), and keep a Record. Then
// print the tables and the targets, or the records as JSON.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_check.hpp"
#include "bench_impls.hpp"
#include "bench_lines.hpp"
#include "bench_report.hpp"
#include "cli_args.hpp"
#include "commands.hpp"
#include "measure/machine.hpp"
#include "measure/memory.hpp"
#include "measure/timing.hpp"
#include "measure/traffic.hpp"
#include "normkit/version.hpp"

namespace normkit::cli {
namespace {

using namespace normkit::bench;

constexpr const char* kHelp = R"(usage: normkit bench [options]

Times LayerNorm and RMSNorm (forward, backward with and without the parameter
gradients, fused add+norm forward and backward, and each fused op's two
separate calls) through the public API, next to the bytes each call must
move, the GB/s reached, and the memory-bandwidth ceiling (copy and read
loops) measured in the same run at the same working-set size and thread
count. Baselines in the same run: the naive two-pass scalar loops a user
would write, and oneDNN's layer normalization (if built with it).

Size classes:
  dram   rows = ELEMENTS / D; each call gets the next of enough buffer sets
         to rotate over ROTATE MiB, so no call finds its data in any cache
  cache  rows = CACHE_ELEMENTS / D; the same buffers every call (fits in L2)
  row    one row of each --row-D width; the same buffers every call (a
         decode step); also times a plain copy of that row for reference

options:
  --quick            a smaller run (under a minute): D 768,4096,16384, one
                     row of 4096, ELEMENTS 3Mi, short timings, one round
  --smoke            a tiny run that only checks the bench works (seconds);
                     its numbers mean nothing
  --json             print the records as a JSON list on stdout (no tables)
  --out DIR          write the run into DIR: records.json (every record) and
                     tables.txt (the full tables, ceilings and targets)
  --verbose          print the full tables and the ceilings, not the summary
  --targets          also print the team's targets (docs/benchmarks.md) as
                     met / not met with the numbers that decide them
  --positive-inputs  x and the residual all positive (the same magnitudes):
                     a row mean beyond std/4, so LayerNorm takes its
                     centred statistics pass (docs/kernels.md)
  --f32-params       f32 weight, bias and parameter gradients with bf16/f16
                     activations (mixed precision; default: the activations'
                     dtype); the naive baseline, which has one dtype, is left
                     out of those cells
  --output FILE      also write the JSON records to FILE
  --ops LIST         op names (layer_norm, rms_norm_backward,
                     rms_norm_backward_dx, add_rms_norm, add_then_layer_norm,
                     add_rms_norm_backward, rms_norm_backward_then_add, ...)
                     or passes (forward, backward, backward_dx: dx alone,
                     fused, add_then_norm, fused_backward,
                     backward_then_add)                    [all]
  --norms LIST       layer, rms                            [both]
  --dtypes LIST      f32, bf16, f16                        [all three]
  --threads LIST     thread counts                         [1,2]
  --impls LIST       normkit, naive, onednn                [all built]
  --sizes LIST       dram, cache, row                      [all]
  --D LIST           widths for dram and cache             [768,2048,4096,8192,16384,65536]
  --row-D LIST       widths for the one-row class          [768,2048,4096,8192,16384,65536]
  --elements N       elements per activation tensor, dram  [4194304]
  --cache-elements N elements per activation tensor, cache [65536]
  --rotate-mib N     MiB the dram buffer sets span         [1024]
  --min-time S       seconds to keep sampling each record  [0.25]
  --max-time S       seconds to wait for 21 undisturbed samples [3]
  --rounds N         go through every record N times, each taking 1/N of
                     the samples and times above                [3]
  --observer         instead of the above: what the op observer costs a
                     one-row call, with none installed and with a no-op one
                     (--D N [768], --rounds N [15]; docs/profile.md)
  --lines            instead of timing: the cache lines one call of each
                     --ops, --dtypes and --D (rows = ELEMENTS / D) brings into
                     L2, counted by callgrind's cache simulator at this CPU's
                     L1d and L2 sizes, against the lines its bytes require;
                     one thread (needs valgrind; docs/kernels.md)
  --in-place         with --lines: each output over the input it may
                     overwrite (y over x, dx over dy, h over the residual,
                     dh over dh_out), so no store allocates a line
  --max-lines-ratio R  with --lines: exit 1 when a cell reads or writes more
                     than R times the lines it requires
  --help             this text

Timing: each record is timed in ROUNDS rounds: the run goes through the whole
list of records once per round, so a record's rounds lie minutes apart. In
each round: 3 warm-up calls, then samples (calls batched to >= 200 us) until
21/ROUNDS samples ran undisturbed and MIN-TIME/ROUNDS passed. The median of
the undisturbed samples of all rounds is reported: a slow spell of the
machine's memory that lasts minutes then moves it less. A sample is disturbed
when a thread of the bench was switched out for another task during it (an
involuntary context switch). The count is the pre% column; the median over
all samples is in the JSON.

The naive baseline runs on one thread only. Every implementation is checked
against the fp64 oracle before it is timed.

Output: a summary table (each op and dtype at the widest D beyond cache:
GB/s, % of the ceiling, speed-up over oneDNN and the naive loop, on every
thread count; one row of the widest --row-D), then the files written. On a
terminal a progress line shows what is being timed and the time left.

JSON records: impl, op, norm, pass, dtype, param_dtype, rows, D, threads,
size_class, where (L1/L2/L3/DRAM: where the rotated buffers fit), inputs
(signed or positive), sets,
working_set_bytes, bytes_read, bytes_written, median_ms, median_all_ms,
min_ms, samples, preempted_samples, calls_per_sample, rounds, gbps, ceiling_gbps, pct_of_ceiling, copy_gbps, read_gbps,
copy_method, clock_ghz and clock_ghz_after (the core clock at the start and
the end of the run: ns x GHz = cycles). impl "ceiling", op "copy_row": the
copy of one row.
Plot them with bench/plot_bench.py.
)";

struct Options {
  std::vector<const Op*> ops;
  std::vector<DType> dtypes{DType::f32, DType::bf16, DType::f16};
  std::vector<int> threads{1, 2};
  std::vector<std::string> impls;
  std::vector<std::string> sizes{"dram", "cache", "row"};
  std::vector<std::int64_t> widths{768, 2048, 4096, 8192, 16384, 65536};
  std::vector<std::int64_t> row_widths{768, 2048, 4096, 8192, 16384, 65536};
  std::int64_t elements = std::int64_t{4} << 20;
  std::int64_t cache_elements = std::int64_t{64} << 10;
  std::int64_t rotate_bytes = std::int64_t{1024} << 20;
  TimingConfig timing;  // per record, over all rounds
  int rounds = 3;
  double ceiling_refresh_seconds = 20;  // see Ceilings
  bool json = false;
  bool verbose = false;  // --verbose: the full tables on stdout
  bool targets = false;  // --targets
  std::string out_dir;   // --out
  bool positive = false;  // --positive-inputs
  bool f32_params = false;  // --f32-params
  bool lines = false;       // --lines
  bool in_place = false;    // --in-place
  double max_lines_ratio = 0;  // --max-lines-ratio
  std::string output;
};

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  std::stringstream ss{std::string(s)};
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  if (out.empty()) throw std::invalid_argument("empty list '" + std::string(s) + "'");
  return out;
}

std::vector<std::int64_t> parse_ints(const std::string& flag, const std::string& v) {
  std::vector<std::int64_t> out;
  for (const std::string& s : split(v)) out.push_back(parse_int(flag, s, 1));
  return out;
}

double parse_seconds(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(x >= 0))
    throw std::invalid_argument(flag + " expects seconds >= 0, got '" + v + "'");
  return x;
}

void apply_mode(Options& o, std::string_view mode) {
  if (mode == "--quick") {
    o.widths = {768, 4096, 16384};
    o.row_widths = {4096};
    o.sizes = {"dram", "row"};
    // 3 Mi elements keep every output at 4 MiB or more (6 MiB of bf16 at
    // D = 768), so each cell takes the streaming-store path of the full run's
    // outputs (kStreamMinBytes, docs/kernels.md). With 1 Mi, 16-bit outputs
    // were 2 MiB and f32 ones at D = 768 just under 4 MiB: the quick run
    // measured the ordinary-store path and read 15-25 points low.
    o.elements = std::int64_t{3} << 20;
    // Rotation stays at the full run's 1 GiB: the development host reports a
    // 480 MiB shared L3, which 512 MiB barely exceeds.
    o.timing.min_seconds = 0.02;
    o.timing.min_samples = 9;
    o.timing.max_seconds = 0.1;
    o.timing.max_samples = 201;
    o.rounds = 1;
  } else if (mode == "--smoke") {
    o.widths = {96, 256};
    o.row_widths = {64};
    o.elements = 4096;
    o.cache_elements = 2048;
    o.rotate_bytes = std::int64_t{1} << 20;
    o.timing.min_seconds = 0;
    o.timing.min_samples = 3;
    o.timing.max_seconds = 0.05;
    o.timing.max_samples = 3;
    o.rounds = 1;
  }
}

// Returns false when --help was asked for.
bool parse(int argc, char** argv, Options& o) {
  for (int i = 0; i < argc; ++i) apply_mode(o, argv[i]);
  std::vector<std::string> op_items, norm_items;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (a == "--quick" || a == "--smoke") continue;
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--verbose" || a == "-v") {
      o.verbose = true;
      continue;
    }
    if (a == "--targets") {
      o.targets = true;
      continue;
    }
    if (a == "--positive-inputs") {
      o.positive = true;
      continue;
    }
    if (a == "--lines") {
      o.lines = true;
      continue;
    }
    if (a == "--in-place") {
      o.in_place = true;
      continue;
    }
    if (a == "--f32-params") {
      o.f32_params = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("unknown option or missing value: '" + a + "'");
    const std::string v = argv[++i];
    if (a == "--output") o.output = v;
    else if (a == "--out") o.out_dir = v;
    else if (a == "--ops") op_items = split(v);
    else if (a == "--norms") norm_items = split(v);
    else if (a == "--dtypes") {
      o.dtypes.clear();
      for (const std::string& s : split(v)) o.dtypes.push_back(parse_dtype(a, s));
    } else if (a == "--threads") {
      o.threads.clear();
      for (std::int64_t n : parse_ints(a, v)) o.threads.push_back(static_cast<int>(n));
    } else if (a == "--impls") o.impls = split(v);
    else if (a == "--sizes") o.sizes = split(v);
    else if (a == "--D") o.widths = parse_ints(a, v);
    else if (a == "--row-D") o.row_widths = parse_ints(a, v);
    else if (a == "--elements") o.elements = parse_int(a, v, 1);
    else if (a == "--cache-elements") o.cache_elements = parse_int(a, v, 1);
    else if (a == "--rotate-mib") o.rotate_bytes = parse_int(a, v, 1) << 20;
    else if (a == "--min-time") o.timing.min_seconds = parse_seconds(a, v);
    else if (a == "--max-time") o.timing.max_seconds = parse_seconds(a, v);
    else if (a == "--max-lines-ratio") o.max_lines_ratio = parse_number(a, v, 1);
    else if (a == "--rounds") o.rounds = static_cast<int>(parse_int(a, v, 1));
    else throw std::invalid_argument("unknown option '" + a + "' (see normkit bench --help)");
  }

  for (const std::string& s : o.sizes)
    if (s != "dram" && s != "cache" && s != "row")
      throw std::invalid_argument("--sizes: unknown size class '" + s + "' (dram, cache, row)");
  for (const std::string& n : norm_items)
    if (n != "layer" && n != "rms")
      throw std::invalid_argument("--norms: unknown norm '" + n + "' (layer, rms)");
  for (const std::string& s : op_items) {
    const bool known = std::any_of(std::begin(kOps), std::end(kOps), [&](const Op& op) {
      return op.name == s || pass_name(op.pass) == s;
    });
    if (!known) throw std::invalid_argument("--ops: unknown op or pass '" + s + "'");
  }
  for (const Op& op : kOps) {
    const auto in = [](const std::vector<std::string>& items, std::string_view a, std::string_view b) {
      return items.empty() || std::find(items.begin(), items.end(), a) != items.end() ||
             std::find(items.begin(), items.end(), b) != items.end();
    };
    if (in(op_items, op.name, pass_name(op.pass)) && in(norm_items, norm_name(op.norm), ""))
      o.ops.push_back(&op);
  }
  if (o.impls.empty())
    for (const Impl& impl : impls()) o.impls.emplace_back(impl.name);
  for (const std::string& name : o.impls)
    if (std::none_of(impls().begin(), impls().end(), [&](const Impl& i) { return i.name == name; }))
      throw std::invalid_argument("--impls: '" + name + "' is not in this build");
  return true;
}


std::string caches_line(const Caches& c) {
  return "L1d " + std::to_string(c.l1d >> 10) + " KiB, L2 " + std::to_string(c.l2 >> 10) +
         " KiB, L3 " + std::to_string(c.l3 >> 10) + " KiB (sysfs, CPU 0)";
}

std::int64_t rows_for(std::string_view size_class, std::int64_t D, const Options& o) {
  if (size_class == "row") return 1;
  const std::int64_t elements = size_class == "dram" ? o.elements : o.cache_elements;
  return std::max<std::int64_t>(1, elements / D);
}

class Runner {
 public:
  explicit Runner(const Options& o)
      : o_(o),
        round_timing_(o.timing.split(o.rounds)),
        ceilings_(arena_, o.timing, o.ceiling_refresh_seconds),
        caches_(read_caches()) {}

  // Every record is timed in o.rounds rounds: the whole list of records is
  // gone through once per round, and each visit adds its share of the
  // samples (see pool in measure/timing.hpp).
  void run_all() {
    std::vector<Cell> cells;
    for (const std::string& c : o_.sizes)
      for (std::int64_t D : c == "row" ? o_.row_widths : o_.widths) {
        if (c == "row")
          for (DType dt : o_.dtypes)
            for (int t : o_.threads) cells.push_back({c, D, nullptr, dt, t, nullptr});
        for (const Op* op : o_.ops)
          for (DType dt : o_.dtypes)
            for (int t : o_.threads)
              for (const Impl& impl : impls())
                if (wanted(impl) && (impl.threaded || t == 1)) cells.push_back({c, D, op, dt, t, &impl});
      }
    visits_ = static_cast<std::int64_t>(cells.size()) * o_.rounds;
    start_ = std::chrono::steady_clock::now();
    for (int round = 0; round < o_.rounds; ++round)
      for (Cell& c : cells) {
        if (round > 0 && c.record < 0) {  // nothing to time (see time_one)
          --visits_;
          continue;
        }
        if (!c.op) copy_row(c, round);
        else time_one(c, round);
      }
    if (tty_) std::fputs("\r\033[K", stderr);
    // The ceilings pool every measurement of the run, so the percentages
    // are computed now, from the final figures.
    for (Record& r : records_) set_ceiling(r, ceilings_.at(r.working_set, r.sets, r.threads));
  }

  const std::vector<Record>& records() const { return records_; }
  const Caches& caches() const { return caches_; }
  const Ceilings& ceilings() const { return ceilings_; }

 private:
  bool wanted(const Impl& impl) const {
    return std::find(o_.impls.begin(), o_.impls.end(), impl.name) != o_.impls.end();
  }

  // One (size class, D, op or the copy of a row, dtype, threads,
  // implementation) of the run.
  struct Cell {
    std::string size_class;
    std::int64_t D = 0;
    const Op* op = nullptr;  // null: the copy of one row
    DType dt = DType::f32;
    int threads = 1;
    const Impl* impl = nullptr;
    std::ptrdiff_t record = -1;  // index in records_, once the first round made it
  };

  // The first round makes the cell's record (none when the implementation
  // has no such op or parameter dtype); every round adds samples to it.
  void time_one(Cell& c, int round) {
    const Impl& impl = *c.impl;
    const Op& op = *c.op;
    if (round == 0) {
      const std::optional<DType> param = cell_param_dtype(impl, op, c.dt, o_.f32_params);
      // A cell with no record is not timed in any round.
      if (!param) {
        --visits_;
        return;
      }
      const Shape s{rows_for(c.size_class, c.D, o_), c.D, c.dt, *param};
      const std::int64_t stride = set_stride(op, s);
      const std::int64_t sets =
          c.size_class == "dram" ? std::max<std::int64_t>(2, (o_.rotate_bytes + stride - 1) / stride) : 1;
      Record r;
      r.impl = impl.name;
      r.op = op.name;
      r.table_op = &op;
      r.shape = s;
      r.threads = c.threads;
      r.size_class = c.size_class;
      r.inputs = o_.positive ? "positive" : "signed";
      r.sets = sets;
      r.working_set = working_set_bytes(op, s);
      r.where = residence(stride * sets, caches_);
      r.traffic = traffic(op, s);
      c.record = static_cast<std::ptrdiff_t>(records_.size());
      records_.push_back(std::move(r));
    }
    Record& r = records_[static_cast<std::size_t>(c.record)];
    const Shape& s = r.shape;
    const std::int64_t sets = r.sets;

    set_threads(c.threads);
    // The ceiling first: it uses the arena, which carve() then fills.
    ceilings_.refresh(r.working_set, sets, c.threads);
    const std::vector<Tensors> tensors = carve(arena_, op, s, sets);
    // The inputs stay as filled until a ceiling measurement overwrites the
    // arena (no op writes an array it only reads), so the next implementation
    // or thread count of the same op and shape reuses them.
    const Filled now{&op, s.rows, s.D, s.act, s.param, sets, ceilings_.measurements()};
    if (!(filled_ == now)) fill_inputs(op, s, tensors, o_.positive);
    filled_ = now;
    const Call call = impl.prepare(op, s, tensors);

    // Checked against the oracle before it is first timed.
    if (round == 0) {
      write_oracle_stats(op, s, tensors[0], impl.variance_stats);
      call(0);
      if (const std::string error = check_outputs(op, s, tensors[0]); !error.empty())
        throw std::runtime_error(r.impl + " " + r.op + " " + std::string(dtype_name(c.dt)) + " rows=" +
                                 std::to_string(s.rows) + " D=" + std::to_string(c.D) +
                                 " disagrees with the fp64 oracle: " + error);
    }

    pool(r.timing, time_calls([&](std::int64_t i) { call(i % sets); }, round_timing_));
    progress(r, round);
  }

  // The time to copy one row of D elements of dtype dt: the reference for
  // the one-row class (a norm of a row cannot beat copying it). It is the
  // ceiling's own copy, measured again in each round.
  void copy_row(Cell& c, int round) {
    const std::int64_t bytes = c.D * static_cast<std::int64_t>(dtype_size(c.dt));
    set_threads(c.threads);
    ceilings_.refresh(2 * bytes, 1, c.threads);
    if (round == 0) {
      Record r;
      r.impl = "ceiling";
      r.op = "copy_row";
      r.shape = {1, c.D, c.dt, c.dt};
      r.threads = c.threads;
      r.size_class = "row";
      r.working_set = 2 * bytes;
      r.where = residence(2 * bytes, caches_);
      r.traffic = {bytes, bytes};
      c.record = static_cast<std::ptrdiff_t>(records_.size());
      records_.push_back(std::move(r));
    }
    progress(records_[static_cast<std::size_t>(c.record)], round);
  }

  // Fills in the figures that depend on the ceiling at the record's size.
  // A "copy_row" record is the copy itself: its time is the copy's.
  static void set_ceiling(Record& r, const Ceiling& c) {
    if (r.op == "copy_row")
      r.timing.median_s = r.timing.median_all_s = r.timing.min_s = c.copy_median_s;
    r.gbps = static_cast<double>(r.traffic.total()) / r.timing.median_s / 1e9;
    r.copy_gbps = c.copy_gbps;
    r.read_gbps = c.read_gbps;
    r.copy_method = c.copy_method;
    r.copy_s = c.copy_median_s;
    r.ceiling_gbps = ceiling_gbps(r.traffic, c);
    r.pct_of_ceiling = 100.0 * r.gbps / r.ceiling_gbps;
  }

  // On a terminal, one line that says what is being timed, how far the run
  // is and about how long is left; nothing otherwise, so logs stay clean.
  void progress(const Record& r, int round) {
    ++visited_;
    if (!tty_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = elapsed / static_cast<double>(visited_) * static_cast<double>(visits_ - visited_);
    std::fprintf(stderr, "\r\033[Kbench: %lld/%lld  round %d/%d  %s %s %.*s D=%lld %dt  ~%.0f s left",
                 static_cast<long long>(visited_), static_cast<long long>(visits_), round + 1, o_.rounds,
                 r.impl.c_str(), r.op.c_str(), static_cast<int>(dtype_name(r.shape.act).size()),
                 dtype_name(r.shape.act).data(), static_cast<long long>(r.shape.D), r.threads, left);
    std::fflush(stderr);
  }

  // What the arena's inputs were last filled for.
  struct Filled {
    const Op* op = nullptr;
    std::int64_t rows = 0, D = 0;
    DType act = DType::f32, param = DType::f32;
    std::int64_t sets = 0;
    int measurements = -1;
    bool operator==(const Filled&) const = default;
  };

  const Options& o_;
  const bool tty_ = isatty(fileno(stderr)) != 0;
  std::int64_t visits_ = 0, visited_ = 0;  // timings of the whole run, and done so far
  std::chrono::steady_clock::time_point start_;
  TimingConfig round_timing_;  // o.timing's share of one round
  Filled filled_;
  Arena arena_;
  Ceilings ceilings_;
  Caches caches_;
  std::vector<Record> records_;
};

}  // namespace

std::string bytes_text(std::int64_t bytes) {
  char buf[32];
  if (bytes < (std::int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

// Every ceiling measured in the run, by working-set size: where the copy
// and read bandwidth fall off (caches, then DRAM).
void print_ceilings(std::FILE* out, const Ceilings& c, const Caches& caches) {
  std::fprintf(out,
               "\nceilings measured in this run (copy: (read + written bytes) / time of the faster "
               "of memcpy and vector loops with ordinary or streaming stores; read: a SIMD sum; the "
               "median of the samples of `times` measurements, and the best single measurement)\n");
  std::fprintf(out, "%12s %6s %12s %4s | %9s %-7s %9s %5s | %10s %10s\n", "working set", "sets", "footprint",
               "thr", "copy GB/s", "by", "read GB/s", "times", "best copy", "best read");
  for (const auto& [key, e] : c.all()) {
    const auto [ws, sets, threads] = key;
    const Ceiling f = e.figures();
    std::fprintf(out, "%12s %6lld %12s %4d | %9.1f %-7s %9.1f %5d | %10.1f %10.1f  %s\n",
                 bytes_text(ws).c_str(), static_cast<long long>(sets), bytes_text(ws * sets).c_str(), threads,
                 f.copy_gbps, f.copy_method.c_str(), f.read_gbps, e.times, e.best_once.copy_gbps,
                 e.best_once.read_gbps, residence(ws * sets, caches).c_str());
  }
}

int bench_observer(int argc, char** argv);  // bench_observer.cc

int bench_main(int argc, char** argv) {
  if (argc > 0 && std::string_view(argv[0]) == "--observer") return bench_observer(argc - 1, argv + 1);
  if (argc > 0 && std::string_view(argv[0]) == "--lines-call") return bench_lines_call(argc - 1, argv + 1);
  Options o;
  if (!parse(argc, argv, o)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (o.lines) return bench_lines({o.ops, o.dtypes, o.widths, o.elements, o.f32_params, o.in_place, o.max_lines_ratio});
  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec || !std::filesystem::is_directory(o.out_dir))
      throw std::runtime_error("--out: cannot create the directory '" + o.out_dir + "'");
  }
  RunInfo info;
  info.quick = std::any_of(argv, argv + argc, [](const char* a) { return std::string_view(a) == "--quick"; });
  info.load_before = load_average();
  info.clock_ghz_before = core_clock_ghz();
  Runner runner(o);
  runner.run_all();
  info.clock_ghz_after = core_clock_ghz();
  info.load_after = load_average();
  info.cpu = cpu_model();
  info.simd = normkit::cpu_simd_target();
  info.caches = caches_line(runner.caches());
#ifdef NORMKIT_BENCH_ONEDNN
  info.onednn = std::string(onednn_version());
#else
  info.onednn = "not built";
#endif
  info.dram_elements = o.elements;
  info.cache_elements = o.cache_elements;
  info.rotate_bytes = o.rotate_bytes;

  const auto write_tables = [&](std::FILE* f) {
    print_tables(f, runner.records(), info);
    print_ceilings(f, runner.ceilings(), runner.caches());
  };
  if (o.json) {
    write_json(stdout, runner.records(), info);
  } else {
    if (o.verbose)
      write_tables(stdout);
    else
      print_summary(stdout, runner.records(), info);
    if (o.targets) print_targets(stdout, runner.records());
  }
  const auto open_for_writing = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write '" + path + "'");
    return f;
  };
  if (!o.output.empty()) {
    std::FILE* f = open_for_writing(o.output);
    write_json(f, runner.records(), info);
    std::fclose(f);
  }
  if (!o.out_dir.empty()) {
    const std::filesystem::path dir(o.out_dir);
    std::FILE* f = open_for_writing((dir / "records.json").string());
    write_json(f, runner.records(), info);
    std::fclose(f);
    f = open_for_writing((dir / "tables.txt").string());
    write_tables(f);
    print_targets(f, runner.records());
    std::fclose(f);
    if (!o.json)
      std::printf("\nall records: %s; full tables, ceilings and targets: %s\n",
                  (dir / "records.json").c_str(), (dir / "tables.txt").c_str());
  }
  return 0;
}

}  // namespace normkit::cli
