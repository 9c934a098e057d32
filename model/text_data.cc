#include "model/text_data.hpp"

#include <array>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace normkit::model {

TextData::TextData(std::string_view text, double val_fraction) {
  if (!(val_fraction > 0 && val_fraction < 1))
    throw std::invalid_argument("text data: val_fraction = " + std::to_string(val_fraction) +
                                ", expected in (0, 1)");
  std::array<std::int32_t, 256> id_of{};
  std::array<bool, 256> seen{};
  for (char ch : text) seen[static_cast<unsigned char>(ch)] = true;
  for (std::size_t b = 0; b < seen.size(); ++b) {
    if (!seen[b]) continue;
    id_of[b] = static_cast<std::int32_t>(bytes_.size());
    bytes_.push_back(static_cast<unsigned char>(b));
  }
  ids_.reserve(text.size());
  for (char ch : text) ids_.push_back(id_of[static_cast<unsigned char>(ch)]);
  split_ = static_cast<std::size_t>(static_cast<double>(text.size()) * (1 - val_fraction));
  if (split_ < 2 || ids_.size() - split_ < 2)
    throw std::invalid_argument("text data: " + std::to_string(text.size()) +
                                " bytes leave a split under 2 bytes at val_fraction = " +
                                std::to_string(val_fraction));
}

TextData TextData::load(const std::string& path, double val_fraction) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the text file " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return TextData(text, val_fraction);
}

void sample_windows(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq, Rng& rng,
                    std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) {
  const std::size_t T = static_cast<std::size_t>(seq);
  if (tokens.size() < T + 1)
    throw std::invalid_argument("sample_windows: " + std::to_string(tokens.size()) +
                                " tokens cannot hold a window of seq + 1 = " + std::to_string(seq + 1));
  inputs.resize(static_cast<std::size_t>(batch) * T);
  targets.resize(inputs.size());
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    const std::size_t start = static_cast<std::size_t>(rng.below(tokens.size() - T));
    for (std::size_t t = 0; t < T; ++t) {
      inputs[b * T + t] = tokens[start + t];
      targets[b * T + t] = tokens[start + t + 1];
    }
  }
}

}  // namespace normkit::model
