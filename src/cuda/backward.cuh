// The CUDA backward: LayerNorm and RMSNorm, plain or fused (dh_out), for one
// (dy, xin, weight) storage-type combination per instantiation
// (backward_*.cu). See launch_plan.hpp for the mapping.
//
// Per row, with x̂ = (x − mean)·rstd (mean = 0 for RMSNorm) and
// g = (offset + weight)·dy, a team holds x̂ and g of its packs in registers:
//   * Σg and Σg·x̂ over the row (the split mapping: per segment, stored by
//     phase `stats`, combined in segment order by phase `apply`);
//   * dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) + dh_out, written once;
//   * dy·x̂ and dy added to the thread's own partial sums of dweight and
//     dbias, which stay in registers across the rows of its partition.
// When the block's rows are done, its partial row is written to scratch
// (warp teams first add theirs in shared memory, in team order), and
// reduce_partials sums the partitions in order, in f64. Rows are split
// among blocks by partition_begin, fixed by the shape and the SM count: no
// atomics, the same bits on every run.
// Shapes: dy, xin, dh_out, dx: (rows, D); mean, rstd: (rows); weight,
// dweight, dbias: (D).
#pragma once

#include <cstdint>

#include "cuda/forward.cuh"
#include "cuda/launch_plan.hpp"
#include "cuda/storage.cuh"
#include "cuda/team.cuh"

namespace normkit::detail::cuda {

template <class TD, class TI, class TW>
struct BackwardParams {
  using C = compute_t<TD>;
  std::int64_t rows, D;
  const TD* dy;
  std::int64_t dy_stride;
  const TI* xin;
  std::int64_t xin_stride;
  const TI* dh_out;  // optional
  std::int64_t dh_out_stride;
  const C* mean;  // LayerNorm only
  const C* rstd;
  const TW* weight;  // null: gain 1
  double weight_offset;
  TI* dx;
  std::int64_t dx_stride;
  C* pdw;  // (partitions, D) partial sums, or null
  C* pdb;
  C* seg;  // split_row: (rows, chunks, 2) segment sums
  std::int64_t partitions;  // 0: no parameter gradients, rows stride over the grid
  std::int64_t chunk_elems;
  int chunks;
  int packs_per_thread;
  Phase phase;
  bool layer, warp_team, vec;
};

// x̂ = (x·s − mean·s)·(rstd/s) with s = 2^ilogb(rstd), lowered to keep
// mean·s far from overflow: the rounding of (x − mean)·rstd for ordinary
// rows, but x − mean cannot overflow for rows near the top of the range (as
// XhatMap in src/cpu/backward.cc).
template <class C>
struct XhatMap {
  C s, ms, rs;
  __device__ __forceinline__ XhatMap(double mean, double rstd) {
    int e = 0;
    if (isfinite(rstd) && rstd > 0) e = ilogb(rstd);
    const double room = static_cast<double>(largest<C>()) / 4;
    if (fabs(mean) > 0 && isfinite(mean)) e = min(e, ilogb(room / fabs(mean)));
    const double scale = ldexp(1.0, e);
    s = static_cast<C>(scale);
    ms = static_cast<C>(mean * scale);
    rs = static_cast<C>(rstd / scale);
  }
  __device__ __forceinline__ C operator()(C x) const { return (x * s - ms) * rs; }
};

template <class TD, class TI, class TW>
__global__ void __launch_bounds__(kMaxThreads) backward_kernel(const BackwardParams<TD, TI, TW> p) {
  using C = compute_t<TD>;
  constexpr int N = pack_elems(sizeof(TD));
  constexpr int kPacks = max_packs(true, sizeof(TD));
  __shared__ TeamShared<C> sh;
  extern __shared__ unsigned char team_partials[];  // warp teams: (grads, D) of C
  const Team t = make_team(p.warp_team);
  const int chunk = static_cast<int>(blockIdx.y);
  const std::int64_t c0 = static_cast<std::int64_t>(chunk) * p.chunk_elems;
  const std::int64_t n = min64(p.chunk_elems, p.D - c0);
  const bool params = p.partitions > 0 && p.phase != Phase::stats;
  std::int64_t first, end, step;
  if (p.partitions > 0) {
    first = partition_begin(blockIdx.x, p.partitions, p.rows) + t.index;
    end = partition_begin(blockIdx.x + 1, p.partitions, p.rows);
    step = t.per_block;
  } else {
    first = static_cast<std::int64_t>(blockIdx.x) * t.per_block + t.index;
    end = p.rows;
    step = static_cast<std::int64_t>(gridDim.x) * t.per_block;
  }
  const C off = static_cast<C>(p.weight_offset);

  C dw[kPacks][N], db[kPacks][N];  // this thread's partial sums
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) dw[i][j] = db[i][j] = C(0);

  for (std::int64_t row = first; row < end; row += step) {
    const XhatMap<C> xhat_of(p.layer ? static_cast<double>(p.mean[row]) : 0.0, static_cast<double>(p.rstd[row]));
    C xh[kPacks][N], g[kPacks][N], d[kPacks][N];
    C sg = 0, sgx = 0;
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const std::int64_t e = static_cast<std::int64_t>(t.lane + i * t.size) * N;
      if (i >= p.packs_per_thread || e >= n) {
#pragma unroll
        for (int j = 0; j < N; ++j) xh[i][j] = g[i][j] = d[i][j] = C(0);
        continue;
      }
      C x[N], w[N];
      load_at<N>(p.dy + element_offset(row, p.dy_stride, c0), e, n, p.vec, d[i]);
      load_at<N>(p.xin + element_offset(row, p.xin_stride, c0), e, n, p.vec, x);
      if (p.weight) {
        load_at<N>(p.weight + c0, e, n, p.vec, w);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) w[j] = C(1);
      }
#pragma unroll
      for (int j = 0; j < N; ++j) {
        // Elements past the segment contribute exactly 0, even for rstd = Inf.
        xh[i][j] = e + j < n ? xhat_of(x[j]) : C(0);
        g[i][j] = (w[j] + off) * d[i][j];
        sg += g[i][j];
        sgx = fma(g[i][j], xh[i][j], sgx);
      }
    }

    double sum_g, sum_gx;
    if (p.phase == Phase::apply) {
      const C* s = p.seg + element_offset(row, 2 * p.chunks, 0);
      sum_g = 0;
      sum_gx = 0;
      for (int c = 0; c < p.chunks; ++c) {  // in segment order
        sum_g += static_cast<double>(s[2 * c]);
        sum_gx += static_cast<double>(s[2 * c + 1]);
      }
    } else {
      team_sum2(t, sh, sg, sgx);
      if (p.phase == Phase::stats) {
        if (t.lane == 0) {
          C* out = p.seg + element_offset(row, 2 * p.chunks, 2 * chunk);
          out[0] = sg;
          out[1] = sgx;
        }
        continue;
      }
      sum_g = static_cast<double>(sg);
      sum_gx = static_cast<double>(sgx);
    }
    const double Dd = static_cast<double>(p.D);
    const C mg = p.layer ? static_cast<C>(sum_g / Dd) : C(0);
    const C mgx = static_cast<C>(sum_gx / Dd);
    const C r = p.rstd[row];

    // dx may be dy or dh_out: every element is loaded (above, or just here)
    // by the thread that stores it.
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      const std::int64_t e = static_cast<std::int64_t>(t.lane + i * t.size) * N;
      if (i >= p.packs_per_thread || e >= n) continue;
      C out[N], ho[N];
      if (p.dh_out) {
        load_at<N>(p.dh_out + element_offset(row, p.dh_out_stride, c0), e, n, p.vec, ho);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) ho[j] = C(0);
      }
#pragma unroll
      for (int j = 0; j < N; ++j) {
        out[j] = fma(-xh[i][j], mgx, g[i][j] - mg) * r + ho[j];
        if (params) {
          dw[i][j] = fma(d[i][j], xh[i][j], dw[i][j]);
          db[i][j] += d[i][j];
        }
      }
      store_at<N>(p.dx + element_offset(row, p.dx_stride, c0), e, n, p.vec, out);
    }
  }
  if (!params) return;

  // The block's partial row. Warp teams hold partials of the same columns:
  // they are added in shared memory, team after team.
  const int grads = (p.pdw ? 1 : 0) + (p.pdb ? 1 : 0);
  C* acc = reinterpret_cast<C*>(team_partials);
  if (p.warp_team) {
    for (int team = 0; team < t.per_block; ++team) {
      if (t.index == team) {
#pragma unroll
        for (int i = 0; i < kPacks; ++i)
#pragma unroll
          for (int j = 0; j < N; ++j) {
            const std::int64_t col = static_cast<std::int64_t>(t.lane + i * t.size) * N + j;
            if (i >= p.packs_per_thread || col >= n) continue;
            C* a = acc + col;
            C* b = acc + (p.pdw ? n : 0) + col;
            if (p.pdw) *a = team == 0 ? dw[i][j] : *a + dw[i][j];
            if (p.pdb) *b = team == 0 ? db[i][j] : *b + db[i][j];
          }
      }
      __syncthreads();
    }
    for (std::int64_t col = threadIdx.x; col < n * grads; col += blockDim.x) {
      const bool is_db = p.pdw == nullptr || col >= n;
      C* dst = is_db ? p.pdb : p.pdw;
      dst[element_offset(blockIdx.x, p.D, c0 + (col % n))] = acc[col];
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const std::int64_t col = static_cast<std::int64_t>(t.lane + i * t.size) * N + j;
      if (i >= p.packs_per_thread || col >= n) continue;
      if (p.pdw) p.pdw[element_offset(blockIdx.x, p.D, c0 + col)] = dw[i][j];
      if (p.pdb) p.pdb[element_offset(blockIdx.x, p.D, c0 + col)] = db[i][j];
    }
}

// out[j] = Σ_p partial[p][j] over the partitions in order, in f64, rounded
// to the gradient's dtype. A block covers 32 columns; its 8 rows of threads
// take every 8th partition, and their sums are added in row order.
template <class C, class TW>
__global__ void reduce_partials(const C* partial, std::int64_t partitions, std::int64_t D, TW* out) {
  __shared__ double part[8][33];
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  double s = 0;
  if (col < D)
    for (std::int64_t q = threadIdx.y; q < partitions; q += 8) s += static_cast<double>(partial[element_offset(q, D, col)]);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= D) return;
  double total = part[0][threadIdx.x];
  for (int k = 1; k < 8; ++k) total += part[k][threadIdx.x];
  out[col] = narrow<TW>(static_cast<C>(total));
}

template <class TD, class TI, class TW>
int launch_backward(const BackwardArgs& a, const Plan& plan, cudaStream_t stream, void* scratch) {
  using C = compute_t<TD>;
  BackwardParams<TD, TI, TW> p;
  p.rows = a.rows;
  p.D = a.D;
  p.dy = static_cast<const TD*>(a.dy);
  p.dy_stride = a.dy_stride;
  p.xin = static_cast<const TI*>(a.xin);
  p.xin_stride = a.xin_stride;
  p.dh_out = static_cast<const TI*>(a.dh_out);
  p.dh_out_stride = a.dh_out_stride;
  p.mean = static_cast<const C*>(a.mean);
  p.rstd = static_cast<const C*>(a.rstd);
  p.weight = static_cast<const TW*>(a.weight);
  p.weight_offset = a.weight_offset;
  p.dx = static_cast<TI*>(a.dx);
  p.dx_stride = a.dx_stride;
  auto* base = static_cast<unsigned char*>(scratch);
  p.seg = reinterpret_cast<C*>(base);
  C* partials = reinterpret_cast<C*>(base + plan.stats_bytes);
  const std::int64_t part = plan.partitions * a.D;
  p.pdw = a.dweight ? partials : nullptr;
  p.pdb = a.dbias ? partials + (a.dweight ? part : 0) : nullptr;
  p.partitions = (a.dweight || a.dbias) ? plan.partitions : 0;
  p.chunk_elems = plan.chunk_elems;
  p.chunks = plan.chunks;
  p.packs_per_thread = plan.packs_per_thread;
  p.layer = a.kind == NormKind::layer_norm;
  p.warp_team = plan.mapping == Mapping::warp_per_row;
  p.vec = vector_aligned(a.dy, a.dy_stride, sizeof(TD)) && vector_aligned(a.xin, a.xin_stride, sizeof(TI)) &&
          vector_aligned(a.dh_out, a.dh_out_stride, sizeof(TI)) && vector_aligned(a.dx, a.dx_stride, sizeof(TI)) &&
          vector_aligned(a.weight, 0, sizeof(TW));
  const dim3 grid(static_cast<unsigned>(plan.grid), static_cast<unsigned>(plan.chunks));
  const dim3 block(static_cast<unsigned>(plan.threads));
  if (plan.mapping == Mapping::split_row) {
    p.phase = Phase::stats;
    backward_kernel<TD, TI, TW><<<grid, block, 0, stream>>>(p);
    p.phase = Phase::apply;
  } else {
    p.phase = Phase::full;
  }
  backward_kernel<TD, TI, TW><<<grid, block, plan.shared_bytes, stream>>>(p);
  const dim3 rgrid(static_cast<unsigned>((a.D + 31) / 32)), rblock(32, 8);
  if (p.pdw) reduce_partials<C, TW><<<rgrid, rblock, 0, stream>>>(p.pdw, plan.partitions, a.D, static_cast<TW*>(a.dweight));
  if (p.pdb) reduce_partials<C, TW><<<rgrid, rblock, 0, stream>>>(p.pdb, plan.partitions, a.D, static_cast<TW*>(a.dbias));
  return static_cast<int>(cudaGetLastError());
}

// A 16-bit activation dtype T: xin, dh_out and dx (the residual stream of
// the fused op) and the parameters each in T or f32, as the call's dtypes say.
template <class T>
int launch_backward_16bit(const BackwardArgs& a, const Plan& plan, void* stream, void* scratch) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool i32 = a.xin_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (i32 && w32) return launch_backward<T, float, float>(a, plan, s, scratch);
  if (i32) return launch_backward<T, float, T>(a, plan, s, scratch);
  if (w32) return launch_backward<T, T, float>(a, plan, s, scratch);
  return launch_backward<T, T, T>(a, plan, s, scratch);
}

}  // namespace normkit::detail::cuda
