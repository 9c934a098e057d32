// normkit model — byte-level text data with a fixed train/validation split.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/rng.hpp"

namespace normkit::model {

class TextData {
 public:
  // The vocabulary is the distinct bytes of the whole text in byte order, so
  // every validation byte has an id. The first (1 − val_fraction) of the text
  // is the training split, the rest the validation split: a fixed split, the
  // same for every seed. Throws std::invalid_argument when val_fraction is not
  // in (0, 1) or a split would hold fewer than 2 bytes.
  TextData(std::string_view text, double val_fraction);
  // The file's bytes; std::runtime_error naming the path when it cannot be read.
  static TextData load(const std::string& path, double val_fraction);

  std::int64_t vocab() const noexcept { return static_cast<std::int64_t>(bytes_.size()); }
  unsigned char byte_of(std::int32_t id) const { return bytes_.at(static_cast<std::size_t>(id)); }
  const std::vector<unsigned char>& vocabulary() const noexcept { return bytes_; }  // id → byte
  std::span<const std::int32_t> train() const noexcept { return std::span(ids_).first(split_); }
  std::span<const std::int32_t> val() const noexcept { return std::span(ids_).subspan(split_); }

 private:
  std::vector<unsigned char> bytes_;  // id → byte
  std::vector<std::int32_t> ids_;
  std::size_t split_ = 0;
};

// Fills inputs and targets, both (batch, seq), with `batch` windows drawn
// uniformly from `tokens`: targets are the inputs shifted by one. Throws
// std::invalid_argument when tokens is shorter than seq + 1.
void sample_windows(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq, Rng& rng,
                    std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets);

}  // namespace normkit::model
