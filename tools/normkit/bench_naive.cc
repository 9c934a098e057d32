// The baseline: LayerNorm and RMSNorm as a user first writes them from the
// formulas — one row at a time, a pass for the mean, a pass for the
// variance, a pass for the output, float accumulators, one thread, scalar
// conversions for the 16-bit types. Nothing here is tuned; it is compiled
// with the project's flags like any user code, and the compiler may
// vectorize what it can prove safe (not the float sums: that would reorder
// them).
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_impls.hpp"
#include "normkit/half.hpp"

namespace normkit::bench {
namespace {

float load(const float* p, std::int64_t i) { return p[i]; }
float load(const bfloat16_t* p, std::int64_t i) { return to_float(p[i]); }
float load(const half_t* p, std::int64_t i) { return to_float(p[i]); }
void store(float* p, std::int64_t i, float v) { p[i] = v; }
void store(bfloat16_t* p, std::int64_t i, float v) { p[i] = to_bf16(v); }
void store(half_t* p, std::int64_t i, float v) { p[i] = to_f16(v); }

// x, y: (rows, D); weight, bias: (D); mean, rstd: (rows).
template <class T>
void layer_norm(const T* x, const T* weight, const T* bias, float eps, T* y, float* mean,
                float* rstd, std::int64_t rows, std::int64_t D) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    float sum = 0;
    for (std::int64_t i = 0; i < D; ++i) sum += load(xr, i);
    const float m = sum / static_cast<float>(D);
    float sq = 0;
    for (std::int64_t i = 0; i < D; ++i) {
      const float d = load(xr, i) - m;
      sq += d * d;
    }
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(D) + eps);
    for (std::int64_t i = 0; i < D; ++i)
      store(yr, i, (load(xr, i) - m) * s * load(weight, i) + load(bias, i));
    mean[r] = m;
    rstd[r] = s;
  }
}

template <class T>
void rms_norm(const T* x, const T* weight, float eps, T* y, float* rstd, std::int64_t rows,
              std::int64_t D) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    float sq = 0;
    for (std::int64_t i = 0; i < D; ++i) sq += load(xr, i) * load(xr, i);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(D) + eps);
    for (std::int64_t i = 0; i < D; ++i) store(yr, i, load(xr, i) * s * load(weight, i));
    rstd[r] = s;
  }
}

// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) [+ dh_out], g = weight·dy,
// x̂ = (x − mean)·rstd; dweight = Σ_rows dy·x̂, dbias = Σ_rows dy. For RMSNorm
// mean is 0 and the mean(g) term is absent. dh_out: null, or added before
// dx is rounded (the fused backward). dweight: null for dx alone.
// acc_w, acc_b: (D) float accumulators.
template <class T>
void norm_backward(bool layer, const T* dy, const T* x, const float* mean, const float* rstd,
                   const T* weight, const T* dh_out, T* dx, T* dweight, T* dbias, std::int64_t rows,
                   std::int64_t D, std::vector<float>& acc_w, std::vector<float>& acc_b) {
  const bool params = dweight != nullptr;
  acc_w.assign(static_cast<std::size_t>(params ? D : 0), 0.0f);
  acc_b.assign(static_cast<std::size_t>(params ? D : 0), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* dyr = dy + r * D;
    const T* xr = x + r * D;
    T* dxr = dx + r * D;
    const float m = layer ? mean[r] : 0.0f, s = rstd[r];
    float sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < D; ++i) {
      const float xh = (load(xr, i) - m) * s;
      const float g = load(weight, i) * load(dyr, i);
      sum_g += g;
      sum_gx += g * xh;
      if (params) {
        acc_w[static_cast<std::size_t>(i)] += load(dyr, i) * xh;
        acc_b[static_cast<std::size_t>(i)] += load(dyr, i);
      }
    }
    const float mg = layer ? sum_g / static_cast<float>(D) : 0.0f;
    const float mgx = sum_gx / static_cast<float>(D);
    for (std::int64_t i = 0; i < D; ++i) {
      const float xh = (load(xr, i) - m) * s;
      const float extra = dh_out ? load(dh_out + r * D, i) : 0.0f;
      store(dxr, i, s * (load(weight, i) * load(dyr, i) - mg - xh * mgx) + extra);
    }
  }
  for (std::int64_t i = 0; params && i < D; ++i) {
    store(dweight, i, acc_w[static_cast<std::size_t>(i)]);
    if (layer) store(dbias, i, acc_b[static_cast<std::size_t>(i)]);
  }
}

template <class T>
void add(const T* a, const T* b, T* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) store(out, i, load(a, i) + load(b, i));
}

template <class T>
Call prepare_typed(const Op& op, const Shape& s, std::span<const Tensors> sets) {
  // The gradient accumulators live with the prepared call, as a user would
  // keep a scratch buffer, so the timed call does not allocate.
  auto acc_w = std::make_shared<std::vector<float>>(), acc_b = std::make_shared<std::vector<float>>();
  return [&op, s, sets, acc_w, acc_b](std::int64_t set) {
    const Tensors& t = sets[static_cast<std::size_t>(set)];
    const auto at = [&t](Array a) { return reinterpret_cast<T*>(t[a]); };
    const auto stat = [&t](Array a) { return reinterpret_cast<float*>(t[a]); };
    const bool ln = op.norm == NormKind::layer_norm;
    const auto eps = static_cast<float>(kEps);
    const auto norm = [&](const T* x, std::int64_t rows, std::int64_t row0) {
      if (ln)
        layer_norm(x, at(Array::weight), at(Array::bias), eps, at(Array::y) + row0 * s.D,
                   stat(Array::mean) + row0, stat(Array::rstd) + row0, rows, s.D);
      else
        rms_norm(x, at(Array::weight), eps, at(Array::y) + row0 * s.D, stat(Array::rstd) + row0,
                 rows, s.D);
    };
    switch (op.pass) {
      case Pass::forward:
        norm(at(Array::x), s.rows, 0);
        return;
      case Pass::backward:
        norm_backward(ln, at(Array::dy), at(Array::x), stat(Array::mean), stat(Array::rstd),
                      at(Array::weight), static_cast<const T*>(nullptr), at(Array::dx), at(Array::dweight),
                      at(Array::dbias), s.rows, s.D, *acc_w, *acc_b);
        return;
      case Pass::backward_dx:
        norm_backward(ln, at(Array::dy), at(Array::x), stat(Array::mean), stat(Array::rstd),
                      at(Array::weight), static_cast<const T*>(nullptr), at(Array::dx),
                      static_cast<T*>(nullptr), static_cast<T*>(nullptr), s.rows, s.D, *acc_w, *acc_b);
        return;
      case Pass::fused:  // a row's add, then that row's norm
        for (std::int64_t r = 0; r < s.rows; ++r) {
          T* hr = at(Array::h) + r * s.D;
          add(at(Array::x) + r * s.D, at(Array::residual) + r * s.D, hr, s.D);
          norm(hr, 1, r);
        }
        return;
      case Pass::add_then_norm:
        add(at(Array::x), at(Array::residual), at(Array::h), s.rows * s.D);
        norm(at(Array::h), s.rows, 0);
        return;
      case Pass::fused_backward:  // dh_out added to each element before it is stored
        norm_backward(ln, at(Array::dy), at(Array::x), stat(Array::mean), stat(Array::rstd),
                      at(Array::weight), at(Array::dh_out), at(Array::dh), at(Array::dweight),
                      at(Array::dbias), s.rows, s.D, *acc_w, *acc_b);
        return;
      case Pass::backward_then_add:
        norm_backward(ln, at(Array::dy), at(Array::x), stat(Array::mean), stat(Array::rstd),
                      at(Array::weight), static_cast<const T*>(nullptr), at(Array::dx), at(Array::dweight),
                      at(Array::dbias), s.rows, s.D, *acc_w, *acc_b);
        add(at(Array::dx), at(Array::dh_out), at(Array::dh), s.rows * s.D);
        return;
    }
  };
}

std::optional<DType> naive_param_dtype(const Op&, DType act) {
  if (act == DType::f64) return std::nullopt;
  return act;
}

Call naive_prepare(const Op& op, const Shape& s, std::span<const Tensors> sets) {
  switch (s.act) {
    case DType::bf16: return prepare_typed<bfloat16_t>(op, s, sets);
    case DType::f16: return prepare_typed<half_t>(op, s, sets);
    default: return prepare_typed<float>(op, s, sets);
  }
}

}  // namespace

const Impl kNaiveImpl{"naive",
                      "baseline: the two-pass scalar loops of the formulas, float sums, 1 thread",
                      false, false, false, naive_param_dtype, naive_prepare};

}  // namespace normkit::bench
