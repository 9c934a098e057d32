// normkit — library version.
#pragma once

namespace normkit {

// The version of the linked library, "MAJOR.MINOR.PATCH".
const char* version() noexcept;

}  // namespace normkit
