// `normkit profile`: where one training step of the model spends its time,
// op by op and by class, against what each op must compute and move, and
// the machine's compute and bandwidth ceilings measured in the same run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "measure/machine.hpp"
#include "commands.hpp"
#include "measure/memory.hpp"
#include "measure/timing.hpp"
#include "model/blas.hpp"
#include "normkit/threading.hpp"
#include "profile_report.hpp"
#include "profile_run.hpp"

namespace normkit::cli {

namespace {

namespace nm = normkit::model;
namespace np = normkit::profile;

constexpr const char* kHelp =
    "usage: normkit profile [options]\n"
    "\n"
    "Runs forward, loss and backward of one training step of the model of\n"
    "`normkit train` and shows where the time goes: per operator and per class\n"
    "(matrix products, attention, normalization, element-wise, embedding/head/\n"
    "loss), the FLOPs and bytes each must move (counted), its median time over\n"
    "repeated steps, its share of the time beside its share of the FLOPs, and\n"
    "GFLOP/s and GB/s against an sgemm and a copy measured in the same run.\n"
    "Then the Amdahl ceiling if normalization were free, and whole steps timed\n"
    "against each other: fused add+norm against an add then the norm, and\n"
    "RMSNorm against LayerNorm.\n"
    "\n"
    "model (default: a BERT-base-like stack, about a second a step on 2 cores):\n"
    "  --depth N          blocks                                         [2]\n"
    "  --width D          residual width                                 [768]\n"
    "  --heads H          attention heads, dividing D                    [12]\n"
    "  --ffn F            MLP hidden width                               [4·D]\n"
    "  --mlp KIND         gelu or swiglu                                 [gelu]\n"
    "  --placement P      pre, post, sandwich, output, none, deepnorm    [pre]\n"
    "  --norm K           layernorm or rmsnorm                           [layernorm]\n"
    "  --qk-norm          norm each head's query and key\n"
    "  --unfused          each add+norm as an add, then the norm\n"
    "  --vocab V          vocabulary (random tokens)                     [4096]\n"
    "  --batch B          sequences per step                             [8]\n"
    "  --seq T            tokens per sequence                            [128]\n"
    "\n"
    "run:\n"
    "  --threads N        threads of OpenBLAS                            [2]\n"
    "  --norm-threads N   threads of normkit's kernels                   [1]\n"
    "                     (both pools above 1 on a 2-core machine wait on each\n"
    "                     other's spinning threads: docs/profile.md)\n"
    "  --warmup N         steps before timing                            [2]\n"
    "  --repeats N        timed steps (each with and without the observer) [7]\n"
    "  --compare-repeats N  steps of each configuration compared          [5]\n"
    "  --no-compare       skip the whole-step comparisons\n"
    "  --seed S           initialization and tokens                      [1]\n"
    "  --smoke            a tiny model and few steps: checks the command works\n"
    "                     (seconds); its numbers mean nothing\n"
    "\n"
    "output:\n"
    "  --json             the result as JSON on stdout (no tables)\n"
    "  --report FILE.md   also a Markdown report, and PNG charts beside it (FLOP\n"
    "                     share beside time share; a roofline) drawn by\n"
    "                     bench/plot_profile.py with $NORMKIT_PYTHON or the\n"
    "                     project's .venv Python, when there is one\n"
    "  --verbose          every operator, not only the largest\n"
    "  --help             this text\n"
    "\n"
    "Timing: after the warm-up, steps with the observer and steps without it\n"
    "alternate; each op's time is its median over the observed steps, and the\n"
    "unobserved steps' median is the wall time the ops' sum is held against.\n"
    "Other processes on the machine make single steps slow: medians, not means.\n";

struct Options {
  np::StepConfig step;
  int threads = 2, norm_threads = 1, warmup = 2, repeats = 7, compare_repeats = 5;
  bool compare = true, json = false, verbose = false;
  std::string report;
};

// Returns false when --help was asked for.
bool parse(int argc, char** argv, Options& o) {
  nm::Config& m = o.step.model;
  m.width = 768;
  m.heads = 12;
  m.depth = 2;
  m.vocab = 4096;
  o.step.batch = 8;
  o.step.seq = 128;
  std::int64_t ffn = 0;  // 0: 4·width
  for (int i = 0; i < argc; ++i)
    if (std::string(argv[i]) == "--smoke") {
      m.width = 32;
      m.heads = 4;
      m.depth = 1;
      m.vocab = 64;
      o.step.batch = 2;
      o.step.seq = 16;
      o.warmup = 1;
      o.repeats = 3;
      o.compare_repeats = 1;
    }
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (a == "--smoke") continue;
    if (a == "--qk-norm") {
      m.qk_norm = true;
      continue;
    }
    if (a == "--unfused") {
      o.step.fused = false;
      continue;
    }
    if (a == "--no-compare") {
      o.compare = false;
      continue;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--verbose" || a == "-v") {
      o.verbose = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("unknown option or missing value: '" + a + "'");
    const std::string v = argv[++i];
    if (a == "--depth") m.depth = parse_int(a, v, 1);
    else if (a == "--width") m.width = parse_int(a, v, 1);
    else if (a == "--heads") m.heads = parse_int(a, v, 1);
    else if (a == "--ffn") ffn = parse_int(a, v, 1);
    else if (a == "--mlp") m.ffn_kind = nm::parse_ffn_kind(v);
    else if (a == "--placement") m.placement = nm::parse_placement(v);
    else if (a == "--norm") m.norm = nm::parse_norm_kind(v);
    else if (a == "--vocab") m.vocab = parse_int(a, v, 2);
    else if (a == "--batch") o.step.batch = parse_int(a, v, 1);
    else if (a == "--seq") o.step.seq = parse_int(a, v, 1);
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--norm-threads") o.norm_threads = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--warmup") o.warmup = static_cast<int>(parse_int(a, v, 0));
    else if (a == "--repeats") o.repeats = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--compare-repeats") o.compare_repeats = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--seed") o.step.seed = static_cast<std::uint64_t>(parse_int(a, v, 0));
    else if (a == "--report") o.report = v;
    else throw std::invalid_argument("unknown option '" + a + "' (see normkit profile --help)");
  }
  m.ffn = ffn > 0 ? ffn : 4 * m.width;
  m.context = o.step.seq;
  nm::validate(m);  // names the bad field
  return true;
}

// The sgemm rate at the step's largest matrix product (the MLP's first:
// rows × F × D): the compute ceiling its matrix products are held against.
// From the fastest sample, not the median: a ceiling the step's own products
// (timed at other moments of a shared machine) exceeded would not be one.
np::Ceilings measure_gemm(const np::StepConfig& c, np::Ceilings out) {
  const std::int64_t M = c.batch * c.seq, N = c.model.ffn, K = c.model.width;
  std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N)),
      y(static_cast<std::size_t>(M * N));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (auto* v : {&a, &b})
    for (float& x : *v) x = normal(rng);
  measure::TimingConfig cfg;
  cfg.min_seconds = 0.3;
  cfg.min_samples = 7;
  cfg.max_seconds = 2;
  const measure::Timing t = measure::time_calls(
      [&](std::int64_t) {
        nm::gemm<float>(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, y.data(), N);
      },
      cfg);
  out.gemm_gflops = 2.0 * static_cast<double>(M * N * K) / t.min_s / 1e9;
  out.gemm_shape = std::to_string(M) + "×" + std::to_string(N) + "×" + std::to_string(K);
  return out;
}

// The copy and read ceilings (measure/memory.hpp) at the working set of the
// step's largest norm call, rotated over enough sets to span twice the L3,
// so that the copy, like the step, finds its data outside the caches.
np::Ceilings measure_bandwidth(const np::StepProfile& p, int threads, np::Ceilings out) {
  std::int64_t ws = 0;
  for (const np::Row& r : p.ops)
    if (r.cls == np::OpClass::normalization && r.calls > 0)
      ws = std::max(ws, static_cast<std::int64_t>(r.bytes / static_cast<double>(r.calls)));
  ws = std::max<std::int64_t>(ws, 1 << 16);
  const measure::Caches caches = measure::read_caches();
  const std::int64_t span = std::max<std::int64_t>(2 * caches.l3, std::int64_t{64} << 20);
  const std::int64_t sets = std::max<std::int64_t>(1, (span + ws - 1) / ws);
  measure::TimingConfig cfg;
  cfg.min_seconds = 0.1;
  cfg.min_samples = 9;
  cfg.max_seconds = 0.6;
  measure::Arena arena;
  measure::Ceilings ceilings(arena, cfg, 1e9);
  ceilings.refresh(ws, sets, threads);
  const measure::Ceiling c = ceilings.at(ws, sets, threads);
  out.copy_gbps = c.copy_gbps;
  out.read_gbps = c.read_gbps;
  out.copy_method = c.copy_method;
  out.working_set = ws;
  out.sets = sets;
  return out;
}

std::string config_name(const np::StepConfig& c) {
  return std::string(nm::norm_kind_name(c.model.norm)) + (c.fused ? " fused" : " unfused");
}

// Whole steps of four configurations (LayerNorm and RMSNorm, fused and
// unfused), interleaved step by step; three comparisons from their medians.
std::vector<np::Comparison> compare_steps(const Options& o) {
  std::vector<std::unique_ptr<np::Step>> steps;
  for (const NormKind k : {NormKind::layer_norm, NormKind::rms_norm})
    for (const bool fused : {true, false}) {
      np::StepConfig c = o.step;
      c.model.norm = k;
      c.fused = fused;
      steps.push_back(std::make_unique<np::Step>(c));
    }
  std::vector<std::function<void()>> runs;
  for (auto& s : steps) runs.push_back([p = s.get()] { p->run(); });
  const measure::Interleaved t = measure::time_interleaved(runs, 1, o.compare_repeats);
  const auto cmp = [&](std::string what, std::size_t a, std::size_t b) {
    return np::Comparison{std::move(what), config_name(steps[a]->config()), config_name(steps[b]->config()),
                          t.median_s(a), t.median_s(b)};
  };
  return {cmp("fused add+norm over an add, then the norm (LayerNorm)", 0, 1),
          cmp("fused add+norm over an add, then the norm (RMSNorm)", 2, 3),
          cmp("RMSNorm over LayerNorm (fused)", 2, 0)};
}


// The Python that draws the charts: $NORMKIT_PYTHON if set, else the
// project's virtual environment's (scripts/setup.sh installs matplotlib
// there), else none.
std::string venv_python() {
  if (const char* env = std::getenv("NORMKIT_PYTHON"); env && *env) return env;
  const std::filesystem::path p = std::filesystem::path(NORMKIT_SOURCE_DIR) / ".venv" / "bin" / "python";
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace

int profile_main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (!o.report.empty()) {
    const std::filesystem::path dir = std::filesystem::path(o.report).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw std::invalid_argument("--report: no directory '" + dir.string() + "' for '" + o.report + "'");
  }
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto say = [&](const char* what) {
    if (tty) std::fprintf(stderr, "\r\033[Kprofile: %s", what);
  };
  normkit::set_num_threads(o.norm_threads);
  nm::set_blas_threads(o.threads);

  np::Result r;
  r.config = o.step;
  r.threads = o.threads;
  r.norm_threads = o.norm_threads;
  r.warmup = o.warmup;
  r.cpu = bench::cpu_model();
  r.blas_core = nm::blas_core();
  r.blas_fallback = nm::blas_core_is_fallback();
  r.load_before = bench::load_average();
  say("profiling the step");
  np::Step step(o.step);
  r.step = np::profile_step(step, o.warmup, o.repeats);
  say("measuring the ceilings");
  r.ceilings = measure_gemm(o.step, r.ceilings);
  r.ceilings = measure_bandwidth(r.step, o.norm_threads, r.ceilings);
  if (o.compare) {
    say("timing whole steps against each other");
    r.comparisons = compare_steps(o);
    r.compare_repeats = o.compare_repeats;
  }
  r.load_after = bench::load_average();
  if (tty) std::fputs("\r\033[K", stderr);

  if (o.json) np::write_json(stdout, r);
  else np::print_text(stdout, r, o.verbose);
  if (!o.report.empty()) {
    std::string command = "normkit profile";
    for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
    const std::filesystem::path json_path = std::filesystem::path(o.report).replace_extension(".json");
    std::FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write '" + json_path.string() + "'");
    np::write_json(f, r);
    std::fclose(f);
    for (const std::string& line : np::write_report(o.report, json_path.string(), r, venv_python(), command))
      std::fprintf(o.json ? stderr : stdout, "%s\n", line.c_str());
  }
  return 0;
}

}  // namespace normkit::cli
