// `normkit study`: the texts' claims about normalization inside a model, each
// measured as a table (tools/normkit/study/), with a Markdown report, the
// JSON of every number, and PNG plots drawn by bench/plot_study.py.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "cli_args.hpp"
#include "commands.hpp"
#include "model/blas.hpp"
#include "normkit/threading.hpp"
#include "study/stats.hpp"
#include "study/study.hpp"

namespace normkit::cli {

namespace {

constexpr const char* kHelp =
    "usage: normkit study [--quick] [options]\n"
    "\n"
    "Measures what the texts claim about normalization inside a transformer, on\n"
    "small byte-level models whose norms are normkit's kernels: gradients at\n"
    "initialization by placement and depth, warmup for pre- and post-norm, the\n"
    "unnormalized stack, the final norm, LayerNorm against RMSNorm, and the other\n"
    "placements (sandwich, output, DeepNorm, QK-norm). Prints each verdict and\n"
    "writes a report.\n"
    "\n"
    "  --quick          3 seeds, depths 6/12/24, 300 steps: minutes on 2 cores\n"
    "                   (without it: the full grid, whose time is printed first)\n"
    "  --smoke          every table at a tiny size in seconds: checks the tool,\n"
    "                   not the claims\n"
    "  --seeds N        seeds per training configuration         [preset]\n"
    "  --steps N        steps per training run                   [preset]\n"
    "  --out DIR        where the report goes                    [study]\n"
    "  --data FILE      the text            [Genesis from Debian's bible-kjv]\n"
    "  --threads N      threads of normkit and OpenBLAS          [1]\n"
    "  --no-plots       do not run bench/plot_study.py\n"
    "\n"
    "writes DIR/study.md (tables, verdicts and their rules), DIR/study.json\n"
    "(every measured number, every run's loss curve) and DIR/*.png.\n";

struct Options {
  study::Preset preset = study::full_preset();
  std::string out = "study";
  std::string data = NORMKIT_STUDY_TEXT;
  int threads = 1;
  bool plots = true;
};

bool parse(int argc, char** argv, Options& o) {
  std::int64_t seeds = 0, steps = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (a == "--quick") {
      o.preset = study::quick_preset();
      continue;
    }
    if (a == "--smoke") {
      o.preset = study::tiny_preset();
      continue;
    }
    if (a == "--no-plots") {
      o.plots = false;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("unknown option or missing value: '" + a + "'");
    const std::string v = argv[++i];
    if (a == "--seeds") seeds = parse_int(a, v, 1);
    else if (a == "--steps") steps = parse_int(a, v, 10);
    else if (a == "--out") o.out = v;
    else if (a == "--data") o.data = v;
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(a, v, 1));
    else throw std::invalid_argument("unknown option '" + a + "' (see normkit study --help)");
  }
  // After the loop, so that --quick or --smoke may come after them.
  if (seeds) o.preset.seeds = static_cast<int>(seeds);
  if (steps) {
    o.preset.steps = steps;
    o.preset.warmup = std::min(o.preset.warmup, steps / 5);
  }
  return true;
}

// Milliseconds per step per block at the preset's size, from a short run.
double calibrate(const study::Preset& p, const model::TextData& data) {
  model::Config c;
  c.vocab = data.vocab();
  c.context = p.context;
  c.width = p.width;
  c.heads = p.heads;
  c.ffn = p.ffn;
  c.depth = p.depth;
  model::TrainOptions o;
  o.steps = 6;
  o.batch = p.batch;
  o.seq = p.context;
  const study::Run r = study::train_run("calibration", c, o, 1, data);
  return r.median_step_ms / static_cast<double>(p.depth);
}

std::string minutes(double seconds) { return study::fixed(seconds / 60.0, 1) + " min"; }

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f.flush()) throw std::runtime_error("cannot write " + path.string());
}

// The venv's Python (scripts/setup.sh puts matplotlib there), else python3.
std::string python() {
  if (const char* p = std::getenv("NORMKIT_PYTHON"); p && *p) return p;
  if (std::filesystem::exists(NORMKIT_VENV_PYTHON)) return NORMKIT_VENV_PYTHON;
  return "python3";
}

}  // namespace

int study_main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (!std::filesystem::exists(o.data))
    throw std::invalid_argument("--data: no text at '" + o.data +
                                "' (scripts/setup.sh extracts Genesis from Debian's bible-kjv there; or pass --data FILE)");
  const model::TextData data = model::TextData::load(o.data, 0.1);
  normkit::set_num_threads(o.threads);
  model::set_blas_threads(o.threads);
  std::filesystem::create_directories(o.out);

  const double ms_per_block_step = calibrate(o.preset, data);
  const double estimate = ms_per_block_step * static_cast<double>(study::planned_steps(o.preset)) / 1000.0;
  std::printf("normkit study (%s): about %s on %d thread%s (at most %lld block-steps at %.2f ms each, measured now)\n",
              o.preset.name.c_str(), minutes(estimate).c_str(), o.threads, o.threads == 1 ? "" : "s",
              static_cast<long long>(study::planned_steps(o.preset)), ms_per_block_step);
  std::fflush(stdout);

  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](const std::string& what, double done) {
    if (!tty) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r\033[K[%3.0f%%, %s] %s", 100 * done, minutes(elapsed).c_str(), what.c_str());
  };
  const study::Study s = study::run_study(o.preset, data, o.data, progress);
  if (tty) std::fputs("\r\033[K", stderr);

  const std::filesystem::path dir(o.out);
  write_file(dir / "study.json", study::json(s));
  bool plotted = false;
  // Each path quoted for the shell.
  std::string plot_cmd;
  for (const std::string& part : {python(), std::string(NORMKIT_PLOT_STUDY), (dir / "study.json").string()}) {
    plot_cmd += '"';
    plot_cmd += part;
    plot_cmd += "\" ";
  }
  plot_cmd += "-o \"";
  plot_cmd += dir.string();
  plot_cmd += '"';
  if (o.plots) plotted = std::system((plot_cmd + " >/dev/null 2>&1").c_str()) == 0;
  write_file(dir / "study.md", study::markdown(s, plotted));

  std::fputs(study::summary(s).c_str(), stdout);
  std::printf("\nreport: %s (every table, verdict and rule)\n", (dir / "study.md").c_str());
  std::printf("data:   %s (every number, every run's loss curve)\n", (dir / "study.json").c_str());
  if (plotted)
    std::printf("plots:  %s/*.png\n", dir.c_str());
  else if (o.plots)
    std::printf("plots:  not drawn (%s needs matplotlib; scripts/setup.sh installs it): %s\n", python().c_str(),
                plot_cmd.c_str());
  return 0;
}

}  // namespace normkit::cli
