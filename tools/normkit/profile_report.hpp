// normkit profile — what a run found, and how it is shown: the tables on
// stdout, JSON, and a Markdown report with its charts.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "profile_run.hpp"

namespace normkit::profile {

// The machine's ceilings, measured in the same run.
struct Ceilings {
  double gemm_gflops = 0;  // sgemm at the step's largest product shape, its fastest sample
  std::string gemm_shape;  // "M×N×K"
  double copy_gbps = 0;    // the bench's copy at the largest norm's working set, rotated past the L3
  double read_gbps = 0;
  std::string copy_method;
  std::int64_t working_set = 0, sets = 0;
};

// A whole step timed against another (medians of interleaved steps).
struct Comparison {
  std::string what;      // "fused add+norm over add, then norm (LayerNorm)"
  std::string a, b;      // the two configurations
  double a_s = 0, b_s = 0;
  double speedup() const { return b_s / a_s; }  // how much faster a is than b
};

struct Result {
  StepConfig config;
  int threads = 1, norm_threads = 1, warmup = 0;  // OpenBLAS's, normkit's
  StepProfile step;
  Ceilings ceilings;
  std::vector<Comparison> comparisons;
  int compare_repeats = 0;
  std::string cpu, load_before, load_after;
  std::string blas_core;       // OpenBLAS's kernels (model::blas_core)
  bool blas_fallback = false;  // its generic ones on a CPU it does not know
};

// Speed-up ceiling if the normalization class took no time: 1 / (1 − share).
double amdahl_if_free(const Result& r);

void print_text(std::FILE* out, const Result& r, bool verbose);
void write_json(std::FILE* out, const Result& r);
// The report: the tables in Markdown, and the charts that `python` (if not
// empty) draws from `json_path` with bench/plot_profile.py into PNGs beside
// `path`. Returns the lines to tell the user (files written, or how to draw).
std::vector<std::string> write_report(const std::string& path, const std::string& json_path, const Result& r,
                                      const std::string& python, const std::string& command_line);

}  // namespace normkit::profile
