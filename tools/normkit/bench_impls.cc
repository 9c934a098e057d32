// The normkit implementation (the public API) and the registry.
#include "bench_impls.hpp"

#include <omp.h>

#include <vector>

#include "measure/stream.hpp"
#include "normkit/ops.hpp"
#include "normkit/threading.hpp"

namespace normkit::bench {
namespace {

// Views of one buffer set, in the shape's dtypes.
struct Views {
  const Shape& s;
  const Tensors& t;
  Matrix m(Array a) const { return {t[a], s.act, s.rows, s.D, s.D, Device::cpu}; }
  Vector param(Array a) const { return {t[a], s.param, s.D, Device::cpu}; }
  Vector stat(Array a) const { return {t[a], DType::f32, s.rows, Device::cpu}; }
};

// h = x + residual over all rows, on the same threads as the norm: the
// elementwise add a framework runs before a separate norm call. Split into
// one contiguous chunk per thread, 64-byte aligned, as an elementwise kernel
// would; small arrays stay on the calling thread.
void threaded_add(DType t, const void* a, const void* b, void* out, std::int64_t n) {
  const auto size = static_cast<std::int64_t>(dtype_size(t));
  const int nt = num_threads();
  if (nt <= 1 || n * size < (std::int64_t{1} << 16)) {
    add(t, a, b, out, static_cast<std::size_t>(n));
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const std::int64_t align = 64 / size;
    const std::int64_t i = omp_get_thread_num(), k = omp_get_num_threads();
    const std::int64_t begin = (n * i / k) / align * align;
    const std::int64_t end = i + 1 == k ? n : (n * (i + 1) / k) / align * align;
    const auto off = [&](const void* p) { return static_cast<const std::byte*>(p) + begin * size; };
    if (begin < end)
      add(t, off(a), off(b), const_cast<std::byte*>(off(out)), static_cast<std::size_t>(end - begin));
  }
}

std::optional<DType> normkit_param_dtype(const Op&, DType act) { return act; }

Call normkit_prepare(const Op& op, const Shape& s, std::span<const Tensors> sets) {
  return [&op, s, sets](std::int64_t set) {
    const Views v{s, sets[static_cast<std::size_t>(set)]};
    using A = Array;
    const bool ln = op.norm == NormKind::layer_norm;
    switch (op.pass) {
      case Pass::forward:
        if (ln)
          layer_norm(v.m(A::x), v.param(A::weight), v.param(A::bias), kEps, v.m(A::y),
                     v.stat(A::mean), v.stat(A::rstd));
        else
          rms_norm(v.m(A::x), v.param(A::weight), kEps, v.m(A::y), v.stat(A::rstd));
        return;
      case Pass::backward:
        if (ln)
          layer_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::mean), v.stat(A::rstd),
                              v.param(A::weight), v.m(A::dx), v.param(A::dweight),
                              v.param(A::dbias));
        else
          rms_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::rstd), v.param(A::weight),
                            v.m(A::dx), v.param(A::dweight));
        return;
      case Pass::backward_dx:  // no dweight or dbias: the call skips their partial sums
        if (ln)
          layer_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::mean), v.stat(A::rstd),
                              v.param(A::weight), v.m(A::dx));
        else
          rms_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::rstd), v.param(A::weight), v.m(A::dx));
        return;
      case Pass::fused:
        if (ln)
          add_layer_norm(v.m(A::x), v.m(A::residual), v.param(A::weight), v.param(A::bias), kEps,
                         v.m(A::h), v.m(A::y), v.stat(A::mean), v.stat(A::rstd));
        else
          add_rms_norm(v.m(A::x), v.m(A::residual), v.param(A::weight), kEps, v.m(A::h),
                       v.m(A::y), v.stat(A::rstd));
        return;
      case Pass::add_then_norm:
        threaded_add(s.act, v.t[A::x], v.t[A::residual], v.t[A::h], s.rows * s.D);
        if (ln)
          layer_norm(v.m(A::h), v.param(A::weight), v.param(A::bias), kEps, v.m(A::y),
                     v.stat(A::mean), v.stat(A::rstd));
        else
          rms_norm(v.m(A::h), v.param(A::weight), kEps, v.m(A::y), v.stat(A::rstd));
        return;
      case Pass::fused_backward:
        if (ln)
          add_layer_norm_backward(v.m(A::dy), v.m(A::dh_out), v.m(A::x), v.stat(A::mean), v.stat(A::rstd),
                                  v.param(A::weight), v.m(A::dh), v.param(A::dweight), v.param(A::dbias));
        else
          add_rms_norm_backward(v.m(A::dy), v.m(A::dh_out), v.m(A::x), v.stat(A::rstd), v.param(A::weight),
                                v.m(A::dh), v.param(A::dweight));
        return;
      case Pass::backward_then_add:
        if (ln)
          layer_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::mean), v.stat(A::rstd), v.param(A::weight),
                              v.m(A::dx), v.param(A::dweight), v.param(A::dbias));
        else
          rms_norm_backward(v.m(A::dy), v.m(A::x), v.stat(A::rstd), v.param(A::weight), v.m(A::dx),
                            v.param(A::dweight));
        threaded_add(s.act, v.t[A::dx], v.t[A::dh_out], v.t[A::dh], s.rows * s.D);
        return;
    }
  };
}

const Impl kNormkitImpl{"normkit",
                        "the public API (normkit::layer_norm, ...); add_then_*, *_then_add: the norm and a SIMD add",
                        true, false, true, normkit_param_dtype, normkit_prepare};

const std::vector<Impl>& registry() {
  static const std::vector<Impl> all = {
      kNormkitImpl,
      kNaiveImpl,
#ifdef NORMKIT_BENCH_ONEDNN
      kOneDnnImpl,
#endif
  };
  return all;
}

}  // namespace

std::optional<DType> cell_param_dtype(const Impl& impl, const Op& op, DType act, bool f32_params) {
  const std::optional<DType> param = impl.param_dtype(op, act);
  if (!f32_params || !param || (act != DType::bf16 && act != DType::f16) || *param == DType::f32) return param;
  return impl.f32_params ? std::optional<DType>(DType::f32) : std::nullopt;
}

std::span<const Impl> impls() { return registry(); }

void set_threads(int n) {
  normkit::set_num_threads(n);
  omp_set_num_threads(n);
}

}  // namespace normkit::bench
