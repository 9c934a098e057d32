// Which normalization an op, a kernel, a model block or a benchmark row
// computes: the one enum of the project's own code (kernels, dispatch,
// model, lab, bench, Python binding). Internal: the public API names the
// norm in each function's name instead (normkit/ops.hpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace normkit {

// Model checkpoints store the value: never reorder them.
enum class NormKind : std::uint8_t { layer_norm, rms_norm };

inline constexpr NormKind kNormKinds[] = {NormKind::layer_norm, NormKind::rms_norm};

// "LayerNorm" / "RMSNorm", for text a person reads.
constexpr std::string_view norm_title(NormKind k) noexcept {
  return k == NormKind::layer_norm ? "LayerNorm" : "RMSNorm";
}

}  // namespace normkit
