// Number and dtype arguments of the normkit CLI: the whole argument must
// parse, and a value out of range names the flag and what it expects.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "normkit/tensor.hpp"

namespace normkit::cli {

inline std::int64_t parse_int(const std::string& flag, const std::string& v, std::int64_t min) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < min)
    throw std::invalid_argument(flag + " expects an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return n;
}

inline double parse_number(const std::string& flag, const std::string& v, double min) {
  std::size_t used = 0;
  double x = -1;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !std::isfinite(x) || x < min)
    throw std::invalid_argument(flag + " expects a number >= " + std::to_string(min) + ", got '" + v + "'");
  return x;
}

// The activation dtypes the CLI takes by name.
inline DType parse_dtype(const std::string& flag, const std::string& s) {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    if (dtype_name(d) == s) return d;
  throw std::invalid_argument(flag + ": unknown dtype '" + s + "' (f32, bf16, f16)");
}

}  // namespace normkit::cli
