#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>

namespace normkit::bench {
namespace {

constexpr std::string_view kClasses[] = {"dram", "cache", "row"};

std::string_view class_title(std::string_view c) {
  if (c == "dram") return "rotated buffers (beyond cache where 'where' says DRAM)";
  if (c == "cache") return "cache-resident (same buffers every call)";
  return "one row (decode step; same buffers every call)";
}

template <class T>
std::vector<T> distinct(const std::vector<Record>& rs, std::function<T(const Record&)> key) {
  std::vector<T> out;
  for (const Record& r : rs)
    if (std::find(out.begin(), out.end(), key(r)) == out.end()) out.push_back(key(r));
  return out;
}

const Record* find(const std::vector<Record>& rs, std::string_view impl, std::string_view op,
                   DType act, std::int64_t D, int threads, std::string_view size_class) {
  for (const Record& r : rs)
    if (r.impl == impl && r.op == op && r.shape.act == act && r.shape.D == D &&
        r.threads == threads && r.size_class == size_class)
      return &r;
  return nullptr;
}

double us(const Record& r) { return r.timing.median_s * 1e6; }

// A time in µs with about four significant digits, 10 characters wide.
std::string us_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%10.3f" : v < 1000 ? "%10.2f" : "%10.1f", v);
  return buf;
}

void print_group(std::FILE* out, const std::vector<Record>& rs, std::string_view size_class,
                 int threads, const std::vector<std::string>& others) {
  std::fprintf(out, "\n== %.*s, %d thread%s ==\n", static_cast<int>(class_title(size_class).size()),
               class_title(size_class).data(), threads, threads == 1 ? "" : "s");
  std::fprintf(out, "%-28s %-5s %6s %6s %8s | %10s %7s %7s %6s %-5s %5s", "op", "dtype", "D",
               "rows", "MB", "normkit us", "GB/s", "ceiling", "%ceil", "where", "pre%");
  for (const std::string& o : others) std::fprintf(out, " | %10s %6s", (o + " us").c_str(), "x");
  std::fprintf(out, "\n");

  const auto dtypes = distinct<DType>(rs, [](const Record& r) { return r.shape.act; });
  const auto widths = distinct<std::int64_t>(rs, [](const Record& r) { return r.shape.D; });
  for (const Op& op : kOps)
    for (DType dt : dtypes)
      for (std::int64_t D : widths) {
        const Record* n = find(rs, "normkit", op.name, dt, D, threads, size_class);
        if (!n) continue;
        std::fprintf(out, "%-28.*s %-5.*s %6lld %6lld %8.3f | %s %7.1f %7.1f %5.1f%% %-5s %5.0f",
                     static_cast<int>(op.name.size()), op.name.data(),
                     static_cast<int>(dtype_name(dt).size()), dtype_name(dt).data(),
                     static_cast<long long>(D), static_cast<long long>(n->shape.rows),
                     static_cast<double>(n->traffic.total()) / 1e6, us_text(us(*n)).c_str(), n->gbps,
                     n->ceiling_gbps, n->pct_of_ceiling, n->where.c_str(),
                     100.0 * n->timing.preempted / std::max(n->timing.samples, 1));
        for (const std::string& o : others) {
          const Record* b = find(rs, o, op.name, dt, D, threads, size_class);
          if (!b && o == "ceiling" && op.pass == Pass::forward)
            b = find(rs, o, "copy_row", dt, D, threads, size_class);
          if (b)
            std::fprintf(out, " | %s %6.2f", us_text(us(*b)).c_str(), us(*b) / us(*n));
          else
            std::fprintf(out, " | %10s %6s", "-", "");
        }
        std::fprintf(out, "\n");
      }
}

void print_ratios(std::FILE* out, const std::vector<Record>& rs, std::string_view size_class,
                  int threads) {
  const auto dtypes = distinct<DType>(rs, [](const Record& r) { return r.shape.act; });
  const auto widths = distinct<std::int64_t>(rs, [](const Record& r) { return r.shape.D; });
  const auto time_of = [&](NormKind norm, Pass pass, DType dt, std::int64_t D) -> double {
    const Record* r = find(rs, "normkit", find_op(norm, pass).name, dt, D, threads, size_class);
    return r ? r->timing.median_s : std::numeric_limits<double>::quiet_NaN();
  };
  bool header = false;
  for (DType dt : dtypes)
    for (std::int64_t D : widths) {
      const auto ratio = [&](Pass p) {
        return time_of(NormKind::rms_norm, p, dt, D) / time_of(NormKind::layer_norm, p, dt, D);
      };
      const auto speedup = [&](NormKind n, Pass fused) {
        return time_of(n, two_calls_of(fused), dt, D) / time_of(n, fused, dt, D);
      };
      const double v[] = {ratio(Pass::forward),
                          ratio(Pass::backward),
                          ratio(Pass::fused),
                          ratio(Pass::add_then_norm),
                          speedup(NormKind::layer_norm, Pass::fused),
                          speedup(NormKind::rms_norm, Pass::fused),
                          speedup(NormKind::layer_norm, Pass::fused_backward),
                          speedup(NormKind::rms_norm, Pass::fused_backward)};
      if (std::all_of(std::begin(v), std::end(v), [](double x) { return std::isnan(x); })) continue;
      if (!header) {
        header = true;
        std::fprintf(out,
                     "\n   normkit ratios: RMSNorm time / LayerNorm time (< 1: RMSNorm faster); "
                     "fused speedup = time(add then norm) / time(fused), and of the backwards\n");
        std::fprintf(out, "   %-5s %6s | %8s %8s %8s %8s | %9s %9s %9s %9s\n", "dtype", "D", "fwd", "bwd",
                     "fused", "add+norm", "fused LN", "fused RMS", "f.bwd LN", "f.bwd RMS");
      }
      std::fprintf(out, "   %-5.*s %6lld |", static_cast<int>(dtype_name(dt).size()),
                   dtype_name(dt).data(), static_cast<long long>(D));
      for (int i = 0; i < static_cast<int>(std::size(v)); ++i) {
        if (i == 4) std::fprintf(out, " |");
        if (std::isnan(v[i]))
          std::fprintf(out, " %*s", i < 4 ? 8 : 9, "-");
        else
          std::fprintf(out, " %*.3f", i < 4 ? 8 : 9, v[i]);
      }
      std::fprintf(out, "\n");
    }
}

// The worst of a set of records by a score, per thread count; the line says
// which record it was.
struct Worst {
  struct One {
    double value = std::numeric_limits<double>::infinity();
    std::string which;
    int count = 0;
  };
  std::map<int, One> by_threads;
  void take(double v, const Record& r) {
    One& o = by_threads[r.threads];
    ++o.count;
    if (v < o.value || std::isnan(v)) {
      o.value = v;
      o.which = r.op + " " + std::string(dtype_name(r.shape.act)) + " D=" +
                std::to_string(r.shape.D) + " rows=" + std::to_string(r.shape.rows);
    }
  }
};

void target_line(std::FILE* out, const char* what, const Worst& w, double need, const char* unit) {
  if (w.by_threads.empty()) {
    std::fprintf(out, "  [not measured] %s\n", what);
    return;
  }
  const bool met = std::all_of(w.by_threads.begin(), w.by_threads.end(),
                               [&](const auto& kv) { return kv.second.value >= need; });
  std::fprintf(out, "  [%s] %s\n", met ? "met" : "NOT met", what);
  for (const auto& [threads, o] : w.by_threads)
    std::fprintf(out, "      %d thread%s: worst %.2f%s of %d records (%s)%s\n", threads,
                 threads == 1 ? " " : "s", o.value, unit, o.count, o.which.c_str(),
                 o.value >= need ? "" : "  <- not met");
}

// The core clock, so that times can be read in cycles (time in ns x GHz).
void print_clock(std::FILE* out, const RunInfo& info) {
  if (info.clock_ghz_before > 0)
    std::fprintf(out,
                 "core clock: %.2f GHz at start, %.2f at end (a chain of dependent adds, one cycle each; "
                 "ns x GHz = cycles)\n",
                 info.clock_ghz_before, info.clock_ghz_after);
}
}  // namespace

void print_tables(std::FILE* out, const std::vector<Record>& rs, const RunInfo& info) {
  std::fprintf(out, "normkit bench — %s; kernels: %s\n", info.cpu.c_str(), info.simd.c_str());
  std::fprintf(out, "caches: %s; oneDNN: %s\n", info.caches.c_str(), info.onednn.c_str());
  std::fprintf(out,
               "load average (1, 5, 15 min) at start: %s; at end: %s (the bench adds about its "
               "thread count; more means other work shared the cores)\n",
               info.load_before.c_str(), info.load_after.c_str());
  print_clock(out, info);
  std::fprintf(out,
               "beyond cache: rows = %lld / D (at least 1), buffers rotated over %lld MiB; "
               "cache-resident: rows = %lld / D\n",
               static_cast<long long>(info.dram_elements),
               static_cast<long long>(info.rotate_bytes >> 20),
               static_cast<long long>(info.cache_elements));
  if (!rs.empty() && rs.front().inputs == "positive")
    std::fprintf(out, "inputs: x and residual all positive (--positive-inputs)\n");
  if (std::any_of(rs.begin(), rs.end(), [](const Record& r) {
        return r.shape.act != DType::f32 && r.shape.act != DType::f64 && r.shape.param == DType::f32 &&
               r.impl == "normkit";
      }))
    std::fprintf(out, "parameters: f32 with bf16/f16 activations (--f32-params)\n");
  std::fprintf(out,
               "us: median time per call; MB: bytes the op must move; ceiling: GB/s the same "
               "bytes reach at the measured copy/read bandwidth;\n"
               "where: the cache the rotated buffers fit in; pre%%: samples left out of the median "
               "because another process held a core;\n"
               "x: that implementation's time / normkit's (> 1: normkit faster); "
               "ceiling x (one row): time to copy the row / normkit's\n");
  const auto threads = distinct<int>(rs, [](const Record& r) { return r.threads; });
  for (std::string_view c : kClasses)
    for (int t : threads) {
      std::vector<Record> group;
      for (const Record& r : rs)
        if (r.size_class == c && r.threads == t) group.push_back(r);
      if (group.empty()) continue;
      std::vector<std::string> others;
      for (const Record& r : group)
        if (r.impl != "normkit" &&
            std::find(others.begin(), others.end(), r.impl) == others.end())
          others.push_back(r.impl);
      print_group(out, group, c, t, others);
      print_ratios(out, group, c, t);
    }
}

void print_summary(std::FILE* out, const std::vector<Record>& rs, const RunInfo& info) {
  std::fprintf(out, "normkit bench%s — %s; kernels: %s; oneDNN: %s\n", info.quick ? " --quick" : "",
               info.cpu.c_str(), info.simd.c_str(), info.onednn.c_str());
  print_clock(out, info);
  const auto normkit_in = [&](std::string_view c) {
    return std::any_of(rs.begin(), rs.end(), [&](const Record& r) { return r.impl == "normkit" && r.size_class == c; });
  };
  const std::string_view cls = normkit_in("dram") ? "dram" : normkit_in("cache") ? "cache" : "";
  const auto threads = distinct<int>(rs, [](const Record& r) { return r.threads; });
  const auto dtypes = distinct<DType>(rs, [](const Record& r) { return r.shape.act; });
  if (!cls.empty()) {
    std::int64_t D = 0, rows = 0;
    std::string where;
    for (const Record& r : rs)
      if (r.impl == "normkit" && r.size_class == cls && r.shape.D > D)
        D = r.shape.D, rows = r.shape.rows, where = r.where;
    std::fprintf(out,
                 "\nEvery op at D = %lld, %lld rows, %s (%s): GB/s it moves; %% of the ceiling (the copy and\n"
                 "read bandwidth measured in this run, for the same bytes); x: how many times faster than oneDNN\n"
                 "and than the naive scalar loop a user would write (on one thread); -: not available.\n",
                 static_cast<long long>(D), static_cast<long long>(rows),
                 cls == "dram" ? "buffers rotated beyond the caches" : "cache-resident", where.c_str());
    std::fprintf(out, "%-28s %-4s", "", "");
    for (int t : threads) std::fprintf(out, " | %-27s", (std::to_string(t) + (t == 1 ? " thread" : " threads")).c_str());
    std::fprintf(out, "\n%-28s %-4s", "op", "");
    for (std::size_t i = 0; i < threads.size(); ++i)
      std::fprintf(out, " | %5s %5s %7s %6s", "GB/s", "%ceil", "xoneDNN", "xnaive");
    std::fprintf(out, "\n");
    const auto times = [](const Record* other, const Record& n) {
      char buf[16];
      if (!other) return std::string("-");
      std::snprintf(buf, sizeof buf, "%.2f", other->timing.median_s / n.timing.median_s);
      return std::string(buf);
    };
    // The two-call baselines of the fused ops are in the full tables; the
    // summary keeps to the ops and says what fusing buys below.
    for (const Op& op : kOps)
      for (DType dt : dtypes) {
        bool any = false;
        for (int t : threads) any = any || find(rs, "normkit", op.name, dt, D, t, cls);
        if (!any || is_two_calls(op.pass)) continue;
        std::fprintf(out, "%-28.*s %-4.*s", static_cast<int>(op.name.size()), op.name.data(),
                     static_cast<int>(dtype_name(dt).size()), dtype_name(dt).data());
        for (int t : threads) {
          const Record* n = find(rs, "normkit", op.name, dt, D, t, cls);
          if (!n) {
            std::fprintf(out, " | %5s %5s %7s %6s", "-", "-", "-", "-");
            continue;
          }
          std::fprintf(out, " | %5.1f %4.0f%% %7s %6s", n->gbps, n->pct_of_ceiling,
                       times(find(rs, "onednn", op.name, dt, D, t, cls), *n).c_str(),
                       times(find(rs, "naive", op.name, dt, D, 1, cls), *n).c_str());
        }
        std::fprintf(out, "\n");
      }
    for (int t : threads) {
      // Time of the two calls / time of the fused op, over norms and dtypes.
      double lo[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
      double hi[2] = {0, 0};
      for (const Op& op : kOps) {
        if (!is_fused(op.pass)) continue;
        const int k = op.pass == Pass::fused ? 0 : 1;
        const Op& pair = find_op(op.norm, two_calls_of(op.pass));
        for (DType dt : dtypes) {
          const Record* f = find(rs, "normkit", op.name, dt, D, t, cls);
          const Record* p = find(rs, "normkit", pair.name, dt, D, t, cls);
          if (!f || !p) continue;
          lo[k] = std::min(lo[k], p->timing.median_s / f->timing.median_s);
          hi[k] = std::max(hi[k], p->timing.median_s / f->timing.median_s);
        }
      }
      if (hi[0] > 0 && hi[1] > 0)
        std::fprintf(out,
                     "fused ops against the same work in two calls (their time / the fused op's), %d thread%s: "
                     "forward %.2f-%.2fx, backward %.2f-%.2fx\n",
                     t, t == 1 ? "" : "s", lo[0], hi[0], lo[1], hi[1]);
    }
    for (int t : threads) {
      // What the parameter gradients add: the backward's time / dx alone's.
      double lo = std::numeric_limits<double>::infinity(), hi = 0;
      for (const Op& op : kOps) {
        if (op.pass != Pass::backward) continue;
        const Op& dx_only = find_op(op.norm, Pass::backward_dx);
        for (DType dt : dtypes) {
          const Record* b = find(rs, "normkit", op.name, dt, D, t, cls);
          const Record* x = find(rs, "normkit", dx_only.name, dt, D, t, cls);
          if (!b || !x) continue;
          lo = std::min(lo, b->timing.median_s / x->timing.median_s);
          hi = std::max(hi, b->timing.median_s / x->timing.median_s);
        }
      }
      if (hi > 0)
        std::fprintf(out,
                     "backward with the parameter gradients against dx alone (its time / dx alone's), "
                     "%d thread%s: %.2f-%.2fx\n",
                     t, t == 1 ? "" : "s", lo, hi);
    }
    std::fprintf(out, "ceiling (copy GB/s at this size):");
    for (int t : threads)
      if (const Record* r = find(rs, "normkit", kOps[0].name, DType::f32, D, t, cls))
        std::fprintf(out, " %.1f on %d thread%s", r->copy_gbps, t, t == 1 ? "" : "s");
    std::fprintf(out, "\n");
  }
  // One row: the widest row timed, f32 forward on one thread.
  std::int64_t rowD = 0;
  for (const Record& r : rs)
    if (r.impl == "normkit" && r.size_class == "row") rowD = std::max(rowD, r.shape.D);
  if (rowD > 0) {
    std::fprintf(out, "one row of D = %lld, f32, 1 thread (a decode step):", static_cast<long long>(rowD));
    for (const Op& op : kOps) {
      if (op.pass != Pass::forward) continue;
      const Record* n = find(rs, "normkit", op.name, DType::f32, rowD, 1, "row");
      if (!n) continue;
      std::fprintf(out, " %.*s %.3f us", static_cast<int>(op.name.size()), op.name.data(), us(*n));
      if (const Record* o = find(rs, "onednn", op.name, DType::f32, rowD, 1, "row"))
        std::fprintf(out, " (oneDNN %.3f)", us(*o));
      std::fprintf(out, ";");
    }
    if (const Record* c = find(rs, "ceiling", "copy_row", DType::f32, rowD, 1, "row"))
      std::fprintf(out, " copying the row %.3f us", us(*c));
    std::fprintf(out, "\n");
  }
}

void print_targets(std::FILE* out, const std::vector<Record>& rs) {
  long long samples = 0, preempted = 0;
  for (const Record& r : rs) {
    samples += r.timing.samples;
    preempted += r.timing.preempted;
  }
  std::fprintf(out, "\nsamples left out as preempted by other processes: %lld of %lld (%.1f%%)\n", preempted,
               samples, samples ? 100.0 * static_cast<double>(preempted) / static_cast<double>(samples) : 0.0);
  std::fprintf(out,
               "\ntargets (normkit; worst case over every record it applies to; \"beyond cache\": "
               "rotated buffers whose footprint exceeds every cache sysfs reports):\n");
  Worst fwd32, fwd16, bwd, fused, fused_bwd, vs_onednn, row, row_onednn;
  // The least time an op's bytes need at the ceilings of its size.
  const auto least_s = [](const Record& r) {
    return static_cast<double>(r.traffic.total()) / (r.ceiling_gbps * 1e9);
  };
  for (const Record& r : rs) {
    if (r.impl != "normkit" || !r.table_op) continue;
    const Op& op = *r.table_op;
    const bool beyond_cache = r.size_class == "dram" && r.where == "DRAM";
    if (beyond_cache && op.pass == Pass::forward)
      (r.shape.act == DType::f32 ? fwd32 : fwd16).take(r.pct_of_ceiling, r);
    if (beyond_cache && (op.pass == Pass::backward || op.pass == Pass::backward_dx ||
                         op.pass == Pass::fused_backward))
      bwd.take(r.pct_of_ceiling, r);
    // A fused op against its pair of calls: the speed-up the two ops' bytes
    // allow at the measured ceilings is least(pair) / least(fused); the
    // achieved one, as a fraction of it.
    if (beyond_cache && is_fused(op.pass)) {
      const Record* pair = find(rs, "normkit", find_op(op.norm, two_calls_of(op.pass)).name, r.shape.act,
                                r.shape.D, r.threads, r.size_class);
      if (pair)
        (op.pass == Pass::fused ? fused : fused_bwd)
            .take(100.0 * (pair->timing.median_s / r.timing.median_s) / (least_s(*pair) / least_s(r)), r);
    }
    const Record* o = find(rs, "onednn", r.op, r.shape.act, r.shape.D, r.threads, r.size_class);
    if (o) (r.size_class == "row" ? row_onednn : vs_onednn).take(o->timing.median_s / r.timing.median_s, r);
    // One row against copying the op's own working set (x, weight, bias, y)
    // at the same size: score 1.5 · copy / norm >= 1.
    if (r.size_class == "row" && op.pass == Pass::forward && r.shape.D >= 768 && r.shape.D <= 16384)
      row.take(1.5 * r.copy_s / r.timing.median_s, r);
  }
  // vs_onednn covers every shape; row_onednn is its one-row part, also asked
  // to be faster by a margin.
  for (const auto& [t, one] : row_onednn.by_threads) {
    Worst::One& all = vs_onednn.by_threads[t];
    all.count += one.count;
    if (one.value < all.value) {
      all.value = one.value;
      all.which = one.which;
    }
  }
  target_line(out, "forward f32 beyond cache >= 85% of its ceiling", fwd32, 85, "%");
  target_line(out, "forward bf16/f16 beyond cache >= 80% of its ceiling", fwd16, 80, "%");
  target_line(out, "backward (plain, dx alone and fused) beyond cache >= 70% of its ceiling", bwd, 70, "%");
  target_line(out,
              "fused add+norm forward beyond cache >= 95% of the speed-up over add then norm that the "
              "bytes allow at the measured ceilings",
              fused, 95, "%");
  target_line(out,
              "fused add+norm backward beyond cache >= 95% of the speed-up over backward then add that the "
              "bytes allow at the measured ceilings",
              fused_bwd, 95, "%");
  target_line(out, "faster than oneDNN at every measured shape (oneDNN time / normkit time)", vs_onednn, 1.0,
              "x");
  target_line(out, "one row at least 1.5x faster than oneDNN (oneDNN time / normkit time)", row_onednn, 1.5,
              "x");
  target_line(out,
              "one row, D = 768..16384, forward within 1.5x the time to copy the op's own working set, "
              "as 1.5 x copy time / norm time >= 1",
              row, 1.0, "");
}

void write_json(std::FILE* out, const std::vector<Record>& rs, const RunInfo& info) {
  std::fprintf(out, "[\n");
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const Record& r = rs[i];
    const auto sv = [](std::string_view s) { return std::string(s); };
    std::fprintf(
        out,
        "  {\"impl\": \"%s\", \"simd\": \"%s\", \"op\": \"%s\", \"norm\": \"%s\", \"pass\": \"%s\", "
        "\"dtype\": \"%s\", \"param_dtype\": \"%s\", \"rows\": %lld, \"D\": %lld, "
        "\"threads\": %d, \"size_class\": \"%s\", \"where\": \"%s\", \"inputs\": \"%s\", \"sets\": %lld, "
        "\"working_set_bytes\": %lld, \"bytes_read\": %lld, \"bytes_written\": %lld, "
        "\"median_ms\": %.6g, \"median_all_ms\": %.6g, \"min_ms\": %.6g, \"samples\": %d, "
        "\"preempted_samples\": %d, \"calls_per_sample\": %d, \"rounds\": %d, "
        "\"gbps\": %.4g, \"ceiling_gbps\": %.4g, \"pct_of_ceiling\": %.4g, "
        "\"copy_gbps\": %.4g, \"read_gbps\": %.4g, \"copy_ms\": %.6g, \"copy_method\": \"%s\", "
        "\"clock_ghz\": %.4g, \"clock_ghz_after\": %.4g}%s\n",
        r.impl.c_str(), info.simd.c_str(), r.op.c_str(), r.table_op ? sv(norm_name(r.table_op->norm)).c_str() : "",
        r.table_op ? sv(pass_name(r.table_op->pass)).c_str() : "",
        sv(dtype_name(r.shape.act)).c_str(), sv(dtype_name(r.shape.param)).c_str(),
        static_cast<long long>(r.shape.rows), static_cast<long long>(r.shape.D), r.threads,
        r.size_class.c_str(), r.where.c_str(), r.inputs.c_str(), static_cast<long long>(r.sets),
        static_cast<long long>(r.working_set), static_cast<long long>(r.traffic.read),
        static_cast<long long>(r.traffic.written), r.timing.median_s * 1e3,
        r.timing.median_all_s * 1e3, r.timing.min_s * 1e3, r.timing.samples, r.timing.preempted,
        r.timing.calls_per_sample, r.timing.rounds, r.gbps, r.ceiling_gbps, r.pct_of_ceiling,
        r.copy_gbps, r.read_gbps, r.copy_s * 1e3, r.copy_method.c_str(), info.clock_ghz_before, info.clock_ghz_after,
        i + 1 == rs.size() ? "" : ",");
  }
  std::fprintf(out, "]\n");
}

}  // namespace normkit::bench
