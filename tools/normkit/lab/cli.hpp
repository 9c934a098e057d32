// `normkit lab` argument handling, separate from main() so tests can drive it
// with their own streams and their own norms under test.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "lab/norms.hpp"

namespace normkit::lab {

// Runs `normkit lab ARGS…`; returns the exit status: 0 all selected checks
// passed, 1 a check failed (or the report could not be written), 2 a usage
// error (unknown option or check id).
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const Norms& norms);

}  // namespace normkit::lab
