#include "profile_report.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "model/config.hpp"

namespace normkit::profile {

namespace {

// Ivanov et al. 2021 ("Data Movement Is All You Need", BERT encoder layer
// on a V100): statistical normalizations, which are layer norm and softmax,
// are 0.17% of the layer's FLOPs and 25.5% of its runtime. Their other
// classes (tensor contractions, element-wise) are compared here without
// their published figures, which the source texts do not give.
struct IvanovRow {
  const char* name;
  double their_flop_pct, their_time_pct;  // < 0: not given
  double flops = 0, seconds = 0;          // this step's, blocks only
};

// This step's blocks in Ivanov's three classes: the embedding, LM head and
// loss left out (their profile is of one encoder layer); attention's
// products are tensor contractions and its softmax a statistical
// normalization, as in their grouping.
std::vector<IvanovRow> ivanov_rows(const StepProfile& p) {
  std::vector<IvanovRow> rows = {{"tensor contractions", -1, -1},
                                 {"statistical normalizations", 0.17, 25.5},
                                 {"element-wise", -1, -1}};
  for (const Row& r : p.ops) {
    if (r.cls == OpClass::ends) continue;
    const bool softmax = r.name.find("softmax") != std::string::npos;
    std::size_t k = 2;
    if (r.cls == OpClass::matmul || (r.cls == OpClass::attention && !softmax)) k = 0;
    else if (r.cls == OpClass::normalization || softmax) k = 1;
    rows[k].flops += r.flops;
    rows[k].seconds += r.seconds;
  }
  return rows;
}

double total_flops(const std::vector<IvanovRow>& v) {
  double s = 0;
  for (const auto& r : v) s += r.flops;
  return s;
}

double total_seconds(const std::vector<IvanovRow>& v) {
  double s = 0;
  for (const auto& r : v) s += r.seconds;
  return s;
}

const Row& class_row(const Result& r, OpClass c) { return r.step.classes[static_cast<std::size_t>(c)]; }

std::string config_line(const Result& r) {
  const model::Config& m = r.config.model;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s-norm %s, %s add+norm%s: depth %lld, D %lld, %lld heads, FFN %lld (%s), vocab %lld, "
                "batch %lld × seq %lld = %lld rows, f32, %d BLAS threads, %d normkit",
                std::string(model::placement_name(m.placement)).c_str(),
                std::string(model::norm_kind_name(m.norm)).c_str(), r.config.fused ? "fused" : "unfused",
                m.qk_norm ? ", QK-norm" : "", static_cast<long long>(m.depth), static_cast<long long>(m.width),
                static_cast<long long>(m.heads), static_cast<long long>(m.ffn),
                std::string(model::ffn_kind_name(m.ffn_kind)).c_str(), static_cast<long long>(m.vocab),
                static_cast<long long>(r.config.batch), static_cast<long long>(r.config.seq),
                static_cast<long long>(r.config.batch * r.config.seq), r.threads, r.norm_threads);
  return buf;
}

// The roofline's attainable rate at an arithmetic intensity.
double attainable_gflops(const Ceilings& c, double intensity) {
  return std::min(c.gemm_gflops, intensity * c.copy_gbps);
}

bool within_10pct(const StepProfile& s) {
  return std::abs(s.recorded_s / s.wall_unprofiled_s - 1.0) <= 0.10;
}

std::vector<const Row*> ops_by_time(const StepProfile& s) {
  std::vector<const Row*> v;
  for (const Row& r : s.ops) v.push_back(&r);
  std::stable_sort(v.begin(), v.end(), [](const Row* a, const Row* b) { return a->seconds > b->seconds; });
  return v;
}

void print_rows(std::FILE* out, const std::vector<const Row*>& rows, bool with_class) {
  const int w = with_class ? 30 : 22;
  std::fprintf(out, "  %-*s %-*s%6s %7s %7s %9s %9s %7s %9s %8s %6s\n", w, "", with_class ? 20 : 0, "", "calls",
               "FLOP%", "time%", "GFLOP", "MB", "FLOP/B", "ms", "GFLOP/s", "GB/s");
  for (const Row* r : rows) {
    std::fprintf(out, "  %-*s %-*s%6lld %6.2f%% %6.2f%% %9.3f %9.2f %7.2f %9.3f %8.1f %6.1f\n", w, r->name.c_str(),
                 with_class ? 20 : 0, with_class ? class_name(r->cls) : "",
                 static_cast<long long>(r->calls), 100 * r->flop_share, 100 * r->time_share, r->flops / 1e9,
                 r->bytes / 1e6, r->intensity(), r->seconds * 1e3, r->seconds > 0 ? r->flops / r->seconds / 1e9 : 0,
                 r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0);
  }
}

}  // namespace

double amdahl_if_free(const Result& r) { return 1.0 / (1.0 - class_row(r, OpClass::normalization).time_share); }

void print_text(std::FILE* out, const Result& r, bool verbose) {
  const StepProfile& s = r.step;
  const Row& norm = class_row(r, OpClass::normalization);
  std::fprintf(out, "normkit profile: one training step (forward, loss, backward) of a %s\n",
               config_line(r).c_str());
  std::fprintf(out,
               "\nnormalization: %.2f%% of the FLOPs, %.1f%% of the time (%.0f× its FLOP share); "
               "if it were free the step would be at most %.3f× faster (Amdahl)\n",
               100 * norm.flop_share, 100 * norm.time_share, norm.flop_share > 0 ? norm.time_share / norm.flop_share : 0,
               amdahl_if_free(r));
  std::fprintf(out,
               "step: %.1f ms without the observer, %.1f ms with it; its %lld ops' medians sum to %.1f ms, "
               "%.1f%% of the unobserved step (%s 10%%); medians of %d steps after %d warm-up\n",
               s.wall_unprofiled_s * 1e3, s.wall_profiled_s * 1e3, static_cast<long long>(s.records_per_step),
               s.recorded_s * 1e3, 100 * s.recorded_s / s.wall_unprofiled_s, within_10pct(s) ? "within" : "NOT within",
               s.repeats, r.warmup);

  std::fprintf(out, "\nby class:\n");
  std::vector<const Row*> classes;
  for (const Row& c : s.classes) classes.push_back(&c);
  print_rows(out, classes, false);

  const Ceilings& c = r.ceilings;
  std::fprintf(out,
               "\nceilings, measured in this run: sgemm %s %.1f GFLOP/s; copy %.1f GB/s (%s), read %.1f GB/s, "
               "at %.1f MiB rotated over %lld sets\n",
               c.gemm_shape.c_str(), c.gemm_gflops, c.copy_gbps, c.copy_method.c_str(), c.read_gbps,
               static_cast<double>(c.working_set) / 1048576.0, static_cast<long long>(c.sets));
  std::fprintf(out, "roofline (attainable = min(sgemm, FLOP/B × copy)):\n");
  std::fprintf(out, "  %-22s %8s %12s %10s %8s %9s %8s\n", "", "FLOP/B", "attainable", "achieved", "% of it",
               "% sgemm", "% copy");
  for (const Row& row : s.classes) {
    if (row.seconds <= 0) continue;
    const double att = attainable_gflops(c, row.intensity());
    const double g = row.flops / row.seconds / 1e9, bw = row.bytes / row.seconds / 1e9;
    std::fprintf(out, "  %-22s %8.2f %12.1f %10.1f %7.1f%% %8.1f%% %7.1f%%\n", row.name.c_str(), row.intensity(),
                 att, g, 100 * g / att, 100 * g / c.gemm_gflops, 100 * bw / c.copy_gbps);
  }

  std::vector<const Row*> ops = ops_by_time(s);
  const std::size_t shown = verbose ? ops.size() : std::min<std::size_t>(ops.size(), 14);
  std::fprintf(out, "\noperators by time (%zu of %zu%s):\n", shown, ops.size(), verbose ? "" : "; --verbose for all");
  ops.resize(shown);
  print_rows(out, ops, true);

  if (!r.comparisons.empty()) {
    std::fprintf(out, "\nwhole steps, median of %d each, the configurations interleaved:\n", r.compare_repeats);
    for (const Comparison& k : r.comparisons)
      std::fprintf(out, "  %-55s %.3f×  (%s %.1f ms, %s %.1f ms)\n", k.what.c_str(), k.speedup(), k.a.c_str(),
                   k.a_s * 1e3, k.b.c_str(), k.b_s * 1e3);
  }

  const std::vector<IvanovRow> iv = ivanov_rows(s);
  const double F = total_flops(iv), T = total_seconds(iv);
  std::fprintf(out, "\nagainst Ivanov et al. 2021 (a BERT encoder layer on a V100); here the blocks only:\n");
  std::fprintf(out, "  %-28s %12s %12s %10s %10s\n", "", "their FLOP%", "their time%", "FLOP%", "time%");
  for (const IvanovRow& k : iv) {
    char a[16] = "-", b[16] = "-";
    if (k.their_flop_pct >= 0) std::snprintf(a, sizeof a, "%.2f%%", k.their_flop_pct);
    if (k.their_time_pct >= 0) std::snprintf(b, sizeof b, "%.1f%%", k.their_time_pct);
    std::fprintf(out, "  %-28s %12s %12s %9.2f%% %9.1f%%\n", k.name, a, b, 100 * k.flops / F, 100 * k.seconds / T);
  }
  std::fprintf(out, "  (statistical normalizations: the norms and attention's softmax; -: not in the source texts)\n");
  if (!s.unknown_ops.empty()) {
    std::fprintf(out, "\nops not counted (0 FLOPs, 0 bytes):");
    for (const std::string& n : s.unknown_ops) std::fprintf(out, " %s", n.c_str());
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "\nmachine: %s; load %s before, %s after; matrix products: OpenBLAS, %s kernels\n",
               r.cpu.c_str(), r.load_before.c_str(), r.load_after.c_str(), r.blas_core.c_str());
  if (r.blas_fallback)
    std::fprintf(out, "  OpenBLAS does not know this CPU and runs its generic kernels: the matrix products are\n"
                      "  several times slower than this CPU allows, and every share above moves toward the\n"
                      "  norms. Set OPENBLAS_CORETYPE (scripts/openblas-core.sh does; docs/lab.md).\n");
}

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

void json_row(std::FILE* out, const Row& r, const Ceilings& c) {
  const double g = r.seconds > 0 ? r.flops / r.seconds / 1e9 : 0;
  std::fprintf(out,
               "{\"name\": %s, \"class\": %s, \"calls\": %lld, \"flops\": %.6g, \"bytes\": %.6g, "
               "\"flops_per_byte\": %.6g, \"seconds\": %.6g, \"flop_share\": %.6g, \"time_share\": %.6g, "
               "\"gflops\": %.6g, \"gbps\": %.6g, \"attainable_gflops\": %.6g}",
               json_string(r.name).c_str(), json_string(class_name(r.cls)).c_str(), static_cast<long long>(r.calls),
               r.flops, r.bytes, r.intensity(), r.seconds, r.flop_share, r.time_share, g,
               r.seconds > 0 ? r.bytes / r.seconds / 1e9 : 0, attainable_gflops(c, r.intensity()));
}

}  // namespace

void write_json(std::FILE* out, const Result& r) {
  const model::Config& m = r.config.model;
  const StepProfile& s = r.step;
  const Ceilings& c = r.ceilings;
  std::fprintf(out, "{\n  \"config\": {\"placement\": %s, \"norm\": %s, \"fused\": %s, \"qk_norm\": %s, "
                    "\"depth\": %lld, \"width\": %lld, \"heads\": %lld, \"ffn\": %lld, \"mlp\": %s, \"vocab\": %lld, "
                    "\"batch\": %lld, \"seq\": %lld, \"threads\": %d, \"norm_threads\": %d, \"warmup\": %d, "
                    "\"repeats\": %d},\n",
               json_string(model::placement_name(m.placement)).c_str(), json_string(model::norm_kind_name(m.norm)).c_str(),
               r.config.fused ? "true" : "false", m.qk_norm ? "true" : "false", static_cast<long long>(m.depth),
               static_cast<long long>(m.width), static_cast<long long>(m.heads), static_cast<long long>(m.ffn),
               json_string(model::ffn_kind_name(m.ffn_kind)).c_str(), static_cast<long long>(m.vocab),
               static_cast<long long>(r.config.batch), static_cast<long long>(r.config.seq), r.threads,
               r.norm_threads, r.warmup, s.repeats);
  std::fprintf(out,
               "  \"step\": {\"wall_unprofiled_s\": %.6g, \"wall_profiled_s\": %.6g, \"recorded_s\": %.6g, "
               "\"recorded_over_wall\": %.6g, \"within_10pct\": %s, \"records_per_step\": %lld, \"flops\": %.6g, "
               "\"bytes\": %.6g, \"amdahl_if_normalization_free\": %.6g},\n",
               s.wall_unprofiled_s, s.wall_profiled_s, s.recorded_s, s.recorded_s / s.wall_unprofiled_s,
               within_10pct(s) ? "true" : "false", static_cast<long long>(s.records_per_step), s.flops, s.bytes,
               amdahl_if_free(r));
  std::fprintf(out,
               "  \"ceilings\": {\"gemm_gflops\": %.6g, \"gemm_shape\": %s, \"copy_gbps\": %.6g, \"read_gbps\": %.6g, "
               "\"copy_method\": %s, \"working_set_bytes\": %lld, \"sets\": %lld},\n",
               c.gemm_gflops, json_string(c.gemm_shape).c_str(), c.copy_gbps, c.read_gbps,
               json_string(c.copy_method).c_str(), static_cast<long long>(c.working_set), static_cast<long long>(c.sets));
  std::fprintf(out, "  \"classes\": [\n");
  for (std::size_t i = 0; i < s.classes.size(); ++i) {
    std::fprintf(out, "    ");
    json_row(out, s.classes[i], c);
    std::fprintf(out, "%s\n", i + 1 < s.classes.size() ? "," : "");
  }
  std::fprintf(out, "  ],\n  \"ops\": [\n");
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    std::fprintf(out, "    ");
    json_row(out, s.ops[i], c);
    std::fprintf(out, "%s\n", i + 1 < s.ops.size() ? "," : "");
  }
  std::fprintf(out, "  ],\n  \"comparisons\": [\n");
  for (std::size_t i = 0; i < r.comparisons.size(); ++i) {
    const Comparison& k = r.comparisons[i];
    std::fprintf(out, "    {\"what\": %s, \"a\": %s, \"b\": %s, \"a_s\": %.6g, \"b_s\": %.6g, \"speedup\": %.6g}%s\n",
                 json_string(k.what).c_str(), json_string(k.a).c_str(), json_string(k.b).c_str(), k.a_s, k.b_s,
                 k.speedup(), i + 1 < r.comparisons.size() ? "," : "");
  }
  std::fprintf(out, "  ],\n  \"ivanov\": [\n");
  const std::vector<IvanovRow> iv = ivanov_rows(s);
  const double F = total_flops(iv), T = total_seconds(iv);
  for (std::size_t i = 0; i < iv.size(); ++i) {
    const IvanovRow& k = iv[i];
    std::fprintf(out, "    {\"class\": %s, \"their_flop_pct\": %s, \"their_time_pct\": %s, \"flop_pct\": %.6g, "
                      "\"time_pct\": %.6g}%s\n",
                 json_string(k.name).c_str(), k.their_flop_pct >= 0 ? std::to_string(k.their_flop_pct).c_str() : "null",
                 k.their_time_pct >= 0 ? std::to_string(k.their_time_pct).c_str() : "null", 100 * k.flops / F,
                 100 * k.seconds / T, i + 1 < iv.size() ? "," : "");
  }
  std::fprintf(out,
               "  ],\n  \"machine\": {\"cpu\": %s, \"load_before\": %s, \"load_after\": %s, \"blas_core\": %s, "
               "\"blas_fallback\": %s}\n}\n",
               json_string(r.cpu).c_str(), json_string(r.load_before).c_str(), json_string(r.load_after).c_str(),
               json_string(r.blas_core).c_str(), r.blas_fallback ? "true" : "false");
}

std::vector<std::string> write_report(const std::string& path, const std::string& json_path, const Result& r,
                                      const std::string& python, const std::string& command_line) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("--report: cannot write '" + path + "'");
  const std::filesystem::path p(path);
  const std::string stem = p.stem().string();
  const std::string shares_png = stem + "-shares.png", roofline_png = stem + "-roofline.png";
  const StepProfile& s = r.step;
  const Row& norm = class_row(r, OpClass::normalization);
  std::fprintf(f, "# normkit profile\n\n`%s`\n\nOne training step (forward, loss, backward) of a %s.\n\n",
               command_line.c_str(), config_line(r).c_str());
  std::fprintf(f,
               "Normalization is **%.2f %% of the FLOPs and %.1f %% of the time**; if it were free the step would be "
               "at most %.3f× faster (Amdahl).\n\n",
               100 * norm.flop_share, 100 * norm.time_share, amdahl_if_free(r));
  std::fprintf(f,
               "The step took %.1f ms without the observer and %.1f ms with it; the medians of its %lld ops sum to "
               "%.1f ms, %.1f %% of the unobserved step (%s 10 %%). Medians of %d steps after %d warm-up.\n\n",
               s.wall_unprofiled_s * 1e3, s.wall_profiled_s * 1e3, static_cast<long long>(s.records_per_step),
               s.recorded_s * 1e3, 100 * s.recorded_s / s.wall_unprofiled_s, within_10pct(s) ? "within" : "not within",
               s.repeats, r.warmup);
  std::fprintf(f, "![FLOP share beside time share](%s)\n\n![roofline](%s)\n\n", shares_png.c_str(),
               roofline_png.c_str());
  const auto table = [&](const std::vector<const Row*>& rows) {
    std::fprintf(f, "| | calls | FLOP share | time share | GFLOP | MB | FLOP/B | ms | GFLOP/s | GB/s |\n");
    std::fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row* row : rows)
      std::fprintf(f, "| %s | %lld | %.2f %% | %.2f %% | %.3f | %.2f | %.2f | %.3f | %.1f | %.1f |\n",
                   row->name.c_str(), static_cast<long long>(row->calls), 100 * row->flop_share,
                   100 * row->time_share, row->flops / 1e9, row->bytes / 1e6, row->intensity(), row->seconds * 1e3,
                   row->seconds > 0 ? row->flops / row->seconds / 1e9 : 0,
                   row->seconds > 0 ? row->bytes / row->seconds / 1e9 : 0);
    std::fprintf(f, "\n");
  };
  std::fprintf(f, "## By class\n\n");
  std::vector<const Row*> classes;
  for (const Row& c : s.classes) classes.push_back(&c);
  table(classes);
  const Ceilings& c = r.ceilings;
  std::fprintf(f,
               "## Roofline\n\nCeilings measured in this run: sgemm %s **%.1f GFLOP/s**; copy **%.1f GB/s** (%s), "
               "read %.1f GB/s, at %.1f MiB rotated over %lld sets. Attainable = min(sgemm, FLOP/B × copy).\n\n",
               c.gemm_shape.c_str(), c.gemm_gflops, c.copy_gbps, c.copy_method.c_str(), c.read_gbps,
               static_cast<double>(c.working_set) / 1048576.0, static_cast<long long>(c.sets));
  std::fprintf(f, "| class | FLOP/B | attainable GFLOP/s | achieved | %% of attainable | %% of sgemm | %% of copy |\n");
  std::fprintf(f, "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& row : s.classes) {
    if (row.seconds <= 0) continue;
    const double att = attainable_gflops(c, row.intensity());
    const double g = row.flops / row.seconds / 1e9, bw = row.bytes / row.seconds / 1e9;
    std::fprintf(f, "| %s | %.2f | %.1f | %.1f | %.1f %% | %.1f %% | %.1f %% |\n", row.name.c_str(), row.intensity(),
                 att, g, 100 * g / att, 100 * g / c.gemm_gflops, 100 * bw / c.copy_gbps);
  }
  if (!r.comparisons.empty()) {
    std::fprintf(f, "\n## Whole steps\n\nMedians of %d steps each, the four configurations interleaved.\n\n",
                 r.compare_repeats);
    std::fprintf(f, "| comparison | speed-up | ms | ms |\n|---|---:|---:|---:|\n");
    for (const Comparison& k : r.comparisons)
      std::fprintf(f, "| %s | %.3f× | %s %.1f | %s %.1f |\n", k.what.c_str(), k.speedup(), k.a.c_str(), k.a_s * 1e3,
                   k.b.c_str(), k.b_s * 1e3);
  }
  const std::vector<IvanovRow> iv = ivanov_rows(s);
  const double F = total_flops(iv), T = total_seconds(iv);
  std::fprintf(f,
               "\n## Against Ivanov et al. 2021\n\nTheir profile: a BERT encoder layer on a V100. Here: this step's "
               "blocks (embedding, head and loss left out). Statistical normalizations are the norms and "
               "attention's softmax, as they group them; — : not given in the source texts.\n\n");
  std::fprintf(f, "| class | their FLOP share | their time share | FLOP share here | time share here |\n");
  std::fprintf(f, "|---|---:|---:|---:|---:|\n");
  for (const IvanovRow& k : iv) {
    char a[16] = "—", b[16] = "—";
    if (k.their_flop_pct >= 0) std::snprintf(a, sizeof a, "%.2f %%", k.their_flop_pct);
    if (k.their_time_pct >= 0) std::snprintf(b, sizeof b, "%.1f %%", k.their_time_pct);
    std::fprintf(f, "| %s | %s | %s | %.2f %% | %.1f %% |\n", k.name, a, b, 100 * k.flops / F, 100 * k.seconds / T);
  }
  std::fprintf(f, "\n## Operators\n\n");
  table(ops_by_time(s));
  std::fprintf(f, "Machine: %s; load %s before, %s after; matrix products: OpenBLAS, %s kernels%s.\n",
               r.cpu.c_str(), r.load_before.c_str(), r.load_after.c_str(), r.blas_core.c_str(),
               r.blas_fallback ? " (its generic fallback for a CPU it does not know: set OPENBLAS_CORETYPE)" : "");
  std::fclose(f);

  std::vector<std::string> lines = {"report: " + path, "JSON: " + json_path};
  const std::string script = std::string(NORMKIT_SOURCE_DIR) + "/bench/plot_profile.py";
  const std::string draw = script + " " + json_path + " " + (p.parent_path() / shares_png).string() + " " +
                           (p.parent_path() / roofline_png).string();
  if (!python.empty() && std::system((python + " " + draw).c_str()) == 0) {
    lines.push_back("charts: " + (p.parent_path() / shares_png).string() + ", " +
                    (p.parent_path() / roofline_png).string());
  } else {
    lines.push_back("charts not drawn (" + std::string(python.empty() ? "no .venv Python" : "the script failed") +
                    "); draw them with: python3 " + draw + "  (needs matplotlib)");
  }
  return lines;
}

}  // namespace normkit::profile
