// normkit model — a decoder-only language model whose every norm is a normkit
// call, with its forward and backward written out.
//
//   tokens, targets : (B, T) token ids, T <= context
//   x (stream)      : (rows, D), rows = B·T
//   logits          : (rows, V)
//
// Embedding: x0 = wte[token] + wpe[position] (learned positions, or fixed
// sinusoids in place of wpe: config.hpp). Then depth blocks of causal
// multi-head self-attention and a GELU (tanh) MLP, each placed with its norms
// as config.hpp describes (or a SwiGLU MLP); an optional final norm; logits = z·W_head, or
// z·wteᵀ with tied embeddings. The loss is the mean cross-entropy over rows.
//
// The pre-norm residual add and the next norm run as one fused
// add_layer_norm / add_rms_norm call (h = x + S, y = N(h)), and post-norm's
// N(x + S) likewise; the other placements call the plain norms. Matrix
// products are CBLAS calls.
//
// T is float or double: normkit's ops take f64 activations with f64 weights,
// so the whole model runs in f64 for the finite-difference check, and in f32
// for training.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/norm_ops.hpp"

namespace normkit::model {

// One parameter tensor: a slice of the flat parameter array.
struct ParamInfo {
  std::string name;     // "block1.attn.qkv.weight"
  std::int64_t offset;  // into params() and grads()
  std::int64_t size;
  int layer;   // block index; -1 for the embeddings, the final norm and the head
  bool decay;  // weight decay applies: the matrices, not gains, biases or norms
};

// The RMS of one norm's input in the last forward: sqrt(mean(x²)) over its
// (rows, D) input.
struct NormInput {
  std::string name;  // "block0.attn.norm", "final_norm"
  double rms;
};

template <class T>
class Model {
 public:
  // Validates the config (std::invalid_argument naming the bad field) and
  // lays out the parameters, all zero until init(). Every norm runs through
  // `norms` (normkit's own by default).
  explicit Model(const Config& config, NormOps norms = library_norm_ops());

  const Config& config() const noexcept { return config_; }
  const std::vector<ParamInfo>& tensors() const noexcept { return tensors_; }
  std::span<T> params() noexcept { return params_; }
  std::span<const T> params() const noexcept { return params_; }
  std::span<T> grads() noexcept { return grads_; }
  std::span<const T> grads() const noexcept { return grads_; }

  // InitScheme::gpt2: matrices and embeddings ~ N(0, 0.02²), the
  // residual-writing projections (attention output, MLP output) scaled by
  // 1/sqrt(2·depth) as in GPT-2. InitScheme::xavier: every matrix
  // Xavier-normal (std √(2/(fan_in + fan_out)); q, k and v each D × D), token
  // and position embeddings ~ N(0, ½) so that their sum has unit RMS.
  // deepnorm, under either scheme's embeddings, uses Xavier-normal with gain
  // β for the value, output and MLP projections and 1 for query and key.
  // Gains 1 (weights 1 − weight_offset), biases 0.
  void init(std::uint64_t seed);

  // tokens: (batch, seq) row-major, ids in [0, V), 1 <= seq <= context.
  // Throws std::invalid_argument for a bad shape or id. Keeps what backward
  // needs.
  void forward(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq);
  // (batch·seq, V) of the last forward.
  std::span<const T> logits() const noexcept { return {logits_.data(), static_cast<std::size_t>(rows_ * config_.vocab)}; }
  // Mean cross-entropy of the last forward's logits against targets (batch,
  // seq); keeps the softmax for backward.
  double loss(std::span<const std::int32_t> targets);
  // Gradient of the last loss() with respect to every parameter, written
  // (not accumulated) into grads().
  void backward();

  // The LM head's input in the last forward, (rows, D): the final norm's
  // output, or the last residual stream when there is no final norm.
  std::span<const T> head_input() const noexcept {
    return {config_.final_norm ? z_.data() : stream_.back().data(), static_cast<std::size_t>(rows_ * config_.width)};
  }
  // RMS of every norm's input in the last forward, in the parameters' layout order.
  std::vector<NormInput> norm_inputs() const;
  // RMS of the residual stream after the embedding (0) and after each
  // sublayer (1 … 2·depth) in the last forward: for post and deepnorm the
  // normed stream, for the others the raw sum.
  std::vector<double> stream_rms() const;

  // One sublayer at a time, for the lab's block Jacobians. Sublayer j is
  // block j/2's attention (j even) or MLP (j odd); u, x, y: (batch·seq, D).
  // Both overwrite the last forward's state (call forward() again before
  // loss() and backward()).
  std::size_t sublayer_count() const noexcept { return sublayers_.size(); }
  // s = S_j(u), the sublayer alone, without its norms or the residual.
  void sublayer(std::size_t j, std::span<const T> u, std::int64_t batch, std::int64_t seq, std::span<T> s);
  // y = the placement's block map of sublayer j applied to x (pre: x + S(N(x)),
  // post: N(x + S(x)), …), through the calls forward() makes, except that
  // pre-norm's residual add is not fused with the next block's norm here.
  void block(std::size_t j, std::span<const T> x, std::int64_t batch, std::int64_t seq, std::span<T> y);

 private:
  // A norm of width w runs over a (rows, D) buffer viewed as
  // (rows·D/w, w): the residual stream's norms have w = D, QK-norm's
  // w = D/heads, one row per token and head.
  struct NormRef {
    std::int64_t weight = -1;  // offsets into params_; -1: no such norm
    std::int64_t bias = -1;    // -1 for RMSNorm
    std::int64_t width = 0;
    std::string name;
  };
  struct Sublayer {  // one attention or MLP sublayer of a block
    bool attention;
    int block;
    NormRef norm_a, norm_b;
    NormRef q_norm, k_norm;       // attention with QK-norm
    std::int64_t w1, b1, w2, b2;  // attn: qkv (D, 3D), proj (D, D); mlp: fc (D, F), fc2 (F, D)
  };
  struct Cache {  // activations of one sublayer, (rows, ·)
    // u: S's input when it is normed (pre, sandwich); s: S's output;
    // h: post's and deepnorm's norm input (the sum), or sandwich's and
    // output's normed S(·), the term added to the stream.
    std::vector<T> u, s, h;
    std::vector<T> mean_a, rstd_a, mean_b, rstd_b;
    // attention: hidden = qkv (rows, 3D), probs = softmax (B, H, T, T),
    // attn = the heads' output (rows, D); MLP: hidden = fc (rows, F; 2F
    // for SwiGLU: gate, then up), act = its GELU or SwiGLU (rows, F).
    std::vector<T> hidden, act, probs, attn;
    // QK-norm: q and k copied out of hidden (rows, D), their normed values
    // (rows, D) and statistics (rows·H).
    std::vector<T> q, k, qn, kn, mean_q, rstd_q, mean_k, rstd_k;
  };

  // Width of the MLP's first projection: F, or 2F for SwiGLU's gate and up.
  std::int64_t fc_width() const noexcept {
    return config_.ffn_kind == FfnKind::swiglu ? 2 * config_.ffn : config_.ffn;
  }
  std::int64_t add_tensor(const std::string& name, std::int64_t size, int layer, bool decay);
  NormRef add_norm(const std::string& name, int layer, std::int64_t width);
  void resize(std::int64_t batch, std::int64_t seq);
  void block_step(std::size_t j, const T* x, T* xn);
  void check_block_args(const char* what, std::size_t j, std::size_t in, std::size_t out, std::int64_t batch,
                        std::int64_t seq) const;

  void sublayer_forward(std::size_t j, const T* u, T* s);
  void sublayer_backward(std::size_t j, const T* u, const T* ds, T* du);
  void attention_forward(const Sublayer& sl, Cache& c, const T* u, T* s);
  void attention_backward(const Sublayer& sl, Cache& c, const T* u, const T* ds, T* du);
  void mlp_forward(const Sublayer& sl, Cache& c, const T* u, T* s);
  void mlp_backward(const Sublayer& sl, Cache& c, const T* u, const T* ds, T* du);

  // The norm calls, on (rows_, D) buffers (see NormRef).
  void norm(const NormRef& n, const T* x, T* y, T* mean, T* rstd);
  void add_norm(const NormRef& n, const T* x, const T* residual, T* h, T* y, T* mean, T* rstd);
  void norm_backward(const NormRef& n, const T* dy, const T* x, const T* mean, const T* rstd, T* dx);
  void add_norm_backward(const NormRef& n, const T* dy, const T* dh_out, const T* h, const T* mean,
                         const T* rstd, T* dh);

  Config config_;
  NormOps ops_;
  std::vector<ParamInfo> tensors_;
  std::vector<T> params_, grads_;
  std::int64_t wte_ = 0, wpe_ = -1, head_ = -1;  // wpe_ -1: sinusoidal positions
  std::vector<T> sinusoids_;                      // (context, D) when positions are sinusoidal
  NormRef final_norm_;
  std::vector<Sublayer> sublayers_;

  // The last forward.
  std::int64_t batch_ = 0, seq_ = 0, rows_ = 0;
  std::vector<std::int32_t> tokens_, targets_;
  std::vector<std::vector<T>> stream_;  // 2·depth + 1 residual streams, (rows, D)
  std::vector<Cache> caches_;
  std::vector<T> z_, mean_f_, rstd_f_, logits_;
  // Backward scratch.
  std::vector<T> dlogits_, dz_, dx_, dtmp_, du_, dhidden_, dattn_, dprobs_, dact_, dqn_, dkn_;
};

extern template class Model<float>;
extern template class Model<double>;

}  // namespace normkit::model
