// normkit — the one exception type the library throws.
#pragma once

#include <stdexcept>
#include <string>

namespace normkit {

// Thrown by every public entry point when an argument is invalid. The message
// names the function, the argument, what was expected and what was given, e.g.
//   "rms_norm: weight has 4095 elements, expected D = 4096".
// It is always thrown before any output is written: on error every output
// buffer is exactly as it was.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The subclass thrown when the problem is an argument's dtype (unsupported,
// or not allowed in combination with another's), so that bindings can map it
// to their type error (Python: TypeError; other Errors become ValueError).
class DTypeError : public Error {
 public:
  using Error::Error;
};

}  // namespace normkit
