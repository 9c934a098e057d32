// normkit — library version.
#pragma once

namespace normkit {

// The version of the linked library, "MAJOR.MINOR.PATCH".
const char* version() noexcept;

// The SIMD target the CPU kernels run on this machine, chosen at run time
// from those compiled in (Highway's names: "AVX3" is AVX-512 F/BW/DQ/VL,
// "AVX2" is AVX2 with FMA and F16C, then "SSE4"...). Timings of the
// 16-bit ops in particular depend on it, so a benchmark should report it.
const char* cpu_simd_target() noexcept;

}  // namespace normkit
