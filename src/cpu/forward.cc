// LayerNorm / RMSNorm forward on the CPU, plain and fused with the residual
// add. One Highway source compiled for every x86 target (AVX-512, AVX2,
// SSE4, SSSE3, and the portable EMU128), chosen at run time.
//
// Per row (see docs/kernels.md):
//   1. statistics in one pass over the row: Σx and Σx², f32 sums over chunks
//      of kChunk elements added in double. LayerNorm takes the variance
//      Σx² − D·mean² when |mean| ≤ std/4, where its error is inside the
//      documented bound; other rows are re-read from cache for the corrected
//      two-pass sums around the one-pass mean. (RMSNorm needs only Σx².) The
//      fused op writes h = x + residual during the first pass and takes the
//      statistics of the stored h.
//   2. a rescale fallback when the statistics overflow (|x| ~ 1e20 in f32) or
//      underflow (subnormal rows): zero cost on ordinary rows.
//   3. the output pass, re-reading the row from cache.
// Shapes: x, residual, h, y: (rows, D); weight, bias: (D); mean, rstd: (rows).
//
// The kernels are templates in forward-inl.hpp. This file instantiates the
// LayerNorm ones and holds the entry point; forward_rms.cc the RMSNorm ones,
// so a build compiles the two halves in parallel.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/forward.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "cpu/forward-inl.hpp"

#if HWY_ONCE && HWY_ARCH_X86_64
#include <cpuid.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

// stream: write y with non-temporal stores (see forward_streams).
void ForwardLayerRange(const ForwardArgs& a, std::int64_t begin, std::int64_t end, bool stream) {
  ForwardKind<NormKind::layer_norm>(a, begin, end, stream);
}

const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::detail {

HWY_EXPORT(ForwardLayerRange);
HWY_EXPORT(ActiveTargetName);

namespace {
std::int64_t forward_bytes_per_row(const ForwardArgs& a) {
  std::int64_t bytes = 2 * static_cast<std::int64_t>(dtype_size(a.x_dtype));  // x, y
  if (a.residual) bytes += 2 * static_cast<std::int64_t>(dtype_size(a.res_dtype));  // residual, h
  return bytes * a.D;
}
}  // namespace

int forward_threads(const ForwardArgs& a) { return threads_for(a.rows, forward_bytes_per_row(a)); }

bool forward_streams(const ForwardArgs& a) {
  return a.y != a.x && streams_output(a.y, a.rows, a.D, a.y_stride, dtype_size(a.x_dtype));
}

void cpu_forward(const ForwardArgs& args) {
  assert(args.rows >= 1 && args.D >= 1 && args.x && args.y);
  assert((args.residual == nullptr) == (args.h == nullptr));
  ForwardArgs a = args;
  if (!a.weight && !a.bias) a.w_dtype = a.x_dtype;  // any valid dtype: none is read
  if (!a.weight) a.weight = constant_row(a.w_dtype, a.D, 1);
  if (a.kind == NormKind::layer_norm && !a.bias) a.bias = constant_row(a.w_dtype, a.D, 0);
  const bool stream = forward_streams(a);
  parallel_rows(a.rows, forward_bytes_per_row(a), [&](std::int64_t begin, std::int64_t end) {
    if (a.kind == NormKind::layer_norm)
      HWY_DYNAMIC_DISPATCH(ForwardLayerRange)(a, begin, end, stream);
    else
      forward_rms_range(a, begin, end, stream);
  });
}

std::vector<std::int64_t> cpu_targets() {
  std::vector<std::int64_t> out;
  for (std::int64_t t = hwy::SupportedTargets() & HWY_TARGETS; t != 0; t &= t - 1) out.push_back(t & -t);
  return out;
}

const char* cpu_target_name(std::int64_t target) { return hwy::TargetName(target); }

void force_cpu_target(std::int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

const char* active_cpu_target() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

bool cpu_has_bf16_instructions() {
#if HWY_ARCH_X86_64
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID.(EAX=7, ECX=1):EAX bit 5 is AVX512_BF16. The kernels that use it
  // run only where Highway chose AVX-512, which checked the OS saves zmm.
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
#else
  return false;
#endif
}

void use_bf16_instructions(bool on) { g_bf16_instructions = on && cpu_has_bf16_instructions(); }

}  // namespace normkit::detail
#endif  // HWY_ONCE
