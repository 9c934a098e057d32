// oneDNN's layer normalization, timed on the same buffers as normkit.
//
// What the installed oneDNN offers decides what is compared (checked at
// run time by asking it for a primitive, not assumed from its version):
//   - LayerNorm forward (training: it writes mean and variance) and backward
//     (diff_src, diff_scale, diff_shift), with scale and shift; not the
//     backward of dx alone: oneDNN 2.6 (Debian 12) has backward_data
//     (diff_src alone) only without scale and shift;
//   - scale and shift are f32 whatever the data type, so with bf16 data the
//     parameter bytes are f32 bytes (the traffic count follows);
//   - the variance takes the place of rstd: the same bytes, one f32 per row;
//   - RMSNorm (normalization_flags::rms_norm) only exists from oneDNN 3.x and
//     no fused residual add exists at all, so those ops have no oneDNN row.
// oneDNN threads with OpenMP; the bench sets omp_set_num_threads to the
// same count it gives normkit.
#include <dnnl.hpp>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_impls.hpp"

namespace normkit::bench {
namespace {

using dnnl::memory;
using dnnl::normalization_flags;
using dnnl::prop_kind;
using LnFwd = dnnl::layer_normalization_forward;
using LnBwd = dnnl::layer_normalization_backward;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::data_type data_type(DType t) {
  switch (t) {
    case DType::bf16: return memory::data_type::bf16;
    case DType::f16: return memory::data_type::f16;
    default: return memory::data_type::f32;
  }
}

const auto kFlags = normalization_flags::use_scale | normalization_flags::use_shift;

struct Descs {
  memory::desc data, stat, param;
};

Descs descs(const Shape& s) {
  return {memory::desc({s.rows, s.D}, data_type(s.act), memory::format_tag::ab),
          memory::desc({s.rows}, memory::data_type::f32, memory::format_tag::a),
          memory::desc({s.D}, memory::data_type::f32, memory::format_tag::a)};
}

LnFwd::primitive_desc forward_pd(const Shape& s, bool allow_empty) {
  const Descs d = descs(s);
  return LnFwd::primitive_desc(
      LnFwd::desc(prop_kind::forward_training, d.data, d.stat, static_cast<float>(kEps), kFlags),
      engine(), allow_empty);
}

LnBwd::primitive_desc backward_pd(const Shape& s, const LnFwd::primitive_desc& hint,
                                  bool allow_empty) {
  const Descs d = descs(s);
  return LnBwd::primitive_desc(
      LnBwd::desc(prop_kind::backward, d.data, d.data, d.stat, static_cast<float>(kEps), kFlags),
      engine(), hint, allow_empty);
}

// Whether this oneDNN implements the op for dtype `act` (asked once per
// pass and dtype on a small shape).
bool implemented(Pass pass, DType act) {
  static std::map<std::pair<Pass, DType>, bool> known;
  const auto key = std::make_pair(pass, act);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const Shape s{4, 64, act, DType::f32};
  bool ok = false;
  try {
    const auto fwd = forward_pd(s, true);
    ok = fwd.get(true) != nullptr;
    if (ok && pass == Pass::backward) ok = backward_pd(s, fwd, true).get(true) != nullptr;
  } catch (const dnnl::error&) {
    ok = false;
  }
  return known[key] = ok;
}

std::optional<DType> onednn_param_dtype(const Op& op, DType act) {
  if (op.norm != NormKind::layer_norm) return std::nullopt;
  if (op.pass != Pass::forward && op.pass != Pass::backward) return std::nullopt;
  if (!implemented(op.pass, act)) return std::nullopt;
  return DType::f32;
}

// One primitive and, per buffer set, its argument map over the bench's
// buffers (oneDNN wraps them; it copies nothing).
struct Prepared {
  dnnl::primitive prim;
  dnnl::stream stream{engine()};
  std::vector<std::unordered_map<int, memory>> args;
};

Call onednn_prepare(const Op& op, const Shape& s, std::span<const Tensors> sets) {
  auto p = std::make_shared<Prepared>();
  const Descs d = descs(s);
  const auto fwd = forward_pd(s, false);
  const auto wrap = [](const memory::desc& md, std::byte* ptr) {
    return memory(md, engine(), static_cast<void*>(ptr));
  };
  if (op.pass == Pass::forward) {
    p->prim = LnFwd(fwd);
    for (const Tensors& t : sets)
      p->args.push_back({{DNNL_ARG_SRC, wrap(d.data, t[Array::x])},
                         {DNNL_ARG_DST, wrap(d.data, t[Array::y])},
                         {DNNL_ARG_MEAN, wrap(d.stat, t[Array::mean])},
                         {DNNL_ARG_VARIANCE, wrap(d.stat, t[Array::rstd])},
                         {DNNL_ARG_SCALE, wrap(d.param, t[Array::weight])},
                         {DNNL_ARG_SHIFT, wrap(d.param, t[Array::bias])}});
  } else {
    p->prim = LnBwd(backward_pd(s, fwd, false));
    for (const Tensors& t : sets)
      p->args.push_back({{DNNL_ARG_SRC, wrap(d.data, t[Array::x])},
                         {DNNL_ARG_DIFF_DST, wrap(d.data, t[Array::dy])},
                         {DNNL_ARG_MEAN, wrap(d.stat, t[Array::mean])},
                         {DNNL_ARG_VARIANCE, wrap(d.stat, t[Array::rstd])},
                         {DNNL_ARG_SCALE, wrap(d.param, t[Array::weight])},
                         // oneDNN 2.x refuses to run without a shift argument
                         // when use_shift is set, though the backward never
                         // reads it; the weight buffer stands in.
                         {DNNL_ARG_SHIFT, wrap(d.param, t[Array::weight])},
                         {DNNL_ARG_DIFF_SRC, wrap(d.data, t[Array::dx])},
                         {DNNL_ARG_DIFF_SCALE, wrap(d.param, t[Array::dweight])},
                         {DNNL_ARG_DIFF_SHIFT, wrap(d.param, t[Array::dbias])}});
  }
  return [p](std::int64_t set) {
    p->prim.execute(p->stream, p->args[static_cast<std::size_t>(set)]);
    p->stream.wait();
  };
}

}  // namespace

const Impl kOneDnnImpl{"onednn", "oneDNN layer_normalization (scale+shift in f32), OpenMP threads",
                       true, true, true, onednn_param_dtype, onednn_prepare};

std::string_view onednn_version() {
  static const std::string v = [] {
    const dnnl_version_t* ver = dnnl::version();
    return std::to_string(ver->major) + "." + std::to_string(ver->minor) + "." +
           std::to_string(ver->patch);
  }();
  return v;
}

}  // namespace normkit::bench
