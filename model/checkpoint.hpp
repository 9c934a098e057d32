// normkit model — checkpoints: a trained f32 model and its vocabulary in
// one file.
//
// Format (version 1), every number little-endian:
//   offset  size  field
//   0       8     magic "NKMODEL1"
//   8       8·6   int64: vocab, context, width, heads, ffn, depth
//   56      4     uint8: placement (0 pre, 1 post, 2 sandwich, 3 output,
//                 4 none, 5 deepnorm), norm (0 layernorm, 1 rmsnorm),
//                 final_norm (0/1), tie_embeddings (0/1)
//   60      1     uint8: the MLP (0 GELU, 1 SwiGLU)
//   61      3     uint8: qk_norm (0/1), weight_offset (0/1), positions
//                 (0 learned, 1 sinusoidal); files written before these
//                 options hold 0 there, which reads as the default
//   64      8     f64: eps
//   72      8     int64: P, the number of parameters
//   80      V     the vocabulary: byte of token id 0, 1, …, V−1
//   80+V    4·P   f32 parameters in the order of Model::tensors()
// and nothing after. The layout of the parameters follows from the config,
// so a file is read back only into the model it describes.
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"

namespace normkit::model {

struct Checkpoint {
  Config config;
  std::vector<unsigned char> vocabulary;  // token id → byte
  std::vector<float> params;
};

// Writes m's config and parameters with the vocabulary (vocab bytes).
// std::runtime_error naming the path when the file cannot be written;
// std::invalid_argument when the vocabulary's size is not the model's vocab.
void save_checkpoint(const std::string& path, const Model<float>& m, const std::vector<unsigned char>& vocabulary);

// Reads a checkpoint; std::runtime_error naming the path and the first
// problem (not a checkpoint, truncated, trailing bytes, a bad config, a
// parameter count that does not match the config).
Checkpoint load_checkpoint(const std::string& path);

// A model with the checkpoint's config and parameters.
Model<float> model_from(const Checkpoint& c);

}  // namespace normkit::model
