// normkit bench --lines: the cache lines each op's call brings into L2,
// counted by callgrind's cache simulator (bench_lines.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "measure/traffic.hpp"

namespace normkit::cli {

struct LinesOptions {
  std::vector<const measure::Op*> ops;
  std::vector<DType> dtypes;
  std::vector<std::int64_t> widths;
  std::int64_t elements = 0;  // per activation tensor; rows = elements / D
  bool f32_params = false;
  bool in_place = false;  // outputs over the inputs they may overwrite (not the two-call ops)
  double max_ratio = 0;  // > 0: exit 1 when a cell moves more than this many times its lines
};

// Prints one line per op, dtype and D; returns 1 when max_ratio is exceeded.
int bench_lines(const LinesOptions& o);

// The child process under callgrind: --lines-call OP DTYPE D ROWS PARAM_DTYPE.
int bench_lines_call(int argc, char** argv);

}  // namespace normkit::cli
