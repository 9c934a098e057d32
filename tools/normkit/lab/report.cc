#include "lab/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "normkit/version.hpp"

namespace normkit::lab {

namespace {

std::string verdict(const std::optional<bool>& ok) {
  if (!ok.has_value()) return "info";
  return *ok ? "ok" : "FAIL";
}

int count_passed(const std::vector<Result>& results) {
  int n = 0;
  for (const Result& r : results) n += r.passed ? 1 : 0;
  return n;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);  // round-trips every double
  return buf;
}

// A table cell: pipes would end the cell early.
std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

}  // namespace

void write_text(std::ostream& out, const std::vector<Result>& results) {
  for (const Result& r : results) {
    out << (r.passed ? "[PASS] " : "[FAIL] ") << r.id << "  (" << fmt(r.seconds, 3) << " s)\n";
    out << "  " << r.establishes << "\n";
    for (const Row& row : r.rows) {
      const std::string v = verdict(row.ok);
      out << "    " << v << std::string(5 - v.size(), ' ') << row.what << ": " << row.measured
          << "  | expected " << row.expected << "\n";
    }
    out << "\n";
  }
  out << count_passed(results) << " of " << results.size() << " checks passed\n";
}

void write_summary(std::ostream& out, const std::vector<Result>& results) {
  std::size_t width = 0;
  for (const Result& r : results) width = std::max(width, r.id.size());
  for (const Result& r : results) {
    out << (r.passed ? "[PASS] " : "[FAIL] ") << r.id << std::string(width - r.id.size() + 2, ' ');
    const Check* c = find_check(r.id);
    const std::string figure = c ? headline(*c, r) : "";
    if (!r.passed) {
      // The first failing comparison says more than any headline.
      for (const Row& row : r.rows)
        if (row.ok.has_value() && !*row.ok) {
          out << row.what << ": " << row.measured << ", expected " << row.expected << "\n";
          break;
        }
    } else {
      out << (figure.empty() ? "" : figure + ". ") << r.establishes << "\n";
    }
  }
  out << count_passed(results) << " of " << results.size() << " checks passed\n";
}

void write_json(std::ostream& out, const std::vector<Result>& results, const std::string& norms_name) {
  out << "{\n  \"normkit_version\": " << json_string(version()) << ",\n";
  out << "  \"norms\": " << json_string(norms_name) << ",\n";
  out << "  \"passed\": " << (count_passed(results) == static_cast<int>(results.size()) ? "true" : "false")
      << ",\n";
  out << "  \"checks\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    out << (i ? ",\n" : "\n") << "    {\n";
    out << "      \"id\": " << json_string(r.id) << ",\n";
    out << "      \"establishes\": " << json_string(r.establishes) << ",\n";
    out << "      \"passed\": " << (r.passed ? "true" : "false") << ",\n";
    out << "      \"seconds\": " << json_number(r.seconds) << ",\n";
    out << "      \"values\": {";
    for (std::size_t k = 0; k < r.values.size(); ++k)
      out << (k ? ", " : "") << json_string(r.values[k].name) << ": " << json_number(r.values[k].value);
    out << "},\n      \"rows\": [";
    for (std::size_t k = 0; k < r.rows.size(); ++k) {
      const Row& row = r.rows[k];
      out << (k ? ",\n" : "\n") << "        {\"what\": " << json_string(row.what)
          << ", \"measured\": " << json_string(row.measured)
          << ", \"expected\": " << json_string(row.expected) << ", \"ok\": "
          << (row.ok.has_value() ? (*row.ok ? "true" : "false") : "null") << "}";
    }
    out << (r.rows.empty() ? "]\n" : "\n      ]\n") << "    }";
  }
  out << "\n  ]\n}\n";
}

void write_markdown(std::ostream& out, const std::vector<Result>& results,
                    const std::string& norms_name) {
  out << "# normkit lab report\n\n";
  out << "normkit " << version() << ", norms under test: " << norms_name << ". "
      << count_passed(results) << " of " << results.size() << " checks passed.\n\n";
  out << "| check | result | seconds |\n|---|---|---|\n";
  for (const Result& r : results)
    out << "| [" << r.id << "](#" << r.id << ") | " << (r.passed ? "PASS" : "**FAIL**") << " | "
        << fmt(r.seconds, 3) << " |\n";
  for (const Result& r : results) {
    out << "\n## " << r.id << "\n\n" << r.establishes << "\n\n";
    out << "Result: " << (r.passed ? "PASS" : "**FAIL**") << "\n\n";
    out << "| quantity | measured | expected | |\n|---|---|---|---|\n";
    for (const Row& row : r.rows)
      out << "| " << md_cell(row.what) << " | " << md_cell(row.measured) << " | "
          << md_cell(row.expected) << " | " << verdict(row.ok) << " |\n";
  }
}

}  // namespace normkit::lab
