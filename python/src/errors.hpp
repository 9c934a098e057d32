// The binding's own errors. The library's messages start with the function
// name; the binding's do too, so a user sees one style.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

namespace normkit_py {

[[noreturn]] inline void type_error(const char* fn, const std::string& msg) {
  throw nanobind::type_error((std::string(fn) + ": " + msg).c_str());
}
[[noreturn]] inline void value_error(const char* fn, const std::string& msg) {
  throw nanobind::value_error((std::string(fn) + ": " + msg).c_str());
}

// The Python type name of `h`, for messages.
inline std::string kind_of(nanobind::handle h) { return nanobind::inst_name(h).c_str(); }

// "(2, 3)", "(4,)": a shape or strides as Python prints a tuple.
inline std::string shape_str(const std::int64_t* shape, int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (n == 1) s += ",";
  return s + ")";
}

}  // namespace normkit_py
