#include "model/sample.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace normkit::model {

std::vector<std::int32_t> sample(Model<float>& m, std::vector<std::int32_t> prompt, std::int64_t n,
                                 double temperature, Rng& rng) {
  if (prompt.empty() || n < 0 || !(temperature > 0))
    throw std::invalid_argument("sample: expected a non-empty prompt, n >= 0 and temperature > 0");
  const std::int64_t V = m.config().vocab, context = m.config().context;
  std::vector<std::int32_t> out;
  std::vector<double> p(static_cast<std::size_t>(V));
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t seq = std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), context);
    const std::span<const std::int32_t> window(prompt.data() + prompt.size() - seq, static_cast<std::size_t>(seq));
    m.forward(window, 1, seq);
    const float* last = m.logits().data() + (seq - 1) * V;
    const double top = *std::max_element(last, last + V);
    double sum = 0;
    for (std::int64_t v = 0; v < V; ++v) sum += p[static_cast<std::size_t>(v)] = std::exp((last[v] - top) / temperature);
    double u = rng.uniform() * sum;
    std::int32_t id = static_cast<std::int32_t>(V - 1);
    for (std::int64_t v = 0; v < V; ++v) {
      u -= p[static_cast<std::size_t>(v)];
      if (u < 0) {
        id = static_cast<std::int32_t>(v);
        break;
      }
    }
    prompt.push_back(id);
    out.push_back(id);
  }
  return out;
}

}  // namespace normkit::model
