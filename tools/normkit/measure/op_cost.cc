#include "measure/op_cost.hpp"

#include <cstring>
#include <string_view>

#include "measure/traffic.hpp"

namespace normkit::measure {

namespace {

bool has(const OpRecord& r, OpArg a) { return (r.args & bit_of(a)) != 0; }

// The library's ops: the arrays the call was given, through the bench's
// traffic model. Which of them are read and which written follows from the
// op (forward or backward); the residual stream has the activations' dtype
// in every call the model makes, which the traffic model assumes.
OpCost norm_cost(const OpRecord& r) {
  const std::string_view name = r.op;
  const bool backward = name.ends_with("_backward");
  const Shape s{r.shape[0], r.shape[1], r.dtype, r.param_dtype};
  Arrays reads, writes;
  const auto read_if = [&](OpArg a, Array b) {
    if (has(r, a)) reads.add(b);
  };
  const auto write_if = [&](OpArg a, Array b) {
    if (has(r, a)) writes.add(b);
  };
  if (!backward) {
    read_if(OpArg::x, Array::x);
    read_if(OpArg::residual, Array::residual);
    read_if(OpArg::weight, Array::weight);
    read_if(OpArg::bias, Array::bias);
    write_if(OpArg::h, Array::h);
    write_if(OpArg::y, Array::y);
    write_if(OpArg::mean, Array::mean);
    write_if(OpArg::rstd, Array::rstd);
  } else {
    read_if(OpArg::dy, Array::dy);
    read_if(OpArg::x, Array::x);
    read_if(OpArg::h, Array::h);
    read_if(OpArg::dh_out, Array::dh_out);
    read_if(OpArg::mean, Array::mean);
    read_if(OpArg::rstd, Array::rstd);
    read_if(OpArg::weight, Array::weight);
    write_if(OpArg::dx, Array::dx);
    write_if(OpArg::dweight, Array::dweight);
    write_if(OpArg::dbias, Array::dbias);
  }
  const Traffic t = traffic(reads, writes, s);
  OpCost c;
  c.known = true;
  c.bytes_read = t.read;
  c.bytes_written = t.written;
  const bool with_bias = has(r, backward ? OpArg::dbias : OpArg::bias);
  const double per = norm_flops_per_element(r.op, with_bias, has(r, OpArg::dh_out));
  c.flops = per * static_cast<double>(r.shape[0]) * static_cast<double>(r.shape[1]);
  c.known = per > 0;
  return c;
}

// The model's ops, by name. e: bytes of one element.
OpCost model_cost(const OpRecord& r) {
  const std::string_view op = r.op;
  const auto* d = r.shape;
  const auto e = static_cast<std::int64_t>(dtype_size(r.dtype));
  const auto f = [](std::int64_t v) { return static_cast<double>(v); };
  OpCost c;
  c.known = true;
  const auto set = [&](double flops, std::int64_t read_elems, std::int64_t written_elems) {
    c.flops = flops;
    c.bytes_read = read_elems * e;
    c.bytes_written = written_elems * e;
  };
  if (op == "matmul") {
    const std::int64_t M = d[0], N = d[1], K = d[2];
    const bool acc = d[3] != 0;
    set(2.0 * f(M) * f(N) * f(K) + (acc ? f(M * N) : 0.0), M * K + K * N + (acc ? M * N : 0), M * N);
  } else if (op == "bias_add") {  // y += b
    set(f(d[0] * d[1]), d[0] * d[1] + d[1], d[0] * d[1]);
  } else if (op == "bias_grad") {  // db += Σ_rows dy
    set(f(d[0] * d[1]), d[0] * d[1] + d[1], d[1]);
  } else if (op == "add") {
    set(f(d[0]), 2 * d[0], d[0]);
  } else if (op == "axpy") {
    set(2.0 * f(d[0]), 2 * d[0], d[0]);
  } else if (op == "gelu") {
    // 0.5·x·(1 + tanh(c·(x + a·x³))): x³ (2), ·a, + x, ·c, tanh, + 1, ·x, ·0.5.
    set(9.0 * f(d[0]), d[0], d[0]);
  } else if (op == "gelu_backward") {
    // The tanh again (6), 0.5·(1 + t) (2), 1 − t² (2), c·(1 + 3a·x²) (4),
    // their product with x (3), · the incoming gradient (1).
    set(18.0 * f(d[0]), 2 * d[0], d[0]);
  } else if (op == "swiglu") {
    // silu(g)·u: −g, exp, + 1, g / (·), · u.
    set(5.0 * f(d[0] * d[1]), 2 * d[0] * d[1], d[0] * d[1]);
  } else if (op == "swiglu_backward") {
    // σ(g) (4), silu (1), silu' = σ·(1 + g·(1 − σ)) (4), dgate = dact·u·silu' (2), dup = dact·silu (1).
    set(12.0 * f(d[0] * d[1]), 3 * d[0] * d[1], 2 * d[0] * d[1]);
  } else if (op == "softmax") {
    // Per computed entry: max, subtract, exp, sum, divide; the masked rest is written as 0.
    set(5.0 * f(d[2]), d[2], d[0] * d[1]);
  } else if (op == "softmax_backward") {
    // Per computed entry: Σ p·g (2), p·(g − Σ) (2); reads p and g.
    set(4.0 * f(d[2]), 2 * d[2], d[0] * d[1]);
  } else if (op == "embedding") {  // x0 = wte[token] + wpe[position]
    set(f(d[0] * d[1]), 2 * d[0] * d[1], d[0] * d[1]);
  } else if (op == "embedding_backward") {  // each of the tables' rows += dx0
    const std::int64_t tables = d[2];
    set(f(tables * d[0] * d[1]), (1 + tables) * d[0] * d[1], tables * d[0] * d[1]);
  } else if (op == "cross_entropy") {
    // Per logit: max, subtract, exp, sum, divide (the softmax kept for backward).
    set(5.0 * f(d[0] * d[1]), d[0] * d[1], d[0] * d[1]);
  } else if (op == "cross_entropy_backward") {  // (p − onehot) / rows, in place
    set(f(d[0] * d[1]), d[0] * d[1], d[0] * d[1]);
  } else if (op == "copy") {
    set(0.0, d[0], d[0]);
  } else if (op == "fill") {  // the gradients zeroed before backward
    set(0.0, 0, d[0]);
  } else {
    c = OpCost{};
  }
  return c;
}

}  // namespace

double norm_flops_per_element(const char* op, bool with_bias, bool with_dh_out) {
  const std::string_view n = op;
  const bool fused = n.starts_with("add_");
  const bool layer = n.find("layer_norm") != std::string_view::npos;
  const bool rms = n.find("rms_norm") != std::string_view::npos;
  if (!layer && !rms) return 0;
  const bool backward = n.ends_with("_backward");
  double per = 0;
  if (!backward) per = layer ? (with_bias ? 7 : 6) : 4;
  else per = layer ? (with_bias ? 13 : 12) : 9;
  if (fused && (!backward || with_dh_out)) per += 1;
  return per;
}

OpCost op_cost(const OpRecord& r) {
  if (r.label[0] == '\0' && norm_flops_per_element(r.op, false, false) > 0) return norm_cost(r);
  return model_cost(r);
}

}  // namespace normkit::measure
