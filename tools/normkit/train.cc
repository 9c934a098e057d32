// `normkit train`: trains one configuration of the model (model/) on a text,
// printing a live progress line on a terminal and writing per-step metrics
// to a CSV file.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_args.hpp"
#include "commands.hpp"
#include "model/blas.hpp"
#include "model/checkpoint.hpp"
#include "model/model.hpp"
#include "model/sample.hpp"
#include "model/train.hpp"
#include "normkit/threading.hpp"

namespace normkit::cli {

namespace {

namespace nm = normkit::model;

constexpr const char* kHelp =
    "usage: normkit train [options]\n"
    "\n"
    "Trains a byte-level decoder-only language model whose norms are normkit's\n"
    "kernels, on a text split 90% / 10% into training and validation, and prints\n"
    "the losses. Stops with exit status 3 when the run diverges.\n"
    "\n"
    "model:\n"
    "  --depth N          blocks                                         [2]\n"
    "  --width D          residual width                                 [64]\n"
    "  --heads H          attention heads, dividing D                    [4]\n"
    "  --ffn F            MLP hidden width                               [4·D]\n"
    "  --mlp KIND         gelu or swiglu                                 [gelu]\n"
    "  --context T        sequence length                                [64]\n"
    "  --placement P      pre, post, sandwich, output, none, deepnorm    [pre]\n"
    "  --norm K           layernorm or rmsnorm                           [layernorm]\n"
    "  --no-final-norm    no norm before the LM head\n"
    "  --tie              the LM head is the token embedding\n"
    "  --qk-norm          norm each head's query and key before the scores\n"
    "  --weight-offset W  RMSNorm gain = W + weight: 0 (Llama) or 1 (Gemma) [0]\n"
    "  --init SCHEME      gpt2 or xavier (model/model.hpp)               [gpt2]\n"
    "  --positions P      learned or sinusoidal                          [learned]\n"
    "\n"
    "training:\n"
    "  --steps N          updates                                        [300]\n"
    "  --batch B          sequences per step                             [16]\n"
    "  --lr X             peak learning rate (AdamW)                     [3e-3]\n"
    "  --warmup N         linear warmup steps, then cosine decay to lr/10 [0]\n"
    "  --clip X           gradient clipping to global norm X; 0: off     [1]\n"
    "  --weight-decay X   decoupled weight decay of the matrices         [0.1]\n"
    "  --eval-every K     validation loss every K steps                  [50]\n"
    "  --max-loss X       divergence bound on the loss                   [3·ln(vocab)]\n"
    "  --seed S           the model's initialization and the batches     [1]\n"
    "  --threads N        threads of normkit and OpenBLAS                [1]\n"
    "  --data FILE        the text                                       [data/genesis-kjv.txt]\n"
    "  --csv FILE         per-step metrics: loss, val_loss, lr, global and per-block\n"
    "                     gradient norms, update/weight ratio, RMS of each norm's input\n"
    "\n"
    "after training:\n"
    "  --save FILE        write a checkpoint (format: model/checkpoint.hpp)\n"
    "  --sample N         print N bytes sampled after the validation text's first line\n"
    "  --temperature X    sampling temperature                           [0.8]\n";

struct Options {
  nm::Config model;
  nm::TrainOptions train;
  std::int64_t ffn = 0;  // 0: 4·width
  std::uint64_t seed = 1;
  int threads = 1;
  std::string data = NORMKIT_DEFAULT_TEXT;
  std::string csv;
  std::string save;
  std::int64_t sample = 0;
  double temperature = 0.8;
};

// Returns false when --help was asked for.
bool parse(int argc, char** argv, Options& o) {
  o.model.context = 64;
  o.train.steps = 300;
  o.train.lr = 3e-3;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return false;
    if (a == "--no-final-norm") {
      o.model.final_norm = false;
      continue;
    }
    if (a == "--tie") {
      o.model.tie_embeddings = true;
      continue;
    }
    if (a == "--qk-norm") {
      o.model.qk_norm = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("unknown option or missing value: '" + a + "'");
    const std::string v = argv[++i];
    if (a == "--depth") o.model.depth = parse_int(a, v, 1);
    else if (a == "--width") o.model.width = parse_int(a, v, 1);
    else if (a == "--heads") o.model.heads = parse_int(a, v, 1);
    else if (a == "--ffn") o.ffn = parse_int(a, v, 1);
    else if (a == "--context") o.model.context = parse_int(a, v, 1);
    else if (a == "--placement") o.model.placement = nm::parse_placement(v);
    else if (a == "--norm") o.model.norm = nm::parse_norm_kind(v);
    else if (a == "--mlp") o.model.ffn_kind = nm::parse_ffn_kind(v);
    else if (a == "--weight-offset") o.model.weight_offset = parse_number(a, v, 0);
    else if (a == "--init") o.model.init = nm::parse_init_scheme(v);
    else if (a == "--positions") o.model.positions = nm::parse_positions(v);
    else if (a == "--steps") o.train.steps = parse_int(a, v, 1);
    else if (a == "--batch") o.train.batch = parse_int(a, v, 1);
    else if (a == "--lr") o.train.lr = parse_number(a, v, 0);
    else if (a == "--warmup") o.train.warmup = parse_int(a, v, 0);
    else if (a == "--clip") o.train.clip = parse_number(a, v, 0);
    else if (a == "--weight-decay") o.train.adamw.weight_decay = parse_number(a, v, 0);
    else if (a == "--eval-every") o.train.eval_every = parse_int(a, v, 1);
    else if (a == "--max-loss") o.train.max_loss = parse_number(a, v, 0);
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(parse_int(a, v, 0));
    else if (a == "--threads") o.threads = static_cast<int>(parse_int(a, v, 1));
    else if (a == "--data") o.data = v;
    else if (a == "--csv") o.csv = v;
    else if (a == "--save") o.save = v;
    else if (a == "--sample") o.sample = parse_int(a, v, 0);
    else if (a == "--temperature") o.temperature = parse_number(a, v, 1e-3);
    else throw std::invalid_argument("unknown option '" + a + "' (see normkit train --help)");
  }
  if (!(o.train.lr > 0)) throw std::invalid_argument("--lr must be > 0");
  o.model.ffn = o.ffn > 0 ? o.ffn : 4 * o.model.width;
  o.train.seq = o.model.context;
  o.train.seed = o.seed;
  return true;
}

std::string duration_text(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

// The CSV: one row per step; val_loss empty between validations.
class CsvWriter {
 public:
  CsvWriter(const std::string& path, const nm::Config& c) : out_(path) {
    if (!out_) throw std::runtime_error("--csv: cannot write '" + path + "'");
    out_ << "step,lr,loss,val_loss,grad_norm";
    for (std::int64_t l = 0; l < c.depth; ++l) out_ << ",grad_norm_block" << l;
    out_ << ",update_ratio";
  }
  void write(const nm::StepReport& r) {
    if (!header_done_) {  // the norms' names come with the first step
      for (const auto& n : r.norm_inputs) out_ << ",rms_in_" << n.name;
      out_ << '\n';
      header_done_ = true;
    }
    char buf[64];
    out_ << r.step;
    for (double v : {r.lr, r.loss}) out_ << ',' << number(buf, v);
    out_ << ',';
    if (r.val_loss) out_ << number(buf, *r.val_loss);
    out_ << ',' << number(buf, r.grad_norm);
    for (double g : r.block_grad_norms) out_ << ',' << number(buf, g);
    out_ << ',' << number(buf, r.update_ratio);
    for (const auto& n : r.norm_inputs) out_ << ',' << number(buf, n.rms);
    out_ << '\n';
  }

 private:
  static const char* number(char (&buf)[64], double v) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
  }
  std::ofstream out_;
  bool header_done_ = false;
};

}  // namespace

int train_main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const nm::TextData data = nm::TextData::load(o.data, 0.1);
  o.model.vocab = data.vocab();
  nm::Model<float> model(o.model);
  model.init(o.seed);
  normkit::set_num_threads(o.threads);
  nm::set_blas_threads(o.threads);

  std::optional<CsvWriter> csv;
  if (!o.csv.empty()) csv.emplace(o.csv, o.model);
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  std::string last_val = "-";  // until the first validation
  auto on_step = [&](const nm::StepReport& r) {
    if (csv) csv->write(r);
    if (r.val_loss) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f", *r.val_loss);
      last_val = buf;
    }
    if (!tty) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double done = static_cast<double>(r.step + 1);
    const double tokens_per_s = done * static_cast<double>(o.train.batch * o.train.seq) / elapsed;
    const double eta = elapsed / done * (static_cast<double>(o.train.steps) - done);
    std::fprintf(stderr, "\rstep %lld/%lld  loss %.4f  val %s  %.0f tok/s  ETA %s   ",
                 static_cast<long long>(r.step + 1), static_cast<long long>(o.train.steps), r.loss, last_val.c_str(),
                 tokens_per_s, duration_text(eta).c_str());
  };
  const nm::TrainResult result = nm::train(model, data, o.train, on_step);
  if (tty) std::fputs("\n", stderr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("%s %s%s%s, %s MLP, depth %lld, width %lld, heads %lld, ffn %lld, context %lld; %lld parameters\n",
              std::string(nm::placement_name(o.model.placement)).c_str(),
              std::string(nm::norm_kind_name(o.model.norm)).c_str(), o.model.weight_offset != 0 ? " (gain 1 + w)" : "",
              o.model.qk_norm ? " + QK-norm" : "",
              std::string(nm::ffn_kind_name(o.model.ffn_kind)).c_str(), static_cast<long long>(o.model.depth),
              static_cast<long long>(o.model.width), static_cast<long long>(o.model.heads),
              static_cast<long long>(o.model.ffn), static_cast<long long>(o.model.context),
              static_cast<long long>(model.params().size()));
  std::printf("%lld steps in %s: training loss %.4f -> %.4f", static_cast<long long>(result.steps_done),
              duration_text(seconds).c_str(), result.first_loss, result.last_loss);
  if (result.last_val_loss) std::printf(", validation loss %.4f", *result.last_val_loss);
  std::printf(" (ln vocab = %.4f, vocab %lld)\n", std::log(static_cast<double>(data.vocab())),
              static_cast<long long>(data.vocab()));
  if (!o.csv.empty()) std::printf("metrics: %s\n", o.csv.c_str());
  if (result.diverged) {
    std::fprintf(stderr, "normkit train: %s\n", result.message.c_str());
    return 3;
  }
  if (!o.save.empty()) {
    nm::save_checkpoint(o.save, model, data.vocabulary());
    std::printf("checkpoint: %s\n", o.save.c_str());
  }
  if (o.sample > 0) {
    // The prompt: the validation split up to its first newline (at most a
    // context), so the sample continues text the model did not train on.
    const auto val = data.val();
    std::vector<std::int32_t> prompt;
    for (std::int32_t id : val) {
      prompt.push_back(id);
      if (data.byte_of(id) == '\n' || static_cast<std::int64_t>(prompt.size()) == o.model.context) break;
    }
    nm::Rng rng(o.seed + 1);
    const auto ids = nm::sample(model, prompt, o.sample, o.temperature, rng);
    std::string text;
    for (std::int32_t id : prompt) text += static_cast<char>(data.byte_of(id));
    text += "|";  // where the sample starts
    for (std::int32_t id : ids) text += static_cast<char>(data.byte_of(id));
    std::printf("sample (temperature %g; '|' marks where it starts):\n%s\n", o.temperature, text.c_str());
  }
  return 0;
}

}  // namespace normkit::cli
