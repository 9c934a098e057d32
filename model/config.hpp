// normkit model — the configuration of the decoder-only language model.
//
// A block has two sublayers S (causal self-attention, then a GELU MLP), each
// acting on the residual stream x with the norms N placed as:
//   pre       x + S(N(x))
//   post      N(x + S(x))
//   sandwich  x + N_b(S(N_a(x)))
//   output    x + N(S(x))
//   none      x + S(x)
//   deepnorm  N(α·x + S(x)), with DeepNet's α and β initialization
// QK-norm (Dehghani et al. 2023; OLMo 2, Qwen3) is independent of the
// placement: each head's query and key are normed over the head's width
// before their dot product, with one gain (and bias) per attention sublayer
// shared by its heads.
// The MLP is GELU(u·W1 + b1)·W2 + b2, or SwiGLU (Shazeer 2020):
// (silu(u·Wg + bg) ⊙ (u·Wu + bu))·W2 + b2, its gate and up projections the
// two column halves of one (D, 2F) matrix.
#pragma once

#include <cstdint>
#include <string_view>

#include "support/norm_kind.hpp"

namespace normkit::model {

enum class Placement : std::uint8_t { pre, post, sandwich, output, none, deepnorm };
enum class FfnKind : std::uint8_t { gelu, swiglu };
// How init() draws the weights (model.hpp): gpt2, small embeddings and
// residual projections scaled by 1/√(2·depth); xavier, the original
// Transformer's Xavier-normal matrices with a unit-RMS embedding (the
// setting of Xiong et al. 2020).
enum class InitScheme : std::uint8_t { gpt2, xavier };
// Position embeddings: learned (a context × D table trained with the rest),
// or the original Transformer's fixed sinusoids, PE[t, 2i] = sin(t/10000^(2i/D)),
// PE[t, 2i+1] = cos(t/10000^(2i/D)), added unscaled.
enum class Positions : std::uint8_t { learned, sinusoidal };

inline constexpr Placement kPlacements[] = {Placement::pre,    Placement::post, Placement::sandwich,
                                            Placement::output, Placement::none, Placement::deepnorm};

std::string_view placement_name(Placement p) noexcept;
std::string_view norm_kind_name(NormKind k) noexcept;
std::string_view ffn_kind_name(FfnKind k) noexcept;  // "gelu", "swiglu"
std::string_view init_scheme_name(InitScheme s) noexcept;  // "gpt2", "xavier"
std::string_view positions_name(Positions p) noexcept;      // "learned", "sinusoidal"
// Parse a name as printed above ("pre", ..., "layernorm" / "rmsnorm"); an
// unknown name throws std::invalid_argument that quotes it and lists the
// accepted ones.
Placement parse_placement(std::string_view name);
NormKind parse_norm_kind(std::string_view name);
FfnKind parse_ffn_kind(std::string_view name);
InitScheme parse_init_scheme(std::string_view name);
Positions parse_positions(std::string_view name);

struct Config {
  std::int64_t vocab = 0;     // V: token ids are in [0, V)
  std::int64_t context = 64;  // longest sequence
  std::int64_t width = 64;    // D, the residual stream's width
  std::int64_t heads = 4;     // must divide D
  std::int64_t ffn = 256;     // F, the MLP's hidden width
  std::int64_t depth = 2;     // blocks
  Placement placement = Placement::pre;
  NormKind norm = NormKind::layer_norm;
  FfnKind ffn_kind = FfnKind::gelu;
  InitScheme init = InitScheme::gpt2;  // not kept in checkpoints: a loaded model is not re-initialized
  Positions positions = Positions::learned;
  bool final_norm = true;       // a norm between the last block and the LM head
  bool tie_embeddings = false;  // the LM head is the token embedding, transposed
  bool qk_norm = false;         // norm q and k per head before attention scores
  // RMSNorm's gain is weight_offset + weight: 0 (Llama) or 1 (Gemma, whose
  // weights start at 0). LayerNorm takes 0 only.
  double weight_offset = 0;
  double eps = 1e-5;
};

// Throws std::invalid_argument naming the first bad field and its value,
// e.g. "model config: heads = 3 does not divide width = 8".
void validate(const Config& c);

// DeepNet's constants for a decoder-only stack of N = depth blocks (Wang et
// al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers", table 1):
// the residual is scaled by α = (2N)^(1/4) and the value, output and MLP
// projections are initialized with gain β = (8N)^(-1/4).
double deepnorm_alpha(const Config& c);
double deepnorm_beta(const Config& c);

}  // namespace normkit::model
