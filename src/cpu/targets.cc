// The CPU facts of introspect.hpp: which Highway targets the kernels were
// compiled for, forcing one of them, the one dispatch picks now, the
// AVX-512 BF16 switch, and the widest row fetched ahead. No kernel lives
// here.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/targets.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/introspect.hpp"

#if HWY_ONCE && HWY_ARCH_X86_64
#include <cpuid.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::detail {

HWY_EXPORT(ActiveTargetName);

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

std::size_t next_row_max_bytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 && l2 <= (512 << 10) ? 256 << 10 : 128 << 10;
}

}  // namespace normkit::detail
#endif  // HWY_ONCE
