// LayerNorm / RMSNorm backward on the CPU, plain and fused. One Highway
// source compiled for every target, chosen at run time.
//
// Per row, with x̂ = (x − mean)·rstd (mean = 0 for RMSNorm) and
// g = (offset + weight)·dy:
//   pass A (reads dy, x, weight): Σg and Σg·x̂ in chunks, and, when
//          parameter gradients are wanted, the block partials
//          dweight_b += dy·x̂, dbias_b += dy;
//   pass B (re-reads them from cache):
//          dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) + dh_out
//          (mean(g) is 0 for RMSNorm).
// dweight/dbias are summed over a fixed partition of rows into blocks (see
// cpu/scratch.hpp), each block by one thread in row order, then the block
// partials in block order: bitwise identical for any thread count.
// Shapes: dy, xin, dh_out, dx: (rows, D); mean, rstd: (rows); weight,
// dweight, dbias: (D).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/backward.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "cpu/vec-inl.hpp"

#ifndef NORMKIT_CPU_BACKWARD_ONCE_
#define NORMKIT_CPU_BACKWARD_ONCE_
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu/introspect.hpp"
#include "cpu/kernels.hpp"
#include "cpu/pages.hpp"
#include "cpu/parallel.hpp"
#include "cpu/scratch.hpp"
#include "normkit/half.hpp"
#endif

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {
namespace {

// Elements per reduction chunk: partial sums of a chunk stay short (at most
// kChunk / (2·lanes) terms per accumulator) and chunk totals are added in
// double, so the row sums keep ~√D error growth for very wide rows.
constexpr std::size_t kChunk = 2048;

struct RowSums {
  double g = 0, gx = 0;  // Σg, Σg·x̂
};

// x̂ = (x − mean)·rstd, computed as (x·s − mean·s)·(rstd/s) with s a power
// of two: 2^ilogb(rstd), so x·s and mean·s are of the size of x̂, lowered if
// needed to keep mean·s far from overflow. Scaling by a power of two is
// exact, so for ordinary rows this rounds exactly like (x − mean)·rstd; but
// x − mean cannot overflow for rows near the top of the range (bf16/f32
// values ~1e38 of both signs), where the plain form gives Inf.
template <class DC>
struct XhatMap {
  hn::Vec<DC> s, ms, rs;

  XhatMap(DC dc, double mean, double rstd) {
    using C = hn::TFromD<DC>;
    int e = 0;
    if (std::isfinite(rstd) && rstd > 0) e = std::ilogb(rstd);
    constexpr double kRoom = static_cast<double>(std::numeric_limits<C>::max()) / 4;
    if (std::abs(mean) > 0 && std::isfinite(mean)) e = std::min(e, std::ilogb(kRoom / std::abs(mean)));
    const double scale = std::ldexp(1.0, e);
    s = hn::Set(dc, static_cast<C>(scale));
    ms = hn::Set(dc, static_cast<C>(mean * scale));
    rs = hn::Set(dc, static_cast<C>(rstd / scale));
  }
  HWY_INLINE hn::Vec<DC> operator()(hn::Vec<DC> x) const { return hn::Mul(hn::MulSub(x, s, ms), rs); }
};

// Pass A over one chunk. Two accumulators for each of the two sums: four
// independent FMA/add chains, enough to cover the 4-cycle FMA latency.
// kParams: also accumulate dy·x̂ into pdw and dy into pdb (both padded to a
// whole number of vectors).
template <bool kParams, class DC, class TD, class TI, class TW>
HWY_INLINE void ChunkA(DC dc, const TD* HWY_RESTRICT dy, const TI* HWY_RESTRICT x, const TW* HWY_RESTRICT w,
                       std::size_t n, const XhatMap<DC>& xhat_of, hn::Vec<DC> Off,
                       hn::TFromD<DC>* HWY_RESTRICT pdw, hn::TFromD<DC>* HWY_RESTRICT pdb, RowSums& sums) {
  const std::size_t N = hn::Lanes(dc);
  auto g0 = hn::Zero(dc), g1 = hn::Zero(dc), gx0 = hn::Zero(dc), gx1 = hn::Zero(dc);
  auto step = [&](auto dyv, auto xv, auto wv, std::size_t i, auto& gacc, auto& gxacc) HWY_ATTR {
    const auto xhat = xhat_of(xv);
    const auto g = hn::Mul(hn::Add(wv, Off), dyv);
    gacc = hn::Add(gacc, g);
    gxacc = hn::MulAdd(g, xhat, gxacc);
    if constexpr (kParams) {
      hn::Store(hn::MulAdd(dyv, xhat, hn::Load(dc, pdw + i)), dc, pdw + i);
      hn::Store(hn::Add(dyv, hn::Load(dc, pdb + i)), dc, pdb + i);
    }
  };
  std::size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    step(LoadAs(dc, dy + i), LoadAs(dc, x + i), LoadAs(dc, w + i), i, g0, gx0);
    step(LoadAs(dc, dy + i + N), LoadAs(dc, x + i + N), LoadAs(dc, w + i + N), i + N, g1, gx1);
  }
  for (; i + N <= n; i += N) step(LoadAs(dc, dy + i), LoadAs(dc, x + i), LoadAs(dc, w + i), i, g0, gx0);
  if (i < n) {
    // Padding lanes have dy = 0 but x̂ = −mean·rstd, so mask x̂: a padding
    // lane must contribute exactly 0 even when rstd is Inf.
    const std::size_t k = n - i;
    const auto xv = LoadTail(dc, x + i, k);
    const auto mask = hn::FirstN(dc, k);
    const auto dyv = LoadTail(dc, dy + i, k);
    const auto xhat = hn::IfThenElseZero(mask, xhat_of(xv));
    const auto g = hn::Mul(hn::Add(LoadTail(dc, w + i, k), Off), dyv);
    g1 = hn::Add(g1, g);
    gx1 = hn::MulAdd(g, xhat, gx1);
    if constexpr (kParams) {
      hn::Store(hn::MulAdd(dyv, xhat, hn::Load(dc, pdw + i)), dc, pdw + i);
      hn::Store(hn::Add(dyv, hn::Load(dc, pdb + i)), dc, pdb + i);
    }
  }
  sums.g += SumToDouble(dc, hn::Add(g0, g1));
  sums.gx += SumToDouble(dc, hn::Add(gx0, gx1));
}

// What pass B fetches meanwhile (the next row's dy and x, into L2: pass B
// itself reads only cached data) and whether it streams dx past the caches.
struct PassBOpts {
  bool stream = false;
  const char* next_dy = nullptr;
  std::size_t dy_size = 0;
  const char* next_x = nullptr;
  std::size_t x_size = 0;

  HWY_INLINE void prefetch(std::size_t i) const {
    if (next_dy) {
      __builtin_prefetch(next_dy + i * dy_size, 0, 2);
      __builtin_prefetch(next_x + i * x_size, 0, 2);
    }
  }
};

// Pass B: dx = (g − MG − x̂·MGX)·R + dh_out. dx may be dy or dh_out itself
// (in-place): every vector is loaded before the same one is stored.
template <bool kDhOut, class DC, class TD, class TI, class TW>
HWY_INLINE void RowB(DC dc, const TD* dy, const TI* x, const TW* HWY_RESTRICT w, const TI* dh_out, TI* dx,
                     std::size_t D, const XhatMap<DC>& xhat_of, hn::Vec<DC> R, hn::Vec<DC> Off, hn::Vec<DC> MG,
                     hn::Vec<DC> MGX, const PassBOpts& opts) {
  const std::size_t N = hn::Lanes(dc);
  auto one = [&](std::size_t i) HWY_ATTR {
    const auto xhat = xhat_of(LoadAs(dc, x + i));
    const auto g = hn::Mul(hn::Add(LoadAs(dc, w + i), Off), LoadAs(dc, dy + i));
    auto v = hn::Mul(hn::NegMulAdd(xhat, MGX, hn::Sub(g, MG)), R);
    if constexpr (kDhOut) v = hn::Add(v, LoadAs(dc, dh_out + i));
    return v;
  };
  auto partial = [&](std::size_t i, std::size_t k) HWY_ATTR {  // the k < N elements at i
    const auto xhat = xhat_of(LoadTail(dc, x + i, k));
    const auto g = hn::Mul(hn::Add(LoadTail(dc, w + i, k), Off), LoadTail(dc, dy + i, k));
    auto v = hn::Mul(hn::NegMulAdd(xhat, MGX, hn::Sub(g, MG)), R);
    if constexpr (kDhOut) v = hn::Add(v, LoadTail(dc, dh_out + i, k));
    StoreTail(dc, v, dx + i, k);
  };
  std::size_t i = 0;
  if (opts.stream) {
    // Non-temporal stores need aligned addresses: peel up to the first.
    const std::size_t vec_bytes = N * sizeof(TI);
    const std::size_t head =
        std::min(D, ((vec_bytes - reinterpret_cast<std::uintptr_t>(dx) % vec_bytes) % vec_bytes) / sizeof(TI));
    if (head) partial(0, head);
    for (i = head; i + N <= D; i += N) {
      opts.prefetch(i);
      StreamAs(dc, one(i), dx + i);
    }
  } else {
    for (; i + N <= D; i += N) {
      opts.prefetch(i);
      StoreAs(dc, one(i), dx + i);
    }
  }
  if (i < D) partial(i, D - i);
}

template <class T>
const T* RowPtr(const void* base, std::int64_t stride, std::int64_t r) {
  return static_cast<const T*>(base) + r * stride;
}
template <class T>
T* RowPtr(void* base, std::int64_t stride, std::int64_t r) {
  return static_cast<T*>(base) + r * stride;
}

// Rows [begin, end) with storage types TD (dy), TI (xin, dh_out, dx), TW
// (weight) and compute type C. pdw/pdb: this row block's partial sums
// (zeroed here), or null when no parameter gradient is wanted.
template <bool kParams, class C, class TD, class TI, class TW>
void BackwardRowsT(const BackwardArgs& a, std::int64_t begin, std::int64_t end, C* pdw, C* pdb, bool stream) {
  const hn::ScalableTag<C> dc;
  const std::size_t D = static_cast<std::size_t>(a.D);
  const double Dd = static_cast<double>(D);
  const TW* w = static_cast<const TW*>(a.weight);
  const C* mean = static_cast<const C*>(a.mean);
  const C* rstd = static_cast<const C*>(a.rstd);
  const auto Off = hn::Set(dc, static_cast<C>(a.weight_offset));
  if constexpr (kParams) {
    const std::size_t padded = hwy::RoundUpTo(D, hn::Lanes(dc));
    std::fill(pdw, pdw + padded, C{0});
    std::fill(pdb, pdb + padded, C{0});
  }
  PassBOpts opts;
  opts.stream = stream;
  opts.dy_size = sizeof(TD);
  opts.x_size = sizeof(TI);
  for (std::int64_t row = begin; row < end; ++row) {
    const TD* dy = RowPtr<TD>(a.dy, a.dy_stride, row);
    const TI* x = RowPtr<TI>(a.xin, a.xin_stride, row);
    TI* dx = RowPtr<TI>(a.dx, a.dx_stride, row);
    const bool last = row + 1 == end;
    opts.next_dy = last ? nullptr : reinterpret_cast<const char*>(dy + a.dy_stride);
    opts.next_x = last ? nullptr : reinterpret_cast<const char*>(x + a.xin_stride);
    const XhatMap<hn::ScalableTag<C>> xhat_of(dc, mean ? static_cast<double>(mean[row]) : 0.0,
                                        static_cast<double>(rstd[row]));
    const auto R = hn::Set(dc, rstd[row]);
    RowSums sums;
    for (std::size_t off = 0; off < D; off += kChunk)
      ChunkA<kParams>(dc, dy + off, x + off, w + off, std::min(kChunk, D - off), xhat_of, Off,
                      kParams ? pdw + off : nullptr, kParams ? pdb + off : nullptr, sums);
    const auto MG = hn::Set(dc, mean ? static_cast<C>(sums.g / Dd) : C{0});
    const auto MGX = hn::Set(dc, static_cast<C>(sums.gx / Dd));
    if (a.dh_out)
      RowB<true>(dc, dy, x, w, RowPtr<TI>(a.dh_out, a.dh_out_stride, row), dx, D, xhat_of, R, Off, MG, MGX, opts);
    else
      RowB<false>(dc, dy, x, w, static_cast<const TI*>(nullptr), dx, D, xhat_of, R, Off, MG, MGX, opts);
  }
  if (stream) hwy::FlushStream();  // order the non-temporal stores before the join
}

template <class C, class TD, class TI, class TW>
void BackwardTyped(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb,
                   bool stream) {
  if (pdw)
    BackwardRowsT<true, C, TD, TI, TW>(a, begin, end, static_cast<C*>(pdw), static_cast<C*>(pdb), stream);
  else
    BackwardRowsT<false, C, TD, TI, TW>(a, begin, end, nullptr, nullptr, stream);
}

// The valid (xin, weight) dtypes for 16-bit dy: dy's own or f32.
template <class TD>
void Backward16(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb, bool stream) {
  const bool i32 = a.xin_dtype == DType::f32;
  const bool w32 = a.w_dtype == DType::f32;
  if (i32 && w32) return BackwardTyped<float, TD, float, float>(a, begin, end, pdw, pdb, stream);
  if (i32) return BackwardTyped<float, TD, float, TD>(a, begin, end, pdw, pdb, stream);
  if (w32) return BackwardTyped<float, TD, TD, float>(a, begin, end, pdw, pdb, stream);
  return BackwardTyped<float, TD, TD, TD>(a, begin, end, pdw, pdb, stream);
}

}  // namespace

// pdw, pdb: the partial-sum rows of the block [begin, end), or null.
// stream: write dx with non-temporal stores (see backward_streams).
void BackwardRange(const BackwardArgs& a, std::int64_t begin, std::int64_t end, void* pdw, void* pdb,
                   bool stream) {
  switch (a.dy_dtype) {
    case DType::f32: return BackwardTyped<float, float, float, float>(a, begin, end, pdw, pdb, stream);
    case DType::f64: return BackwardTyped<double, double, double, double>(a, begin, end, pdw, pdb, stream);
    case DType::f16: return Backward16<hwy::float16_t>(a, begin, end, pdw, pdb, stream);
    case DType::bf16: return Backward16<hwy::bfloat16_t>(a, begin, end, pdw, pdb, stream);
  }
}

// Elements per vector of the compute type for dy's dtype on this target.
std::size_t ComputeLanes(DType dy_dtype) {
  return dy_dtype == DType::f64 ? hn::Lanes(hn::ScalableTag<double>()) : hn::Lanes(hn::ScalableTag<float>());
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::detail {

HWY_EXPORT(BackwardRange);
HWY_EXPORT(ComputeLanes);

namespace {

std::int64_t backward_bytes_per_row(const BackwardArgs& a) {
  const std::int64_t act = static_cast<std::int64_t>(dtype_size(a.dy_dtype));
  const std::int64_t in = static_cast<std::int64_t>(dtype_size(a.xin_dtype));
  return (act + in * (a.dh_out ? 3 : 2)) * a.D;  // dy, xin, [dh_out], dx
}

bool wants_params(const BackwardArgs& a) { return a.dweight || a.dbias; }

std::size_t acc_bytes(const BackwardArgs& a) { return a.dy_dtype == DType::f64 ? 8 : 4; }

// Accumulator row length: D rounded up to whole vectors of the widest target,
// so pass A can load and store partials without tail handling.
std::int64_t padded_width(const BackwardArgs& a) {
  const std::int64_t lanes = 64 / static_cast<std::int64_t>(acc_bytes(a));
  return (a.D + lanes - 1) / lanes * lanes;
}

// Writes sum[j] (j < D) in the gradient's dtype t.
void store_gradient(const double* sum, std::int64_t D, DType t, void* out) {
  switch (t) {
    case DType::f32:
      for (std::int64_t j = 0; j < D; ++j) static_cast<float*>(out)[j] = static_cast<float>(sum[j]);
      return;
    case DType::f64:
      std::memcpy(out, sum, static_cast<std::size_t>(D) * sizeof(double));
      return;
    case DType::f16:
      for (std::int64_t j = 0; j < D; ++j) static_cast<half_t*>(out)[j] = to_f16(static_cast<float>(sum[j]));
      return;
    case DType::bf16:
      for (std::int64_t j = 0; j < D; ++j)
        static_cast<bfloat16_t*>(out)[j] = to_bf16(static_cast<float>(sum[j]));
      return;
  }
}

// Sums the block partials in block order and writes the gradient in dtype t.
// One block whose accumulators already have the gradient's type (f32
// partials for an f32 gradient: a single term rounds to itself) is copied.
template <class C>
void reduce_blocks(const C* partials, std::int64_t blocks, std::int64_t stride, std::int64_t D, DType t,
                   void* out) {
  if (blocks == 1 && t == (std::is_same_v<C, double> ? DType::f64 : DType::f32)) {
    std::memcpy(out, partials, static_cast<std::size_t>(D) * sizeof(C));
    return;
  }
  double* sum = static_cast<double*>(scratch_buffer(static_cast<std::size_t>(D) * sizeof(double), 1));
  for (std::int64_t j = 0; j < D; ++j) sum[j] = static_cast<double>(partials[j]);
  for (std::int64_t b = 1; b < blocks; ++b) {
    const C* p = partials + b * stride;
    for (std::int64_t j = 0; j < D; ++j) sum[j] += static_cast<double>(p[j]);
  }
  store_gradient(sum, D, t, out);
}

}  // namespace

bool backward_streams(const BackwardArgs& a) {
  return a.dx != a.dy && a.dx != a.dh_out && streams_output(a.dx, a.rows, a.D, a.dx_stride, dtype_size(a.xin_dtype));
}

int backward_threads(const BackwardArgs& a) {
  if (!wants_params(a)) return threads_for(a.rows, backward_bytes_per_row(a));
  const ParamBlocks pb = param_blocks(a.rows, padded_width(a), acc_bytes(a));
  return threads_for(pb.count, backward_bytes_per_row(a) * pb.rows_per_block);
}

void cpu_backward(const BackwardArgs& args) {
  assert(args.rows >= 1 && args.D >= 1 && args.dy && args.xin && args.rstd && args.dx);
  assert(args.kind == NormKind::rms || args.mean);
  BackwardArgs a = args;
  if (a.kind == NormKind::rms) a.mean = nullptr;
  if (!a.weight && !a.dweight && !a.dbias) a.w_dtype = a.dy_dtype;  // any valid dtype: none is read
  if (!a.weight) a.weight = constant_row(a.w_dtype, a.D, 1);
  const std::int64_t row_bytes = backward_bytes_per_row(a);
  const bool stream = backward_streams(a);

  if (!wants_params(a)) {
    parallel_rows(a.rows, row_bytes, [&](std::int64_t begin, std::int64_t end) {
      HWY_DYNAMIC_DISPATCH(BackwardRange)(a, begin, end, nullptr, nullptr, stream);
    });
    return;
  }

  // Partial sums: per block, a dweight row then a dbias row of `stride`
  // accumulators each (f32, or f64 for f64 data). Bounded by
  // kParamScratchBytes (or one block's 2·D accumulators if larger); reused
  // across calls on this thread.
  const std::int64_t stride = padded_width(a);
  assert(static_cast<std::size_t>(stride) % HWY_DYNAMIC_DISPATCH(ComputeLanes)(a.dy_dtype) == 0);
  const ParamBlocks pb = param_blocks(a.rows, stride, acc_bytes(a));
  const std::size_t bytes = static_cast<std::size_t>(pb.count * 2 * stride) * acc_bytes(a);
  std::byte* partials = static_cast<std::byte*>(scratch_buffer(bytes, 0));
  const std::size_t block_bytes = static_cast<std::size_t>(2 * stride) * acc_bytes(a);

  parallel_items(pb.count, row_bytes * pb.rows_per_block, [&](std::int64_t block) {
    const std::int64_t begin = block * pb.rows_per_block;
    const std::int64_t end = std::min(a.rows, begin + pb.rows_per_block);
    std::byte* pdw = partials + static_cast<std::size_t>(block) * block_bytes;
    std::byte* pdb = pdw + block_bytes / 2;
    HWY_DYNAMIC_DISPATCH(BackwardRange)(a, begin, end, pdw, pdb, stream);
  });

  // dweight rows sit at even multiples of `stride`, dbias rows at odd ones.
  const std::int64_t block_stride = 2 * stride;
  if (a.dy_dtype == DType::f64) {
    const double* p = reinterpret_cast<const double*>(partials);
    if (a.dweight) reduce_blocks(p, pb.count, block_stride, a.D, a.w_dtype, a.dweight);
    if (a.dbias) reduce_blocks(p + stride, pb.count, block_stride, a.D, a.w_dtype, a.dbias);
  } else {
    const float* p = reinterpret_cast<const float*>(partials);
    if (a.dweight) reduce_blocks(p, pb.count, block_stride, a.D, a.w_dtype, a.dweight);
    if (a.dbias) reduce_blocks(p + stride, pb.count, block_stride, a.D, a.w_dtype, a.dbias);
  }
}

}  // namespace normkit::detail
#endif  // HWY_ONCE
