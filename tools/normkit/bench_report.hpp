// normkit bench — what one measurement is, and how the results are shown:
// readable tables, the targets, and JSON records.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "measure/traffic.hpp"
#include "measure/timing.hpp"

namespace normkit::bench {

// The traffic model, timing and ceilings live in measure/, shared with
// `normkit profile` and the lab.
using namespace normkit::measure;

// One timed (implementation, op, dtype, shape, threads).
struct Record {
  std::string impl;          // "normkit", "naive", "onednn", or "ceiling" for a reference copy
  std::string op;            // an op's name (kOps), or "copy_row" for the copy of one row
  const Op* table_op = nullptr;  // the op, null for "copy_row"
  Shape shape;
  int threads = 1;
  std::string size_class;    // "dram", "cache" or "row"
  std::string where;         // where the rotated footprint fits: L1, L2, L3 or DRAM
  std::string inputs = "signed";  // "positive" under --positive-inputs
  std::int64_t sets = 1;     // buffer sets rotated through
  std::int64_t working_set = 0;  // bytes one call touches
  Traffic traffic;
  Timing timing;
  double gbps = 0;           // traffic.total() / median time
  double ceiling_gbps = 0;   // the least time the traffic needs at the ceilings, as GB/s
  double pct_of_ceiling = 0;
  double copy_gbps = 0, read_gbps = 0;  // the two ceilings at this size and thread count
  double copy_s = 0;         // one copy of the working set at this size and thread count
  std::string copy_method;
};

struct RunInfo {
  std::string cpu;           // model name
  std::string simd;          // the SIMD target the kernels run (normkit::cpu_simd_target)
  std::string caches;        // "L1d 48 KiB, L2 2048 KiB, L3 491520 KiB (sysfs, CPU 0)"
  std::string onednn;        // version, or "not built"
  std::string load_before, load_after;  // /proc/loadavg at the start and the end
  double clock_ghz_before = 0, clock_ghz_after = 0;  // core_clock_ghz() at the start and the end
  std::int64_t dram_elements = 0, cache_elements = 0, rotate_bytes = 0;
  bool quick = false;        // --quick: one round of short timings
};

// A screenful for a person: each op and dtype at the widest D (beyond cache
// if the run has it): GB/s, % of the ceiling, and the speed-up over each
// other implementation, per thread count; one row; the copy ceilings.
void print_summary(std::FILE* out, const std::vector<Record>& records, const RunInfo& info);

// Tables grouped by size class and thread count, then the ratios.
void print_tables(std::FILE* out, const std::vector<Record>& records, const RunInfo& info);

// Each target of docs/benchmarks.md as met / not met with the number that
// decides it (or "not measured" when the run did not include its records).
void print_targets(std::FILE* out, const std::vector<Record>& records);

// A JSON list of records, one object per record. Each carries the run's
// SIMD target, so a comparison of two runs can tell when they ran different
// kernels.
void write_json(std::FILE* out, const std::vector<Record>& records, const RunInfo& info);

}  // namespace normkit::bench
