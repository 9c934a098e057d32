#include "model/checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace normkit::model {

// The file is the host's bytes of each number; the format says little-endian.
static_assert(std::endian::native == std::endian::little, "checkpoints are written little-endian");

namespace {

constexpr char kMagic[8] = {'N', 'K', 'M', 'O', 'D', 'E', 'L', '1'};
constexpr std::size_t kHeader = 80;

void put_bytes(std::vector<char>& out, const void* p, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <class V>
void put(std::vector<char>& out, V v) {
  put_bytes(out, &v, sizeof(V));
}

template <class V>
V get(const std::vector<char>& in, std::size_t offset) {
  V v;
  std::memcpy(&v, in.data() + offset, sizeof(V));
  return v;
}

}  // namespace

void save_checkpoint(const std::string& path, const Model<float>& m, const std::vector<unsigned char>& vocabulary) {
  const Config& c = m.config();
  if (static_cast<std::int64_t>(vocabulary.size()) != c.vocab)
    throw std::invalid_argument("save_checkpoint: the vocabulary has " + std::to_string(vocabulary.size()) +
                                " bytes, the model's vocab is " + std::to_string(c.vocab));
  std::vector<char> out;
  put_bytes(out, kMagic, sizeof kMagic);
  for (std::int64_t v : {c.vocab, c.context, c.width, c.heads, c.ffn, c.depth}) put(out, v);
  for (std::uint8_t v : {static_cast<std::uint8_t>(c.placement), static_cast<std::uint8_t>(c.norm),
                         static_cast<std::uint8_t>(c.final_norm), static_cast<std::uint8_t>(c.tie_embeddings)})
    put(out, v);
  put(out, static_cast<std::uint8_t>(c.ffn_kind));
  put(out, static_cast<std::uint8_t>(c.qk_norm));
  put(out, static_cast<std::uint8_t>(c.weight_offset));  // 0 or 1, as validate() requires
  put(out, static_cast<std::uint8_t>(c.positions));
  put(out, c.eps);
  put(out, static_cast<std::int64_t>(m.params().size()));
  put_bytes(out, vocabulary.data(), vocabulary.size());
  put_bytes(out, m.params().data(), m.params().size() * sizeof(float));
  std::ofstream f(path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f.flush()) throw std::runtime_error("cannot write the checkpoint " + path);
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read the checkpoint " + path);
  const std::vector<char> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& what) { return std::runtime_error("checkpoint " + path + ": " + what); };
  if (in.size() < kHeader || !std::equal(kMagic, kMagic + 8, in.begin()))
    throw fail("not a normkit model checkpoint (no NKMODEL1 header)");
  Checkpoint ck;
  Config& c = ck.config;
  c.vocab = get<std::int64_t>(in, 8);
  c.context = get<std::int64_t>(in, 16);
  c.width = get<std::int64_t>(in, 24);
  c.heads = get<std::int64_t>(in, 32);
  c.ffn = get<std::int64_t>(in, 40);
  c.depth = get<std::int64_t>(in, 48);
  c.placement = static_cast<Placement>(get<std::uint8_t>(in, 56));
  c.norm = static_cast<NormKind>(get<std::uint8_t>(in, 57));
  c.final_norm = get<std::uint8_t>(in, 58) != 0;
  c.tie_embeddings = get<std::uint8_t>(in, 59) != 0;
  c.ffn_kind = static_cast<FfnKind>(get<std::uint8_t>(in, 60));
  c.qk_norm = get<std::uint8_t>(in, 61) != 0;
  c.weight_offset = get<std::uint8_t>(in, 62);
  c.positions = static_cast<Positions>(get<std::uint8_t>(in, 63));
  c.eps = get<double>(in, 64);
  const std::int64_t count = get<std::int64_t>(in, 72);
  try {
    validate(c);
  } catch (const std::invalid_argument& e) {
    throw fail(e.what());
  }
  const std::int64_t expected = static_cast<std::int64_t>(Model<float>(c).params().size());
  if (count != expected)
    throw fail("holds " + std::to_string(count) + " parameters, its config needs " + std::to_string(expected));
  const std::size_t size = kHeader + static_cast<std::size_t>(c.vocab) + static_cast<std::size_t>(count) * sizeof(float);
  if (in.size() != size)
    throw fail("is " + std::to_string(in.size()) + " bytes, its header describes " + std::to_string(size));
  ck.vocabulary.assign(in.begin() + kHeader, in.begin() + static_cast<std::ptrdiff_t>(kHeader + c.vocab));
  ck.params.resize(static_cast<std::size_t>(count));
  std::memcpy(ck.params.data(), in.data() + kHeader + c.vocab, ck.params.size() * sizeof(float));
  return ck;
}

Model<float> model_from(const Checkpoint& c) {
  Model<float> m(c.config);
  std::copy(c.params.begin(), c.params.end(), m.params().begin());
  return m;
}

}  // namespace normkit::model
