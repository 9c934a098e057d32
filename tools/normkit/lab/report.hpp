// The three renderings of a lab run: plain text for the terminal, JSON for
// machines, Markdown for a report file.
#pragma once

#include <ostream>
#include <vector>

#include "lab/check.hpp"

namespace normkit::lab {

void write_text(std::ostream& out, const std::vector<Result>& results);
// {"norms": ..., "passed": bool, "checks": [{"id", "establishes", "passed",
// "seconds", "values": {name: number}, "rows": [...]}]}. Non-finite numbers
// are written as null (JSON has no NaN); a check that measured one fails.
void write_json(std::ostream& out, const std::vector<Result>& results, const std::string& norms_name);
void write_markdown(std::ostream& out, const std::vector<Result>& results,
                    const std::string& norms_name);

}  // namespace normkit::lab
