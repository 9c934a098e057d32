// Storage types on the device and how packs of them move between memory and
// registers. 16-bit values are storage only, as on the CPU: every load
// widens to the compute type (f32, or f64 for f64 data) and only the final
// result is rounded back, to nearest even.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace normkit::detail::cuda {

template <class T>
struct ComputeOf {
  using type = float;
};
template <>
struct ComputeOf<double> {
  using type = double;
};
template <class T>
using compute_t = typename ComputeOf<T>::type;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ double widen(double v) { return v; }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <class T>
__device__ __forceinline__ T narrow(double v);
template <>
__device__ __forceinline__ double narrow<double>(double v) { return v; }

// N elements of T at p, widened into out. kVec: p is 16-byte aligned and all
// N are in range, so they move in N·sizeof(T)/16 16-byte loads.
template <int N, class T, class C>
__device__ __forceinline__ void load_pack(const T* p, C (&out)[N]) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  static_assert((N * sizeof(T)) % 16 == 0, "a pack is whole 16-byte accesses");
#pragma unroll
  for (int i = 0; i < N / kPer; ++i) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p + i * kPer);
    T e[kPer];
    __builtin_memcpy(e, &raw, 16);
#pragma unroll
    for (int j = 0; j < kPer; ++j) out[i * kPer + j] = static_cast<C>(widen(e[j]));
  }
}

template <int N, class T, class C>
__device__ __forceinline__ void store_pack(T* p, const C (&in)[N]) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int i = 0; i < N / kPer; ++i) {
    T e[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) e[j] = narrow<T>(in[i * kPer + j]);
    uint4 raw;
    __builtin_memcpy(&raw, e, 16);
    *reinterpret_cast<uint4*>(p + i * kPer) = raw;
  }
}

// A pack at element e of a segment of n elements starting at p: 16-byte
// accesses when `vec` and the pack is whole, else element by element (a
// misaligned array, or the tail of a row whose D is not a multiple of N).
// Elements past n read as 0 and are not written.
template <int N, class T, class C>
__device__ __forceinline__ void load_at(const T* p, std::int64_t e, std::int64_t n, bool vec, C (&out)[N]) {
  if (vec && e + N <= n) {
    load_pack<N>(p + e, out);
    return;
  }
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = e + j < n ? static_cast<C>(widen(p[e + j])) : C(0);
}

template <int N, class T, class C>
__device__ __forceinline__ void store_at(T* p, std::int64_t e, std::int64_t n, bool vec, const C (&in)[N]) {
  if (vec && e + N <= n) {
    store_pack<N>(p + e, in);
    return;
  }
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (e + j < n) p[e + j] = narrow<T>(in[j]);
}

}  // namespace normkit::detail::cuda
