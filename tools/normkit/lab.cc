// `normkit lab`: the normalization lab, run against normkit's public API.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "lab/cli.hpp"
#include "lab/norms.hpp"

namespace normkit::cli {

int lab_main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  return lab::run_cli(args, std::cout, std::cerr, lab::library_norms());
}

}  // namespace normkit::cli
