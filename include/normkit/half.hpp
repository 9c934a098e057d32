// normkit — scalar conversions between float and the 16-bit storage types.
//
// Rounding is to nearest, ties to even, as the hardware conversions
// (F16C, AVX512-BF16) and PyTorch do. NaN stays NaN; values beyond the target
// range become ±Inf. These are for setting up data and for tests; the kernels
// convert whole vectors in registers.
#pragma once

#include <bit>
#include <cstdint>

#include "normkit/tensor.hpp"

namespace normkit {

constexpr float to_float(bfloat16_t v) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(v.bits) << 16);
}

constexpr bfloat16_t to_bf16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x40u)};  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>((u + rounding) >> 16)};
}

constexpr float to_float(half_t v) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(v.bits & 0x8000u) << 16;
  const std::uint32_t exp = (v.bits >> 10) & 0x1fu;
  const std::uint32_t man = v.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));  // Inf / NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
  // Subnormal or zero: man · 2^-24, exact in float.
  const float mag = static_cast<float>(man) * 0x1p-24f;
  return sign ? -mag : mag;
}

constexpr half_t to_f16(float f) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};  // NaN
  if (a >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds past 65504
  if (a < 0x38800000u) {
    // Result is subnormal (or zero) in f16: round a / 2^-24 to an integer, ties to even.
    // Adding 0.5 (as float, exponent 2^-1) aligns the mantissa so the FPU rounds for us.
    const float scaled = std::bit_cast<float>(a) * 0x1p24f;  // exact: a power-of-two scale
    const float r = scaled + 0x1p23f - 0x1p23f;               // round to integer, ties to even
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r))};
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const std::uint32_t rebased = a - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return {static_cast<std::uint16_t>(sign | ((rebased + rounding) >> 13))};
}

}  // namespace normkit
