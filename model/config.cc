#include "model/config.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace normkit::model {

std::string_view placement_name(Placement p) noexcept {
  switch (p) {
    case Placement::pre: return "pre";
    case Placement::post: return "post";
    case Placement::sandwich: return "sandwich";
    case Placement::output: return "output";
    case Placement::none: return "none";
    case Placement::deepnorm: return "deepnorm";
  }
  return "?";
}

std::string_view norm_kind_name(NormKind k) noexcept {
  return k == NormKind::layer_norm ? "layernorm" : "rmsnorm";
}

std::string_view ffn_kind_name(FfnKind k) noexcept { return k == FfnKind::gelu ? "gelu" : "swiglu"; }

std::string_view init_scheme_name(InitScheme s) noexcept { return s == InitScheme::gpt2 ? "gpt2" : "xavier"; }

std::string_view positions_name(Positions p) noexcept { return p == Positions::learned ? "learned" : "sinusoidal"; }

Placement parse_placement(std::string_view name) {
  for (Placement p : kPlacements)
    if (placement_name(p) == name) return p;
  throw std::invalid_argument("unknown placement '" + std::string(name) +
                              "' (expected pre, post, sandwich, output, none or deepnorm)");
}

NormKind parse_norm_kind(std::string_view name) {
  for (NormKind k : kNormKinds)
    if (norm_kind_name(k) == name) return k;
  throw std::invalid_argument("unknown norm '" + std::string(name) + "' (expected layernorm or rmsnorm)");
}

FfnKind parse_ffn_kind(std::string_view name) {
  for (FfnKind k : {FfnKind::gelu, FfnKind::swiglu})
    if (ffn_kind_name(k) == name) return k;
  throw std::invalid_argument("unknown ffn kind '" + std::string(name) + "' (expected gelu or swiglu)");
}

InitScheme parse_init_scheme(std::string_view name) {
  for (InitScheme k : {InitScheme::gpt2, InitScheme::xavier})
    if (init_scheme_name(k) == name) return k;
  throw std::invalid_argument("unknown init '" + std::string(name) + "' (expected gpt2 or xavier)");
}

Positions parse_positions(std::string_view name) {
  for (Positions p : {Positions::learned, Positions::sinusoidal})
    if (positions_name(p) == name) return p;
  throw std::invalid_argument("unknown positions '" + std::string(name) + "' (expected learned or sinusoidal)");
}

namespace {

void require_positive(const char* field, std::int64_t v) {
  if (v < 1)
    throw std::invalid_argument(std::string("model config: ") + field + " = " + std::to_string(v) +
                                ", expected at least 1");
}

}  // namespace

void validate(const Config& c) {
  require_positive("vocab", c.vocab);
  require_positive("context", c.context);
  require_positive("width", c.width);
  require_positive("heads", c.heads);
  require_positive("ffn", c.ffn);
  require_positive("depth", c.depth);
  if (c.width % c.heads != 0)
    throw std::invalid_argument("model config: heads = " + std::to_string(c.heads) +
                                " does not divide width = " + std::to_string(c.width));
  bool known = false;
  for (Placement p : kPlacements) known = known || p == c.placement;
  if (!known)
    throw std::invalid_argument("model config: unknown placement (enum value " +
                                std::to_string(static_cast<int>(c.placement)) + ")");
  if (c.norm != NormKind::layer_norm && c.norm != NormKind::rms_norm)
    throw std::invalid_argument("model config: unknown norm (enum value " +
                                std::to_string(static_cast<int>(c.norm)) + ")");
  if (c.ffn_kind != FfnKind::gelu && c.ffn_kind != FfnKind::swiglu)
    throw std::invalid_argument("model config: unknown ffn kind (enum value " +
                                std::to_string(static_cast<int>(c.ffn_kind)) + ")");
  if (c.init != InitScheme::gpt2 && c.init != InitScheme::xavier)
    throw std::invalid_argument("model config: unknown init (enum value " + std::to_string(static_cast<int>(c.init)) +
                                ")");
  if (c.positions != Positions::learned && c.positions != Positions::sinusoidal)
    throw std::invalid_argument("model config: unknown positions (enum value " +
                                std::to_string(static_cast<int>(c.positions)) + ")");
  if (c.weight_offset != 0 && c.weight_offset != 1)
    throw std::invalid_argument("model config: weight_offset = " + std::to_string(c.weight_offset) +
                                ", expected 0 or 1");
  if (c.weight_offset != 0 && c.norm != NormKind::rms_norm)
    throw std::invalid_argument("model config: weight_offset = 1 needs norm = rmsnorm (LayerNorm's gain has no offset)");
  if (!(std::isfinite(c.eps) && c.eps >= 0))
    throw std::invalid_argument("model config: eps = " + std::to_string(c.eps) +
                                ", expected finite and >= 0");
}

double deepnorm_alpha(const Config& c) { return std::pow(2.0 * static_cast<double>(c.depth), 0.25); }
double deepnorm_beta(const Config& c) { return std::pow(8.0 * static_cast<double>(c.depth), -0.25); }

}  // namespace normkit::model
