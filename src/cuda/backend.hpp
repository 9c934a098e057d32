// The CUDA backend's entry points for the dispatch layer (src/dispatch).
#pragma once

#include <cstdint>
#include <string>

#include "dispatch/backend.hpp"

namespace normkit::detail::cuda {

// CUDA devices the runtime sees; 0 without a driver or GPU.
int device_count() noexcept;

// The backend for device `index`, or null with `why` set.
const Backend* backend(std::int32_t index, std::string& why);

}  // namespace normkit::detail::cuda
