#include "model/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/blas.hpp"
#include "model/observe.hpp"
#include "model/rng.hpp"
#include "normkit/tensor.hpp"

namespace normkit::model {

namespace {

// Every op below reports itself to the op observer under its label
// (model/observe.hpp); the norms are reported by the library.

// C = alpha·op(A)·op(B) + beta·C, as gemm (model/blas.hpp).
template <class T>
void matmul(const char* label, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
            const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  const ObservedOp op(op_record<T>("matmul", label, M, N, K, beta != T(0) ? 1 : 0));
  gemm<T>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void add_bias(const char* label, T* y, const T* b, std::int64_t rows, std::int64_t n) {
  const ObservedOp op(op_record<T>("bias_add", label, rows, n));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i) y[r * n + i] += b[i];
}

template <class T>
void add_column_sums(const char* label, T* db, const T* dy, std::int64_t rows, std::int64_t n) {
  const ObservedOp op(op_record<T>("bias_grad", label, rows, n));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i) db[i] += dy[r * n + i];
}

// z = x + y over n elements; z may be x or y.
template <class T>
void add(const char* label, T* z, const T* x, const T* y, std::size_t n) {
  const ObservedOp op(op_record<T>("add", label, static_cast<std::int64_t>(n)));
  for (std::size_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

// z = a·x + y over n elements.
template <class T>
void axpy(const char* label, T* z, T a, const T* x, const T* y, std::size_t n) {
  const ObservedOp op(op_record<T>("axpy", label, static_cast<std::int64_t>(n)));
  for (std::size_t i = 0; i < n; ++i) z[i] = a * x[i] + y[i];
}

// Row i of the (T, T) scores P becomes the softmax of its entries 0..i; the
// entries after i become 0 (the causal mask).
template <class T>
void causal_softmax(T* P, std::int64_t Tn) {
  const ObservedOp op(op_record<T>("softmax", "attn.softmax", Tn, Tn, Tn * (Tn + 1) / 2));
  for (std::int64_t i = 0; i < Tn; ++i) {
    T* row = P + i * Tn;
    T m = row[0];
    for (std::int64_t jj = 1; jj <= i; ++jj) m = std::max(m, row[jj]);
    T sum = 0;
    for (std::int64_t jj = 0; jj <= i; ++jj) {
      row[jj] = std::exp(row[jj] - m);
      sum += row[jj];
    }
    for (std::int64_t jj = 0; jj <= i; ++jj) row[jj] /= sum;
    for (std::int64_t jj = i + 1; jj < Tn; ++jj) row[jj] = T(0);
  }
}

// Softmax backward, row by row, in place on dP: dscore = P ⊙ (dP − Σ_j P·dP).
template <class T>
void causal_softmax_backward(const T* P, T* dP, std::int64_t Tn) {
  const ObservedOp op(op_record<T>("softmax_backward", "attn.softmax", Tn, Tn, Tn * (Tn + 1) / 2));
  for (std::int64_t i = 0; i < Tn; ++i) {
    const T* p = P + i * Tn;
    T* g = dP + i * Tn;
    T dot = 0;
    for (std::int64_t jj = 0; jj <= i; ++jj) dot += p[jj] * g[jj];
    for (std::int64_t jj = 0; jj <= i; ++jj) g[jj] = p[jj] * (g[jj] - dot);
    for (std::int64_t jj = i + 1; jj < Tn; ++jj) g[jj] = T(0);
  }
}

// GELU with the tanh approximation (GPT-2's), written as x·σ(2u): 0.5·(1 +
// tanh u) = σ(2u) exactly, and libm's exp is far cheaper than its tanh, which
// would otherwise make GELU the step's costliest element-wise op. In T: the
// f32 model's activations carry f32 rounding anyway.
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/π)
constexpr double kGeluA = 0.044715;

template <class T>
T gelu_gate(T x) {  // σ(2u), u = sqrt(2/π)·(x + 0.044715·x³)
  return T(1) / (T(1) + std::exp(T(-2 * kGeluC) * (x + T(kGeluA) * x * x * x)));
}

template <class T>
T gelu(T x) {
  return x * gelu_gate(x);
}

// d/dx x·σ(2u) = σ + x·σ·(1 − σ)·2u'.
template <class T>
T gelu_derivative(T x) {
  const T s = gelu_gate(x);
  return s + x * s * (T(1) - s) * T(2 * kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
}

// silu(x) = x·σ(x), SwiGLU's gate; in T, as GELU.
template <class T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}

template <class T>
T silu_derivative(T x) {
  const T sig = T(1) / (T(1) + std::exp(-x));
  return sig * (T(1) + x * (T(1) - sig));
}

template <class T>
double rms(const std::vector<T>& v, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
  return n ? std::sqrt(s / static_cast<double>(n)) : 0.0;
}

}  // namespace

template <class T>
Model<T>::Model(const Config& config, NormOps norms) : config_(config), ops_(std::move(norms)) {
  validate(config_);
  const std::int64_t V = config_.vocab, D = config_.width, F = config_.ffn, dh = D / config_.heads;
  wte_ = add_tensor("wte", V * D, -1, true);
  if (config_.positions == Positions::learned) {
    wpe_ = add_tensor("wpe", config_.context * D, -1, true);
  } else {
    sinusoids_.resize(static_cast<std::size_t>(config_.context * D));
    for (std::int64_t t = 0; t < config_.context; ++t)
      for (std::int64_t d = 0; d < D; ++d) {
        const double angle = static_cast<double>(t) / std::pow(10000.0, static_cast<double>(d - d % 2) / static_cast<double>(D));
        sinusoids_[static_cast<std::size_t>(t * D + d)] = static_cast<T>(d % 2 ? std::cos(angle) : std::sin(angle));
      }
  }
  for (int l = 0; l < static_cast<int>(config_.depth); ++l) {
    for (bool attention : {true, false}) {
      const std::string p = "block" + std::to_string(l) + (attention ? ".attn" : ".mlp");
      Sublayer sl{};
      sl.attention = attention;
      sl.block = l;
      if (config_.placement == Placement::sandwich) {
        sl.norm_a = add_norm(p + ".norm_in", l, D);
        sl.norm_b = add_norm(p + ".norm_out", l, D);
      } else if (config_.placement != Placement::none) {
        sl.norm_a = add_norm(p + ".norm", l, D);
      }
      if (attention && config_.qk_norm) {
        sl.q_norm = add_norm(p + ".q_norm", l, dh);
        sl.k_norm = add_norm(p + ".k_norm", l, dh);
      }
      const std::int64_t hidden = attention ? 3 * D : fc_width();
      sl.w1 = add_tensor(p + (attention ? ".qkv.weight" : ".fc.weight"), D * hidden, l, true);
      sl.b1 = add_tensor(p + (attention ? ".qkv.bias" : ".fc.bias"), hidden, l, false);
      sl.w2 = add_tensor(p + (attention ? ".proj.weight" : ".fc2.weight"), (attention ? D : F) * D, l, true);
      sl.b2 = add_tensor(p + (attention ? ".proj.bias" : ".fc2.bias"), D, l, false);
      sublayers_.push_back(sl);
    }
  }
  if (config_.final_norm) final_norm_ = add_norm("final_norm", -1, D);
  if (!config_.tie_embeddings) head_ = add_tensor("head.weight", D * V, -1, true);
  const std::int64_t total = tensors_.back().offset + tensors_.back().size;
  params_.assign(static_cast<std::size_t>(total), T(0));
  grads_.assign(static_cast<std::size_t>(total), T(0));
  caches_.resize(sublayers_.size());
  stream_.resize(sublayers_.size() + 1);
}

template <class T>
std::int64_t Model<T>::add_tensor(const std::string& name, std::int64_t size, int layer, bool decay) {
  const std::int64_t offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size;
  tensors_.push_back({name, offset, size, layer, decay});
  return offset;
}

template <class T>
typename Model<T>::NormRef Model<T>::add_norm(const std::string& name, int layer, std::int64_t width) {
  NormRef n;
  n.name = name;
  n.width = width;
  n.weight = add_tensor(name + ".weight", width, layer, false);
  if (config_.norm == NormKind::layer_norm) n.bias = add_tensor(name + ".bias", width, layer, false);
  return n;
}

template <class T>
void Model<T>::init(std::uint64_t seed) {
  Rng rng(seed);
  const std::int64_t D = config_.width, F = config_.ffn;
  const bool deep = config_.placement == Placement::deepnorm;
  const double beta = deepnorm_beta(config_);
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.depth));
  std::fill(params_.begin(), params_.end(), T(0));
  // Draws in layout order, so one seed gives one model.
  auto normal = [&](std::int64_t offset, std::int64_t n, auto std_of_index) {
    for (std::int64_t i = 0; i < n; ++i)
      params_[static_cast<std::size_t>(offset + i)] = static_cast<T>(std_of_index(i) * rng.normal());
  };
  auto constant = [](double s) { return [s](std::int64_t) { return s; }; };
  auto xavier = [](double gain, std::int64_t fan_in, std::int64_t fan_out) {
    return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  };
  auto ones = [&](const NormRef& n) {  // a gain of 1
    if (n.weight >= 0) std::fill_n(params_.begin() + n.weight, n.width, static_cast<T>(1 - config_.weight_offset));
  };
  const bool xav = config_.init == InitScheme::xavier;
  const double embed_std = xav ? std::sqrt(0.5) : 0.02;
  normal(wte_, config_.vocab * D, constant(embed_std));
  if (wpe_ >= 0) normal(wpe_, config_.context * D, constant(embed_std));
  // The gain of each kind of projection: deepnorm's β for v, the output and
  // the MLP; else 1 under xavier. gpt2 draws fixed stds instead.
  const double gain_qk = 1.0, gain_v = deep ? beta : 1.0;
  const bool use_xavier = xav || deep;
  for (const Sublayer& sl : sublayers_) {
    for (const NormRef* n : {&sl.norm_a, &sl.norm_b, &sl.q_norm, &sl.k_norm}) ones(*n);
    if (sl.attention) {
      if (use_xavier) {
        // qkv columns: [0, D) query, [D, 2D) key, [2D, 3D) value.
        const double qk = xavier(gain_qk, D, D), v = xavier(gain_v, D, D);
        normal(sl.w1, D * 3 * D, [&](std::int64_t i) { return i % (3 * D) < 2 * D ? qk : v; });
        normal(sl.w2, D * D, constant(xavier(gain_v, D, D)));
      } else {
        normal(sl.w1, D * 3 * D, constant(0.02));
        normal(sl.w2, D * D, constant(residual_std));
      }
    } else {
      normal(sl.w1, D * fc_width(), constant(use_xavier ? xavier(gain_v, D, F) : 0.02));
      normal(sl.w2, F * D, constant(use_xavier ? xavier(gain_v, F, D) : residual_std));
    }
  }
  ones(final_norm_);
  if (head_ >= 0) normal(head_, D * config_.vocab, constant(xav ? xavier(1.0, D, config_.vocab) : 0.02));
}

template <class T>
void Model<T>::resize(std::int64_t batch, std::int64_t seq) {
  batch_ = batch;
  seq_ = seq;
  rows_ = batch * seq;
  const std::int64_t D = config_.width, F = config_.ffn, H = config_.heads, V = config_.vocab;
  auto size = [](std::vector<T>& v, std::int64_t n) { v.resize(static_cast<std::size_t>(n)); };
  for (auto& s : stream_) size(s, rows_ * D);
  for (std::size_t j = 0; j < caches_.size(); ++j) {
    Cache& c = caches_[j];
    const bool attention = sublayers_[j].attention;
    size(c.u, rows_ * D);
    size(c.s, rows_ * D);
    size(c.h, rows_ * D);
    for (auto* v : {&c.mean_a, &c.rstd_a, &c.mean_b, &c.rstd_b}) size(*v, rows_);
    size(c.hidden, rows_ * (attention ? 3 * D : fc_width()));
    size(c.act, attention ? 0 : rows_ * F);
    size(c.probs, attention ? batch * H * seq * seq : 0);
    size(c.attn, attention ? rows_ * D : 0);
    const bool qk = attention && config_.qk_norm;
    for (auto* v : {&c.q, &c.k, &c.qn, &c.kn}) size(*v, qk ? rows_ * D : 0);
    for (auto* v : {&c.mean_q, &c.rstd_q, &c.mean_k, &c.rstd_k}) size(*v, qk ? rows_ * H : 0);
  }
  size(z_, rows_ * D);
  size(mean_f_, rows_);
  size(rstd_f_, rows_);
  size(logits_, rows_ * V);
  size(dlogits_, rows_ * V);
  for (auto* v : {&dz_, &dx_, &dtmp_, &du_, &dattn_}) size(*v, rows_ * D);
  size(dhidden_, rows_ * std::max(3 * D, fc_width()));
  size(dact_, config_.ffn_kind == FfnKind::swiglu ? rows_ * F : 0);
  size(dprobs_, seq * seq);
  size(dqn_, config_.qk_norm ? rows_ * D : 0);
  size(dkn_, config_.qk_norm ? rows_ * D : 0);
}

template <class T>
void Model<T>::forward(std::span<const std::int32_t> tokens, std::int64_t batch, std::int64_t seq) {
  if (batch < 1 || seq < 1 || seq > config_.context)
    throw std::invalid_argument("model forward: batch = " + std::to_string(batch) + ", seq = " +
                                std::to_string(seq) + "; expected batch >= 1 and 1 <= seq <= context = " +
                                std::to_string(config_.context));
  if (static_cast<std::int64_t>(tokens.size()) != batch * seq)
    throw std::invalid_argument("model forward: tokens has " + std::to_string(tokens.size()) +
                                " ids, expected batch·seq = " + std::to_string(batch * seq));
  for (std::int32_t t : tokens)
    if (t < 0 || t >= config_.vocab)
      throw std::invalid_argument("model forward: token id " + std::to_string(t) + " outside [0, vocab = " +
                                  std::to_string(config_.vocab) + ")");
  resize(batch, seq);
  tokens_.assign(tokens.begin(), tokens.end());
  const std::int64_t D = config_.width, V = config_.vocab;
  const std::size_t L2 = sublayers_.size();

  T* x0 = stream_[0].data();
  {
    const ObservedOp op(op_record<T>("embedding", "embedding", rows_, D));
    for (std::int64_t n = 0; n < rows_; ++n) {
      const T* e = params_.data() + wte_ + tokens_[static_cast<std::size_t>(n)] * D;
      const T* p = (wpe_ >= 0 ? params_.data() + wpe_ : sinusoids_.data()) + (n % seq) * D;
      for (std::int64_t d = 0; d < D; ++d) x0[n * D + d] = e[d] + p[d];
    }
  }

  for (std::size_t j = 0; j < L2; ++j) {
    const T* x = stream_[j].data();
    T* xn = stream_[j + 1].data();
    if (config_.placement != Placement::pre) {
      block_step(j, x, xn);
      continue;
    }
    // Pre-norm: the norm of this sublayer's input ran fused with the
    // previous add, except for the first sublayer's.
    const Sublayer& sl = sublayers_[j];
    Cache& c = caches_[j];
    if (j == 0) norm(sl.norm_a, x, c.u.data(), c.mean_a.data(), c.rstd_a.data());
    sublayer_forward(j, c.u.data(), c.s.data());
    if (j + 1 < L2) {
      Cache& next = caches_[j + 1];
      add_norm(sublayers_[j + 1].norm_a, c.s.data(), x, xn, next.u.data(), next.mean_a.data(), next.rstd_a.data());
    } else if (config_.final_norm) {
      add_norm(final_norm_, c.s.data(), x, xn, z_.data(), mean_f_.data(), rstd_f_.data());
    } else {
      add("residual", xn, x, c.s.data(), static_cast<std::size_t>(rows_ * D));
    }
  }
  if (config_.final_norm && config_.placement != Placement::pre)
    norm(final_norm_, stream_[L2].data(), z_.data(), mean_f_.data(), rstd_f_.data());
  const T* z = config_.final_norm ? z_.data() : stream_[L2].data();
  if (head_ < 0)
    matmul<T>("head", false, true, rows_, V, D, T(1), z, D, params_.data() + wte_, D, T(0), logits_.data(), V);
  else
    matmul<T>("head", false, false, rows_, V, D, T(1), z, D, params_.data() + head_, V, T(0), logits_.data(), V);
}

template <class T>
void Model<T>::block_step(std::size_t j, const T* x, T* xn) {
  const Sublayer& sl = sublayers_[j];
  Cache& c = caches_[j];
  const std::size_t n_elems = static_cast<std::size_t>(rows_ * config_.width);
  const T alpha = static_cast<T>(deepnorm_alpha(config_));
  switch (config_.placement) {
    case Placement::pre:
      norm(sl.norm_a, x, c.u.data(), c.mean_a.data(), c.rstd_a.data());
      sublayer_forward(j, c.u.data(), c.s.data());
      add("residual", xn, x, c.s.data(), n_elems);
      break;
    case Placement::post:
      sublayer_forward(j, x, c.s.data());
      add_norm(sl.norm_a, c.s.data(), x, c.h.data(), xn, c.mean_a.data(), c.rstd_a.data());
      break;
    case Placement::sandwich:
      norm(sl.norm_a, x, c.u.data(), c.mean_a.data(), c.rstd_a.data());
      sublayer_forward(j, c.u.data(), c.s.data());
      norm(sl.norm_b, c.s.data(), c.h.data(), c.mean_b.data(), c.rstd_b.data());
      add("residual", xn, x, c.h.data(), n_elems);
      break;
    case Placement::output:
      sublayer_forward(j, x, c.s.data());
      norm(sl.norm_a, c.s.data(), c.h.data(), c.mean_a.data(), c.rstd_a.data());
      add("residual", xn, x, c.h.data(), n_elems);
      break;
    case Placement::none:
      sublayer_forward(j, x, c.s.data());
      add("residual", xn, x, c.s.data(), n_elems);
      break;
    case Placement::deepnorm:
      sublayer_forward(j, x, c.s.data());
      axpy("residual", c.h.data(), alpha, x, c.s.data(), n_elems);
      norm(sl.norm_a, c.h.data(), xn, c.mean_a.data(), c.rstd_a.data());
      break;
  }
}

template <class T>
void Model<T>::sublayer(std::size_t j, std::span<const T> u, std::int64_t batch, std::int64_t seq, std::span<T> s) {
  check_block_args("model sublayer", j, u.size(), s.size(), batch, seq);
  resize(batch, seq);
  sublayer_forward(j, u.data(), s.data());
}

template <class T>
void Model<T>::block(std::size_t j, std::span<const T> x, std::int64_t batch, std::int64_t seq, std::span<T> y) {
  check_block_args("model block", j, x.size(), y.size(), batch, seq);
  resize(batch, seq);
  block_step(j, x.data(), y.data());
}

template <class T>
void Model<T>::check_block_args(const char* what, std::size_t j, std::size_t in, std::size_t out, std::int64_t batch,
                                std::int64_t seq) const {
  if (j >= sublayers_.size())
    throw std::invalid_argument(std::string(what) + ": sublayer " + std::to_string(j) + ", the model has " +
                                std::to_string(sublayers_.size()));
  if (batch < 1 || seq < 1 || seq > config_.context)
    throw std::invalid_argument(std::string(what) + ": batch = " + std::to_string(batch) + ", seq = " +
                                std::to_string(seq) + "; expected batch >= 1 and 1 <= seq <= context = " +
                                std::to_string(config_.context));
  const std::size_t n = static_cast<std::size_t>(batch * seq * config_.width);
  if (in != n || out != n)
    throw std::invalid_argument(std::string(what) + ": input has " + std::to_string(in) + " and output " +
                                std::to_string(out) + " elements, expected batch·seq·width = " + std::to_string(n));
}

template <class T>
void Model<T>::sublayer_forward(std::size_t j, const T* u, T* s) {
  if (sublayers_[j].attention)
    attention_forward(sublayers_[j], caches_[j], u, s);
  else
    mlp_forward(sublayers_[j], caches_[j], u, s);
}

template <class T>
void Model<T>::sublayer_backward(std::size_t j, const T* u, const T* ds, T* du) {
  if (sublayers_[j].attention)
    attention_backward(sublayers_[j], caches_[j], u, ds, du);
  else
    mlp_backward(sublayers_[j], caches_[j], u, ds, du);
}

// u, s: (rows, D). Heads are column blocks of width dh = D/H of q, k, v.
// Row i of a head's scores is computed for every key and the keys after i
// are then set to probability 0, so the output of position i never reads a
// later position's value: its sum gains only exact zeros from them.
// With QK-norm, q and k are copied out to (rows, D) buffers, which are
// (rows·H, dh) matrices with one row per token and head, and normed there
// in one call each; the scores then read the normed copies.
template <class T>
void Model<T>::attention_forward(const Sublayer& sl, Cache& c, const T* u, T* s) {
  const std::int64_t D = config_.width, H = config_.heads, dh = D / H, Tn = seq_;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  const T* W = params_.data();
  T* qkv = c.hidden.data();
  matmul<T>("attn.qkv", false, false, rows_, 3 * D, D, T(1), u, D, W + sl.w1, 3 * D, T(0), qkv, 3 * D);
  add_bias("attn.qkv.bias", qkv, W + sl.b1, rows_, 3 * D);
  const bool qk = config_.qk_norm;
  if (qk) {
    {
      const ObservedOp op(op_record<T>("copy", "attn.qk_copy", 2 * rows_ * D));
      for (std::int64_t n = 0; n < rows_; ++n) {
        std::copy_n(qkv + n * 3 * D, D, c.q.data() + n * D);
        std::copy_n(qkv + n * 3 * D + D, D, c.k.data() + n * D);
      }
    }
    norm(sl.q_norm, c.q.data(), c.qn.data(), c.mean_q.data(), c.rstd_q.data());
    norm(sl.k_norm, c.k.data(), c.kn.data(), c.mean_k.data(), c.rstd_k.data());
  }
  const std::int64_t ldqk = qk ? D : 3 * D;  // the row stride of the q and k the scores read
  for (std::int64_t b = 0; b < batch_; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      const T* q = qk ? c.qn.data() + b * Tn * D + h * dh : qkv + b * Tn * 3 * D + h * dh;
      const T* k = qk ? c.kn.data() + b * Tn * D + h * dh : q + D;
      const T* v = qkv + b * Tn * 3 * D + h * dh + 2 * D;
      T* P = c.probs.data() + (b * H + h) * Tn * Tn;
      matmul<T>("attn.scores", false, true, Tn, Tn, dh, scale, q, ldqk, k, ldqk, T(0), P, Tn);
      causal_softmax(P, Tn);
      matmul<T>("attn.context", false, false, Tn, dh, Tn, T(1), P, Tn, v, 3 * D, T(0), c.attn.data() + b * Tn * D + h * dh, D);
    }
  }
  matmul<T>("attn.proj", false, false, rows_, D, D, T(1), c.attn.data(), D, W + sl.w2, D, T(0), s, D);
  add_bias("attn.proj.bias", s, W + sl.b2, rows_, D);
}

template <class T>
void Model<T>::attention_backward(const Sublayer& sl, Cache& c, const T* u, const T* ds, T* du) {
  const std::int64_t D = config_.width, H = config_.heads, dh = D / H, Tn = seq_;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(dh)));
  const T* W = params_.data();
  T* G = grads_.data();
  T* dattn = dattn_.data();
  matmul<T>("attn.proj.dx", false, true, rows_, D, D, T(1), ds, D, W + sl.w2, D, T(0), dattn, D);
  matmul<T>("attn.proj.dw", true, false, D, D, rows_, T(1), c.attn.data(), D, ds, D, T(1), G + sl.w2, D);
  add_column_sums("attn.proj.bias", G + sl.b2, ds, rows_, D);
  const T* qkv = c.hidden.data();
  T* dqkv = dhidden_.data();
  T* dP = dprobs_.data();
  const bool qk = config_.qk_norm;
  const std::int64_t ldqk = qk ? D : 3 * D;  // q, k and their gradients below: the normed copies with QK-norm
  for (std::int64_t b = 0; b < batch_; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t off = b * Tn * 3 * D + h * dh, off_qk = qk ? b * Tn * D + h * dh : off;
      const T* q = (qk ? c.qn.data() : qkv) + off_qk;
      const T* k = qk ? c.kn.data() + off_qk : q + D;
      const T* v = qkv + off + 2 * D;
      T* dq = (qk ? dqn_.data() : dqkv) + off_qk;
      T* dk = qk ? dkn_.data() + off_qk : dq + D;
      T* dv = dqkv + off + 2 * D;
      const T* P = c.probs.data() + (b * H + h) * Tn * Tn;
      const T* dO = dattn + b * Tn * D + h * dh;
      matmul<T>("attn.context.dp", false, true, Tn, Tn, dh, T(1), dO, D, v, 3 * D, T(0), dP, Tn);
      matmul<T>("attn.context.dv", true, false, Tn, dh, Tn, T(1), P, Tn, dO, D, T(0), dv, 3 * D);
      causal_softmax_backward(P, dP, Tn);
      matmul<T>("attn.scores.dq", false, false, Tn, dh, Tn, scale, dP, Tn, k, ldqk, T(0), dq, ldqk);
      matmul<T>("attn.scores.dk", true, false, Tn, dh, Tn, scale, dP, Tn, q, ldqk, T(0), dk, ldqk);
    }
  }
  if (qk) {  // through the norms, in place, into q's and k's columns of dqkv
    norm_backward(sl.q_norm, dqn_.data(), c.q.data(), c.mean_q.data(), c.rstd_q.data(), dqn_.data());
    norm_backward(sl.k_norm, dkn_.data(), c.k.data(), c.mean_k.data(), c.rstd_k.data(), dkn_.data());
    const ObservedOp op(op_record<T>("copy", "attn.qk_copy", 2 * rows_ * D));
    for (std::int64_t n = 0; n < rows_; ++n) {
      std::copy_n(dqn_.data() + n * D, D, dqkv + n * 3 * D);
      std::copy_n(dkn_.data() + n * D, D, dqkv + n * 3 * D + D);
    }
  }
  matmul<T>("attn.qkv.dx", false, true, rows_, D, 3 * D, T(1), dqkv, 3 * D, W + sl.w1, 3 * D, T(0), du, D);
  matmul<T>("attn.qkv.dw", true, false, D, 3 * D, rows_, T(1), u, D, dqkv, 3 * D, T(1), G + sl.w1, 3 * D);
  add_column_sums("attn.qkv.bias", G + sl.b1, dqkv, rows_, 3 * D);
}

// u, s: (rows, D); hidden: (rows, F1), F1 = F (GELU) or 2F (SwiGLU: gate
// columns [0, F), up columns [F, 2F)); act: (rows, F).
template <class T>
void Model<T>::mlp_forward(const Sublayer& sl, Cache& c, const T* u, T* s) {
  const std::int64_t D = config_.width, F = config_.ffn, F1 = fc_width();
  const T* W = params_.data();
  matmul<T>("mlp.fc", false, false, rows_, F1, D, T(1), u, D, W + sl.w1, F1, T(0), c.hidden.data(), F1);
  add_bias("mlp.fc.bias", c.hidden.data(), W + sl.b1, rows_, F1);
  if (config_.ffn_kind == FfnKind::gelu) {
    const ObservedOp op(op_record<T>("gelu", "mlp.act", static_cast<std::int64_t>(c.act.size())));
    for (std::size_t i = 0; i < c.act.size(); ++i) c.act[i] = gelu(c.hidden[i]);
  } else {
    const ObservedOp op(op_record<T>("swiglu", "mlp.act", rows_, F));
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t i = 0; i < F; ++i) {
        const T* h = c.hidden.data() + r * F1;
        c.act[static_cast<std::size_t>(r * F + i)] = silu(h[i]) * h[F + i];
      }
  }
  matmul<T>("mlp.fc2", false, false, rows_, D, F, T(1), c.act.data(), F, W + sl.w2, D, T(0), s, D);
  add_bias("mlp.fc2.bias", s, W + sl.b2, rows_, D);
}

template <class T>
void Model<T>::mlp_backward(const Sublayer& sl, Cache& c, const T* u, const T* ds, T* du) {
  const std::int64_t D = config_.width, F = config_.ffn, F1 = fc_width();
  const T* W = params_.data();
  T* G = grads_.data();
  T* dh = dhidden_.data();
  const bool swiglu = config_.ffn_kind == FfnKind::swiglu;
  // d(act): straight into dh for GELU (same shape), else into dact_.
  T* dact = swiglu ? dact_.data() : dh;
  matmul<T>("mlp.fc2.dx", false, true, rows_, F, D, T(1), ds, D, W + sl.w2, D, T(0), dact, F);
  matmul<T>("mlp.fc2.dw", true, false, F, D, rows_, T(1), c.act.data(), F, ds, D, T(1), G + sl.w2, D);
  add_column_sums("mlp.fc2.bias", G + sl.b2, ds, rows_, D);
  if (!swiglu) {
    const ObservedOp op(op_record<T>("gelu_backward", "mlp.act", static_cast<std::int64_t>(c.act.size())));
    for (std::size_t i = 0; i < c.act.size(); ++i) dh[i] *= gelu_derivative(c.hidden[i]);
  } else {
    const ObservedOp op(op_record<T>("swiglu_backward", "mlp.act", rows_, F));
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t i = 0; i < F; ++i) {
        const T* h = c.hidden.data() + r * F1;
        const T g = dact[r * F + i];
        dh[r * F1 + i] = g * h[F + i] * silu_derivative(h[i]);
        dh[r * F1 + F + i] = g * silu(h[i]);
      }
  }
  matmul<T>("mlp.fc.dx", false, true, rows_, D, F1, T(1), dh, F1, W + sl.w1, F1, T(0), du, D);
  matmul<T>("mlp.fc.dw", true, false, D, F1, rows_, T(1), u, D, dh, F1, T(1), G + sl.w1, F1);
  add_column_sums("mlp.fc.bias", G + sl.b1, dh, rows_, F1);
}

template <class T>
double Model<T>::loss(std::span<const std::int32_t> targets) {
  if (static_cast<std::int64_t>(targets.size()) != rows_)
    throw std::invalid_argument("model loss: targets has " + std::to_string(targets.size()) +
                                " ids, expected batch·seq = " + std::to_string(rows_));
  const std::int64_t V = config_.vocab;
  for (std::int32_t t : targets)
    if (t < 0 || t >= V)
      throw std::invalid_argument("model loss: target id " + std::to_string(t) + " outside [0, vocab = " +
                                  std::to_string(V) + ")");
  targets_.assign(targets.begin(), targets.end());
  const ObservedOp op(op_record<T>("cross_entropy", "loss", rows_, V));
  double total = 0;
  for (std::int64_t n = 0; n < rows_; ++n) {
    const T* l = logits_.data() + n * V;
    T* p = dlogits_.data() + n * V;
    const T m = *std::max_element(l, l + V);
    double sum = 0;
    for (std::int64_t v = 0; v < V; ++v) {
      p[v] = std::exp(l[v] - m);
      sum += static_cast<double>(p[v]);
    }
    for (std::int64_t v = 0; v < V; ++v) p[v] = static_cast<T>(static_cast<double>(p[v]) / sum);
    total += std::log(sum) + static_cast<double>(m) - static_cast<double>(l[targets_[static_cast<std::size_t>(n)]]);
  }
  return total / static_cast<double>(rows_);
}

template <class T>
void Model<T>::backward() {
  if (targets_.size() != static_cast<std::size_t>(rows_) || rows_ == 0)
    throw std::logic_error("model backward: call forward() and loss() first");
  const std::int64_t D = config_.width, V = config_.vocab;
  const std::size_t L2 = sublayers_.size();
  const std::size_t n_elems = static_cast<std::size_t>(rows_ * D);
  const bool pre = config_.placement == Placement::pre;
  {
    const ObservedOp op(op_record<T>("fill", "grads.zero", static_cast<std::int64_t>(grads_.size())));
    std::fill(grads_.begin(), grads_.end(), T(0));
  }
  T* G = grads_.data();
  const T* W = params_.data();

  // d(mean cross-entropy)/dlogits = (softmax − onehot) / rows.
  const T inv_rows = static_cast<T>(1.0 / static_cast<double>(rows_));
  {
    const ObservedOp op(op_record<T>("cross_entropy_backward", "loss", rows_, V));
    for (std::int64_t n = 0; n < rows_; ++n) {
      T* d = dlogits_.data() + n * V;
      d[targets_[static_cast<std::size_t>(n)]] -= T(1);
      for (std::int64_t v = 0; v < V; ++v) d[v] *= inv_rows;
    }
  }
  const T* z = config_.final_norm ? z_.data() : stream_[L2].data();
  if (head_ < 0) {
    matmul<T>("head.dx", false, false, rows_, D, V, T(1), dlogits_.data(), V, W + wte_, D, T(0), dz_.data(), D);
    matmul<T>("head.dw", true, false, V, D, rows_, T(1), dlogits_.data(), V, z, D, T(1), G + wte_, D);
  } else {
    matmul<T>("head.dx", false, true, rows_, D, V, T(1), dlogits_.data(), V, W + head_, V, T(0), dz_.data(), D);
    matmul<T>("head.dw", true, false, D, V, rows_, T(1), z, D, dlogits_.data(), V, T(1), G + head_, V);
  }

  // dx_ holds the gradient of stream_[j + 1]. For pre-norm it lacks, until
  // the fused backward adds it, the part through the norm that read that
  // stream (pending: the next sublayer's input norm or the final norm).
  T* dx = dx_.data();
  const NormRef* pending = nullptr;
  const T *pending_dy = nullptr, *pending_mean = nullptr, *pending_rstd = nullptr;
  bool have_dx = true;
  if (config_.final_norm && pre) {
    pending = &final_norm_;
    pending_dy = dz_.data();
    pending_mean = mean_f_.data();
    pending_rstd = rstd_f_.data();
    have_dx = false;
  } else if (config_.final_norm) {
    norm_backward(final_norm_, dz_.data(), stream_[L2].data(), mean_f_.data(), rstd_f_.data(), dx);
  } else {
    const ObservedOp op(op_record<T>("copy", "head.grad", static_cast<std::int64_t>(n_elems)));
    std::copy(dz_.begin(), dz_.begin() + static_cast<std::ptrdiff_t>(n_elems), dx_.begin());
  }

  const T alpha = static_cast<T>(deepnorm_alpha(config_));
  T* dt = dtmp_.data();
  T* du = du_.data();
  for (std::size_t j = L2; j-- > 0;) {
    const Sublayer& sl = sublayers_[j];
    Cache& c = caches_[j];
    const T* x = stream_[j].data();
    switch (config_.placement) {
      case Placement::pre:
        if (pending) {
          add_norm_backward(*pending, pending_dy, have_dx ? dx : nullptr, stream_[j + 1].data(), pending_mean,
                            pending_rstd, dx);
          have_dx = true;
        }
        sublayer_backward(j, c.u.data(), dx, du);
        if (j == 0) {
          norm_backward(sl.norm_a, du, x, c.mean_a.data(), c.rstd_a.data(), dt);
          add("residual.grad", dx, dx, dt, n_elems);
        } else {
          pending = &sl.norm_a;
          pending_dy = du;
          pending_mean = c.mean_a.data();
          pending_rstd = c.rstd_a.data();
        }
        break;
      case Placement::post:
        add_norm_backward(sl.norm_a, dx, nullptr, c.h.data(), c.mean_a.data(), c.rstd_a.data(), dt);
        sublayer_backward(j, x, dt, du);
        add("residual.grad", dx, dt, du, n_elems);
        break;
      case Placement::sandwich:
        norm_backward(sl.norm_b, dx, c.s.data(), c.mean_b.data(), c.rstd_b.data(), dt);
        sublayer_backward(j, c.u.data(), dt, du);
        norm_backward(sl.norm_a, du, x, c.mean_a.data(), c.rstd_a.data(), dt);
        add("residual.grad", dx, dx, dt, n_elems);
        break;
      case Placement::output:
        norm_backward(sl.norm_a, dx, c.s.data(), c.mean_a.data(), c.rstd_a.data(), dt);
        sublayer_backward(j, x, dt, du);
        add("residual.grad", dx, dx, du, n_elems);
        break;
      case Placement::none:
        sublayer_backward(j, x, dx, du);
        add("residual.grad", dx, dx, du, n_elems);
        break;
      case Placement::deepnorm:
        norm_backward(sl.norm_a, dx, c.h.data(), c.mean_a.data(), c.rstd_a.data(), dt);
        sublayer_backward(j, x, dt, du);
        axpy("residual.grad", dx, alpha, dt, du, n_elems);
        break;
    }
  }

  // Into both tables, or into wte alone with fixed sinusoidal positions.
  const ObservedOp op(op_record<T>("embedding_backward", "embedding", rows_, D, wpe_ >= 0 ? 2 : 1));
  for (std::int64_t n = 0; n < rows_; ++n) {
    T* ge = G + wte_ + tokens_[static_cast<std::size_t>(n)] * D;
    for (std::int64_t d = 0; d < D; ++d) ge[d] += dx[n * D + d];
    if (wpe_ >= 0) {
      T* gp = G + wpe_ + (n % seq_) * D;
      for (std::int64_t d = 0; d < D; ++d) gp[d] += dx[n * D + d];
    }
  }
}

template <class T>
std::vector<NormInput> Model<T>::norm_inputs() const {
  std::vector<NormInput> out;
  const std::size_t n = static_cast<std::size_t>(rows_ * config_.width);
  for (std::size_t j = 0; j < sublayers_.size(); ++j) {
    const Sublayer& sl = sublayers_[j];
    const Cache& c = caches_[j];
    switch (config_.placement) {
      case Placement::pre: out.push_back({sl.norm_a.name, rms(stream_[j], n)}); break;
      case Placement::post:
      case Placement::deepnorm: out.push_back({sl.norm_a.name, rms(c.h, n)}); break;
      case Placement::sandwich:
        out.push_back({sl.norm_a.name, rms(stream_[j], n)});
        out.push_back({sl.norm_b.name, rms(c.s, n)});
        break;
      case Placement::output: out.push_back({sl.norm_a.name, rms(c.s, n)}); break;
      case Placement::none: break;
    }
    if (sl.attention && config_.qk_norm) {
      out.push_back({sl.q_norm.name, rms(c.q, n)});
      out.push_back({sl.k_norm.name, rms(c.k, n)});
    }
  }
  if (config_.final_norm) out.push_back({final_norm_.name, rms(stream_.back(), n)});
  return out;
}

template <class T>
std::vector<double> Model<T>::stream_rms() const {
  std::vector<double> out;
  const std::size_t n = static_cast<std::size_t>(rows_ * config_.width);
  for (const auto& s : stream_) out.push_back(rms(s, n));
  return out;
}

template <class T>
void Model<T>::norm(const NormRef& n, const T* x, T* y, T* mean, T* rstd) {
  const std::int64_t w = n.width, rows = rows_ * config_.width / w;
  const T* P = params_.data();
  if (config_.norm == NormKind::layer_norm)
    ops_.layer_norm(matrix(x, rows, w), vector(P + n.weight, w), vector(P + n.bias, w), config_.eps,
                    matrix(y, rows, w), vector(mean, rows), vector(rstd, rows));
  else
    ops_.rms_norm(matrix(x, rows, w), vector(P + n.weight, w), config_.eps, matrix(y, rows, w), vector(rstd, rows),
                  config_.weight_offset);
}

template <class T>
void Model<T>::add_norm(const NormRef& n, const T* x, const T* residual, T* h, T* y, T* mean, T* rstd) {
  const std::int64_t D = config_.width;
  const T* P = params_.data();
  if (config_.norm == NormKind::layer_norm)
    ops_.add_layer_norm(matrix(x, rows_, D), matrix(residual, rows_, D), vector(P + n.weight, D),
                        vector(P + n.bias, D), config_.eps, matrix(h, rows_, D), matrix(y, rows_, D),
                        vector(mean, rows_), vector(rstd, rows_));
  else
    ops_.add_rms_norm(matrix(x, rows_, D), matrix(residual, rows_, D), vector(P + n.weight, D), config_.eps,
                      matrix(h, rows_, D), matrix(y, rows_, D), vector(rstd, rows_), config_.weight_offset);
}

template <class T>
void Model<T>::norm_backward(const NormRef& n, const T* dy, const T* x, const T* mean, const T* rstd, T* dx) {
  const std::int64_t w = n.width, rows = rows_ * config_.width / w;
  const T* P = params_.data();
  T* G = grads_.data();
  if (config_.norm == NormKind::layer_norm)
    ops_.layer_norm_backward(matrix(dy, rows, w), matrix(x, rows, w), vector(mean, rows), vector(rstd, rows),
                             vector(P + n.weight, w), matrix(dx, rows, w), vector(G + n.weight, w),
                             vector(G + n.bias, w));
  else
    ops_.rms_norm_backward(matrix(dy, rows, w), matrix(x, rows, w), vector(rstd, rows), vector(P + n.weight, w),
                           matrix(dx, rows, w), vector(G + n.weight, w), config_.weight_offset);
}

template <class T>
void Model<T>::add_norm_backward(const NormRef& n, const T* dy, const T* dh_out, const T* h, const T* mean,
                                 const T* rstd, T* dh) {
  const std::int64_t D = config_.width;
  const T* P = params_.data();
  T* G = grads_.data();
  const ConstMatrix dh_out_view = dh_out ? matrix(dh_out, rows_, D) : ConstMatrix{};
  if (config_.norm == NormKind::layer_norm)
    ops_.add_layer_norm_backward(matrix(dy, rows_, D), dh_out_view, matrix(h, rows_, D), vector(mean, rows_),
                                 vector(rstd, rows_), vector(P + n.weight, D), matrix(dh, rows_, D),
                                 vector(G + n.weight, D), vector(G + n.bias, D));
  else
    ops_.add_rms_norm_backward(matrix(dy, rows_, D), dh_out_view, matrix(h, rows_, D), vector(rstd, rows_),
                               vector(P + n.weight, D), matrix(dh, rows_, D), vector(G + n.weight, D),
                               config_.weight_offset);
}

template class Model<float>;
template class Model<double>;

}  // namespace normkit::model
