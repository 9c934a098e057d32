// The CUDA forward: LayerNorm and RMSNorm, plain or fused with the residual
// add, for one (x, residual, weight) storage-type combination per
// instantiation (forward_*.cu). See launch_plan.hpp for the mapping.
//
// Per row (or, split_row, per segment of a row) a team of threads:
//   1. loads its packs of x into registers (fused: h = x + residual, rounded
//      to h's dtype and stored, and the registers keep h as stored);
//   2. takes the statistics from the registers (row_stats.cuh);
//   3. writes y = x̂·(w + offset) + b from the registers, x̂ = (x·s − m)·r.
// split_row runs the kernel twice: phase `stats` does 1–2 for every segment
// and stores (mean_s, M2_s, k) per (row, segment); phase `apply` re-reads x
// (or h) and combines the row's segments before 3. x is then read twice.
// Shapes: x, residual, h, y: (rows, D); weight, bias: (D); mean, rstd: (rows).
#pragma once

#include <cstdint>

#include "cpu/kernels.hpp"
#include "cuda/launch_plan.hpp"
#include "cuda/row_stats.cuh"
#include "cuda/storage.cuh"
#include "cuda/team.cuh"

namespace normkit::detail::cuda {

enum class Phase : int { full = 0, stats = 1, apply = 2 };

template <class TX, class TR, class TW>
struct ForwardParams {
  using C = compute_t<TX>;
  std::int64_t rows, D;
  const TX* x;
  std::int64_t x_stride;
  const TR* residual;  // null: the plain op
  std::int64_t residual_stride;
  TR* h;
  std::int64_t h_stride;
  TX* y;
  std::int64_t y_stride;
  const TW* weight;  // null: gain 1
  const TW* bias;    // null: 0
  double weight_offset, eps;
  C* mean;  // optional
  C* rstd;  // optional
  C* seg;   // split_row: (rows, chunks, 3) segment statistics
  std::int64_t chunk_elems;
  int chunks;
  int packs_per_thread;
  Phase phase;
  bool layer, warp_team, vec;
};

template <class TX, class TR, class TW>
__global__ void __launch_bounds__(kMaxThreads) forward_kernel(const ForwardParams<TX, TR, TW> p) {
  using C = compute_t<TX>;
  constexpr int N = pack_elems(sizeof(TX));
  constexpr int kPacks = max_packs(false, sizeof(TX));
  __shared__ TeamShared<C> sh;
  const Team t = make_team(p.warp_team);
  const int chunk = static_cast<int>(blockIdx.y);
  const std::int64_t c0 = static_cast<std::int64_t>(chunk) * p.chunk_elems;
  const std::int64_t n = min64(p.chunk_elems, p.D - c0);  // elements of this segment
  const bool fused = p.residual != nullptr;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * t.per_block + t.index;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * t.per_block;

  for (std::int64_t row = first; row < p.rows; row += step) {
    // 1. The segment into registers.
    C v[kPacks][N];
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const std::int64_t e = static_cast<std::int64_t>(t.lane + i * t.size) * N;
      if (i >= p.packs_per_thread || e >= n) {
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = C(0);
        continue;
      }
      if (fused && p.phase == Phase::apply) {
        load_at<N>(p.h + element_offset(row, p.h_stride, c0), e, n, p.vec, v[i]);
      } else if (fused) {
        C r[N];
        load_at<N>(p.x + element_offset(row, p.x_stride, c0), e, n, p.vec, v[i]);
        load_at<N>(p.residual + element_offset(row, p.residual_stride, c0), e, n, p.vec, r);
        // Both are loaded before h is stored: h may be x or residual.
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = static_cast<C>(widen(narrow<TR>(v[i][j] + r[j])));
        store_at<N>(p.h + element_offset(row, p.h_stride, c0), e, n, p.vec, v[i]);
      } else {
        load_at<N>(p.x + element_offset(row, p.x_stride, c0), e, n, p.vec, v[i]);
      }
    }

    // 2. Statistics.
    Normalizer<C> z;
    if (p.phase == Phase::apply) {
      z = combine_segments<C>(p.seg + element_offset(row, 3 * p.chunks, 0), p.chunks, p.chunk_elems, p.D,
                              p.layer, p.eps);
    } else {
      const SegmentStats st = segment_stats(t, sh, v, n, p.layer, p.phase == Phase::full ? p.eps : 0.0);
      if (p.phase == Phase::stats) {
        if (t.lane == 0) {
          C* out = p.seg + element_offset(row, 3 * p.chunks, 3 * chunk);
          out[0] = static_cast<C>(st.mean_s);
          out[1] = static_cast<C>(st.m2_s);
          out[2] = static_cast<C>(st.k);
        }
        continue;
      }
      z = normalizer<C>(st.mean_s, st.m2_s / static_cast<double>(n), st.k, p.eps);
    }
    if (t.lane == 0 && chunk == 0) {
      if (p.mean && p.layer) p.mean[row] = z.mean_out;
      if (p.rstd) p.rstd[row] = z.rstd_out;
    }

    // 3. y from the registers. y may be x: each element is loaded (above)
    // by the thread that stores it.
    const C off = static_cast<C>(p.weight_offset);
    const C m = p.layer ? z.m : C(0);
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const std::int64_t e = static_cast<std::int64_t>(t.lane + i * t.size) * N;
      if (i >= p.packs_per_thread || e >= n) continue;
      C w[N], b[N];
      if (p.weight) {
        load_at<N>(p.weight + c0, e, n, p.vec, w);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) w[j] = C(1);
      }
      if (p.layer && p.bias) {
        load_at<N>(p.bias + c0, e, n, p.vec, b);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) b[j] = C(0);
      }
      C out[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const C xhat = (v[i][j] * z.s - m) * z.r;
        const C g = w[j] + off;
        out[j] = p.layer ? fma(xhat, g, b[j]) : xhat * g;
      }
      store_at<N>(p.y + element_offset(row, p.y_stride, c0), e, n, p.vec, out);
    }
  }
}

// Launches the forward of one storage-type combination with plan `plan`;
// returns the launch's cudaError_t (0: queued).
template <class TX, class TR, class TW>
int launch_forward(const ForwardArgs& a, const Plan& plan, cudaStream_t stream, void* scratch) {
  ForwardParams<TX, TR, TW> p;
  using C = compute_t<TX>;
  p.rows = a.rows;
  p.D = a.D;
  p.x = static_cast<const TX*>(a.x);
  p.x_stride = a.x_stride;
  p.residual = static_cast<const TR*>(a.residual);
  p.residual_stride = a.residual_stride;
  p.h = static_cast<TR*>(a.h);
  p.h_stride = a.h_stride;
  p.y = static_cast<TX*>(a.y);
  p.y_stride = a.y_stride;
  p.weight = static_cast<const TW*>(a.weight);
  p.bias = static_cast<const TW*>(a.bias);
  p.weight_offset = a.weight_offset;
  p.eps = a.eps;
  p.mean = static_cast<C*>(a.mean);
  p.rstd = static_cast<C*>(a.rstd);
  p.seg = static_cast<C*>(scratch);
  p.chunk_elems = plan.chunk_elems;
  p.chunks = plan.chunks;
  p.packs_per_thread = plan.packs_per_thread;
  p.layer = a.kind == NormKind::layer_norm;
  p.warp_team = plan.mapping == Mapping::warp_per_row;
  p.vec = vector_aligned(a.x, a.x_stride, sizeof(TX)) && vector_aligned(a.y, a.y_stride, sizeof(TX)) &&
          vector_aligned(a.residual, a.residual_stride, sizeof(TR)) &&
          vector_aligned(a.h, a.h_stride, sizeof(TR)) && vector_aligned(a.weight, 0, sizeof(TW)) &&
          vector_aligned(a.bias, 0, sizeof(TW));
  const dim3 grid(static_cast<unsigned>(plan.grid), static_cast<unsigned>(plan.chunks));
  const dim3 block(static_cast<unsigned>(plan.threads));
  if (plan.mapping == Mapping::split_row) {
    p.phase = Phase::stats;
    forward_kernel<TX, TR, TW><<<grid, block, 0, stream>>>(p);
    p.phase = Phase::apply;
  } else {
    p.phase = Phase::full;
  }
  forward_kernel<TX, TR, TW><<<grid, block, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

// A 16-bit activation dtype T: the residual stream (residual, h) and the
// parameters each in T or f32, as the call's dtypes say.
template <class T>
int launch_forward_16bit(const ForwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool r32 = a.residual && a.res_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (r32 && w32) return launch_forward<T, float, float>(a, plan, s, scratch);
  if (r32) return launch_forward<T, float, T>(a, plan, s, scratch);
  if (w32) return launch_forward<T, T, float>(a, plan, s, scratch);
  return launch_forward<T, T, T>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
