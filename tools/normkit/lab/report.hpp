// The renderings of a lab run: a summary and the full text for the
// terminal, JSON for machines, Markdown for a report file.
#pragma once

#include <ostream>
#include <vector>

#include "lab/check.hpp"

namespace normkit::lab {

// One line per check: PASS/FAIL, id, its headline figure and what it
// establishes (or its first failing comparison), then the count passed.
void write_summary(std::ostream& out, const std::vector<Result>& results);
// Every comparison of every check (--verbose).
void write_text(std::ostream& out, const std::vector<Result>& results);
// {"norms": ..., "passed": bool, "checks": [{"id", "establishes", "passed",
// "seconds", "values": {name: number}, "rows": [...]}]}. Non-finite numbers
// are written as null (JSON has no NaN); a check that measured one fails.
void write_json(std::ostream& out, const std::vector<Result>& results, const std::string& norms_name);
void write_markdown(std::ostream& out, const std::vector<Result>& results,
                    const std::string& norms_name);

}  // namespace normkit::lab
