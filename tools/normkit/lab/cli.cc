#include "lab/cli.hpp"

#include <fstream>

#include "lab/check.hpp"
#include "lab/report.hpp"

namespace normkit::lab {

namespace {

constexpr const char* kHelp =
    "usage: normkit lab [-v] [--json] [--report FILE.md] [--list] [ID ...]\n"
    "\n"
    "Runs the normalization lab: named checks that reproduce the worked results of\n"
    "the source texts and verify the contracts of LayerNorm and RMSNorm through\n"
    "normkit's public API, in every dtype where a check is meaningful. Prints one\n"
    "line per check: PASS/FAIL, its key figure and what it establishes (or its\n"
    "first failing comparison). The exit status is 1 if any check fails.\n"
    "\n"
    "options:\n"
    "  ID ...            run only these checks (see --list)\n"
    "  --list            print the check ids and what each establishes, then exit\n"
    "  -v, --verbose     print every comparison: what was compared, the measured\n"
    "                    value, the expected value or bound, ok/FAIL/info\n"
    "  --json            print the run as JSON: {\"checks\": [{\"id\", \"passed\",\n"
    "                    \"values\": {name: number}, ...}]}\n"
    "  --report FILE.md  also write the run as a Markdown report to FILE.md\n"
    "  --help            show this help\n";

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const Norms& norms) {
  bool json = false, list = false, verbose = false;
  std::string report_path;
  std::vector<const Check*> selected;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out << kHelp;
      return 0;
    }
    if (a == "--json") {
      json = true;
    } else if (a == "--verbose" || a == "-v") {
      verbose = true;
    } else if (a == "--list") {
      list = true;
    } else if (a == "--report") {
      if (i + 1 >= args.size()) {
        err << "normkit lab: --report needs a file name\n";
        return 2;
      }
      report_path = args[++i];
    } else if (a.rfind("--report=", 0) == 0) {
      report_path = a.substr(9);
    } else if (a.rfind("-", 0) == 0) {
      err << "normkit lab: unknown option '" << a << "' (see normkit lab --help)\n";
      return 2;
    } else if (const Check* c = find_check(a)) {
      selected.push_back(c);
    } else {
      err << "normkit lab: unknown check id '" << a << "'; the ids are:";
      for (const Check& c2 : all_checks()) err << " " << c2.id;
      err << "\n";
      return 2;
    }
  }
  if (list) {
    for (const Check& c : all_checks()) out << c.id << "\t" << c.establishes << "\n";
    return 0;
  }
  if (selected.empty())
    for (const Check& c : all_checks()) selected.push_back(&c);

  std::vector<Result> results;
  bool all_passed = true;
  for (const Check* c : selected) {
    results.push_back(run_check(*c, norms));
    all_passed = all_passed && results.back().passed;
  }
  if (json)
    write_json(out, results, norms.name);
  else if (verbose)
    write_text(out, results);
  else
    write_summary(out, results);
  if (!report_path.empty()) {
    std::ofstream f(report_path);
    if (f) write_markdown(f, results, norms.name);
    if (!f) {
      err << "normkit lab: could not write the report to '" << report_path << "'\n";
      return 1;
    }
    if (!json) out << "every comparison: " << report_path << "\n";
  }
  return all_passed ? 0 : 1;
}

}  // namespace normkit::lab
