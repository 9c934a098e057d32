// Row statistics of the forward, from a row (or segment) held in registers,
// and the arithmetic that turns them into mean and rstd. The same rules as
// the CPU kernels (src/cpu/forward-inl.hpp), so both meet the bound of
// normkit/ops.hpp:
//   * sums in the compute type (f32; f64 for f64 data), mean and variance
//     finished in f64;
//   * LayerNorm is two-pass over the registers: Σx gives a first mean m,
//     then e = Σ(x − m), q = Σ(x − m)² give mean = m + e/n, M2 = q − e²/n,
//     so a large common offset costs no digits and x is still read once;
//   * a rescue when the sums overflow with finite inputs (|x| ~ 1e20 in
//     f32) or underflow (subnormal rows): the row is scaled by a power of
//     two that puts its largest |x| in [0.5, 1) and summed again. It is a
//     uniform branch, taken by no ordinary row.
#pragma once

#include <cfloat>
#include <cstdint>

#include "cuda/team.cuh"

namespace normkit::detail::cuda {

// Below this, var + eps may have lost digits to underflow in the squares
// (see kTinyVariance in src/cpu/forward-inl.hpp).
template <class C>
__device__ __forceinline__ double tiny_variance() {
  if constexpr (sizeof(C) == 8) return DBL_MIN * 0x1p24 * 0x1p24 * 0x1p29 * 0x1p29;
  else return static_cast<double>(FLT_MIN) * 0x1p24 * 0x1p24;
}

template <class C>
__device__ __forceinline__ C largest() {
  if constexpr (sizeof(C) == 8) return DBL_MAX;
  else return FLT_MAX;
}

// Statistics of x·2^-k over n elements: mean_s and M2 = Σ(x·2^-k − mean_s)²
// (RMSNorm: mean_s = 0, M2 = Σ(x·2^-k)²).
struct SegmentStats {
  double mean_s = 0, m2_s = 0;
  int k = 0;
};

// Pass over the registers v (kPacks packs of N; element j of pack i is at
// segment element (lane + i·size)·N + j, valid when below n) with scale s.
template <int kPacks, int N, class C>
__device__ __forceinline__ SegmentStats sums_of(const Team& t, TeamShared<C>& sh, const C (&v)[kPacks][N],
                                                std::int64_t n, bool layer, C s) {
  SegmentStats st;
  const double nd = static_cast<double>(n);
  if (!layer) {
    C q = 0;
#pragma unroll
    for (int i = 0; i < kPacks; ++i)
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const C u = v[i][j] * s;  // padding is 0
        q = fma(u, u, q);
      }
    st.m2_s = static_cast<double>(team_sum(t, sh, q));
    return st;
  }
  C sum = 0;
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) sum += v[i][j] * s;
  const C m = static_cast<C>(static_cast<double>(team_sum(t, sh, sum)) / nd);
  C e = 0, q = 0;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const std::int64_t base = static_cast<std::int64_t>(t.lane + i * t.size) * N;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const C d = base + j < n ? v[i][j] * s - m : C(0);
      e += d;
      q = fma(d, d, q);
    }
  }
  team_sum2(t, sh, e, q);
  const double ed = static_cast<double>(e);
  st.mean_s = static_cast<double>(m) + ed / nd;
  st.m2_s = static_cast<double>(q) - ed * ed / nd;
  return st;
}

// The statistics of a segment, rescued when needed. `eps` joins the
// underflow test for a whole row; a segment of a split row passes 0.
template <int kPacks, int N, class C>
__device__ __forceinline__ SegmentStats segment_stats(const Team& t, TeamShared<C>& sh,
                                                      const C (&v)[kPacks][N], std::int64_t n, bool layer,
                                                      double eps) {
  SegmentStats st = sums_of(t, sh, v, n, layer, C(1));
  const bool finite = isfinite(st.mean_s) && isfinite(st.m2_s);
  if (finite && !(st.m2_s / static_cast<double>(n) + eps < tiny_variance<C>())) return st;
  C amax = 0;
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) amax = MaxKeepNan{}(amax, abs(v[i][j]));
  amax = team_max(t, sh, amax);
  // Non-finite sums of a row holding NaN or Inf stay as they are; a row of
  // zeros has nothing to scale.
  if (!isfinite(amax) || !(amax > 0)) return st;
  constexpr int kMaxExp = (sizeof(C) == 8 ? 1024 : 128) - 2;
  const int k = min(max(ilogb(static_cast<double>(amax)) + 1, -kMaxExp), kMaxExp);
  st = sums_of(t, sh, v, n, layer, static_cast<C>(ldexp(1.0, -k)));
  st.k = k;
  return st;
}

// What the output pass needs: x̂ = (x·s − m)·r, and the saved statistics.
template <class C>
struct Normalizer {
  C s, m, r;
  C mean_out, rstd_out;
};

// From statistics of x·scale (scale = 2^-k, var_s = M2_s / D): the rstd of
// the scaled row, clamped to the compute type's range, and the true mean and
// rstd to save. As NormalizeRow in src/cpu/forward-inl.hpp.
template <class C>
__device__ __forceinline__ Normalizer<C> normalizer(double mean_s, double var_s, int k, double eps) {
  const double scale = ldexp(1.0, -k);
  const double eps_s = eps * scale * scale;
  // If eps·s² overflows, var_s is negligible next to it.
  const double rstd_s = isfinite(eps_s) ? 1.0 / sqrt(var_s + eps_s) : 1.0 / (sqrt(eps) * scale);
  // A scaled variance of exactly 0 is a constant row: its true rstd is
  // 1/sqrt(eps), not rstd_s·s (Inf when eps·s² underflowed).
  const double rstd_true = var_s == 0.0 ? 1.0 / sqrt(eps) : rstd_s * scale;
  const C r = isfinite(rstd_true) ? static_cast<C>(fmin(rstd_s, static_cast<double>(largest<C>())))
                                  : static_cast<C>(rstd_s);
  Normalizer<C> z;
  z.s = static_cast<C>(scale);
  z.m = static_cast<C>(mean_s);
  z.r = r;
  z.mean_out = k == 0 ? z.m : static_cast<C>(mean_s / scale);
  z.rstd_out = k == 0 ? r : static_cast<C>(rstd_true);
  return z;
}

// The statistics of a split row from its segments' (mean_s, M2_s, k), in
// segment order: each is brought to the largest segment's scale (a power of
// two; a segment far smaller than another loses only what cannot matter
// next to it), then combined as Chan et al.: M2 = Σ M2_c + Σ n_c·(mean_c −
// mean)². Every thread of the row computes the same, from the same values.
template <class C>
__device__ __forceinline__ Normalizer<C> combine_segments(const C* seg, int chunks, std::int64_t chunk_elems,
                                                          std::int64_t D, bool layer, double eps) {
  int K = -100000;
  for (int c = 0; c < chunks; ++c) K = max(K, static_cast<int>(seg[3 * c + 2]));
  double sum = 0;
  for (int c = 0; c < chunks; ++c) {
    const double n_c = static_cast<double>(min64(chunk_elems, D - c * chunk_elems));
    sum += n_c * ldexp(static_cast<double>(seg[3 * c]), static_cast<int>(seg[3 * c + 2]) - K);
  }
  const double mean = layer ? sum / static_cast<double>(D) : 0.0;
  double m2 = 0;
  for (int c = 0; c < chunks; ++c) {
    const int dk = static_cast<int>(seg[3 * c + 2]) - K;
    const double n_c = static_cast<double>(min64(chunk_elems, D - c * chunk_elems));
    m2 += ldexp(static_cast<double>(seg[3 * c + 1]), 2 * dk);
    if (layer) {
      const double d = ldexp(static_cast<double>(seg[3 * c]), dk) - mean;
      m2 += n_c * d * d;
    }
  }
  return normalizer<C>(mean, m2 / static_cast<double>(D), K, eps);
}

}  // namespace normkit::detail::cuda
