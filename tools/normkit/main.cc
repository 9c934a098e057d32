// normkit — command-line entry point: dispatches to a subcommand.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "commands.hpp"
#include "normkit/version.hpp"

namespace {

constexpr const char* kUsage =
    "usage: normkit <command> [options]\n"
    "\n"
    "LayerNorm and RMSNorm kernels, checked against an fp64 oracle.\n"
    "\n"
    "commands:\n"
    "  lab      verify the normalization contracts and the worked results of the texts\n"
    "  bench    time every op against the machine's memory-bandwidth ceiling\n"
    "  train    train a small language model with a chosen norm placement\n"
    "  profile  where a model step's time goes: FLOP share against time share\n"
    "  study    measure what placement, warmup, depth and the final norm do to training\n"
    "\n"
    "options:\n"
    "  --help       show this help (or `normkit <command> --help`)\n"
    "  --version    print the library version\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  try {
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd == "--version") {
      std::printf("normkit %s\n", normkit::version());
      return 0;
    }
    if (cmd == "lab") return normkit::cli::lab_main(argc - 2, argv + 2);
    if (cmd == "bench") return normkit::cli::bench_main(argc - 2, argv + 2);
    if (cmd == "train") return normkit::cli::train_main(argc - 2, argv + 2);
    if (cmd == "profile") return normkit::cli::profile_main(argc - 2, argv + 2);
    if (cmd == "study") return normkit::cli::study_main(argc - 2, argv + 2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "normkit %s: %s\n", argv[1], e.what());
    return 1;
  }
  std::fprintf(stderr, "normkit: unknown command '%s'\n\n%s", argv[1], kUsage);
  return 2;
}
