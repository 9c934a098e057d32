// normkit bench — the implementations it times, behind one interface:
//   normkit  the public API (normkit::layer_norm, ...), what users call
//   naive    the two-pass scalar loops a user would write first (the baseline)
//   onednn   oneDNN's layer normalization primitive (when built with oneDNN)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>

#include "measure/traffic.hpp"

namespace normkit::bench {

// The traffic model, timing and ceilings live in measure/, shared with
// `normkit profile` and the lab.
using namespace normkit::measure;

// eps of every timed call (the value does not change the work done).
inline constexpr double kEps = 1e-5;

// A prepared op: call(set) runs it once on buffer set `set`.
using Call = std::function<void(std::int64_t set)>;

struct Impl {
  std::string_view name;
  std::string_view what;  // one line for --help and the docs
  bool threaded;          // follows the thread setting; false: always one thread
  bool variance_stats;    // its backward takes the variance, not rstd, in the rstd array
  bool f32_params;        // takes f32 parameters with 16-bit activations (--f32-params)
  // The parameter dtype it takes with `act` activations, or no value when it
  // has no such op or dtype.
  std::optional<DType> (*param_dtype)(const Op& op, DType act);
  // Everything that may be done once per shape (oneDNN builds its primitive
  // here) is done here, not in the timed call.
  Call (*prepare)(const Op& op, const Shape& s, std::span<const Tensors> sets);
};

// The parameter dtype of impl's cell for op with `act` activations: f32 with
// 16-bit activations under --f32-params, or no value when impl has no such
// op or dtype (with --f32-params, an implementation that cannot take f32
// parameters is left out rather than timed like against unlike).
std::optional<DType> cell_param_dtype(const Impl& impl, const Op& op, DType act, bool f32_params);

// Every implementation this build has, normkit first.
std::span<const Impl> impls();

// The baseline and oneDNN, defined in their own files.
extern const Impl kNaiveImpl;
#ifdef NORMKIT_BENCH_ONEDNN
extern const Impl kOneDnnImpl;
std::string_view onednn_version();
#endif

// The threads OpenMP regions of the bench (the add of add_then_*, the
// ceilings, oneDNN) use: normkit::num_threads() after set_threads.
void set_threads(int n);

}  // namespace normkit::bench
