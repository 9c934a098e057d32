// normkit model — text from a trained model.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.hpp"
#include "model/rng.hpp"

namespace normkit::model {

// Extends prompt (token ids, at least one) by n tokens, each drawn from the
// softmax of the last position's logits at the given temperature (> 0),
// over at most the last `context` tokens. Returns the n new ids.
std::vector<std::int32_t> sample(Model<float>& m, std::vector<std::int32_t> prompt, std::int64_t n,
                                 double temperature, Rng& rng);

}  // namespace normkit::model
