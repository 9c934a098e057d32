// Internal hooks for tests and tools: which SIMD targets the kernels were
// compiled for, forcing one of them, and how many threads a call would use.
// Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/kernels.hpp"

namespace normkit::detail {

// Highway targets (HWY_AVX3, HWY_AVX2, ...) compiled into the kernels that
// this CPU supports, best first.
std::vector<std::int64_t> cpu_targets();
const char* cpu_target_name(std::int64_t target);

// Makes run-time dispatch pick `target` (one of cpu_targets()); 0 restores
// the default (the best supported). Process-wide; not for concurrent use.
void force_cpu_target(std::int64_t target);

// Name of the target the next kernel call dispatches to.
const char* active_cpu_target();

// AVX-512 BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and later): the AVX-512
// kernels round f32 to bf16 with its vcvtne2ps2bf16 instead of 7 integer
// operations per vector (convert-inl.hpp, PackBf16Pair). Highway 1.0.3 has no
// target that uses it. Outputs are bitwise identical either way.
bool cpu_has_bf16_instructions();
// Whether the AVX-512 kernels use them now: the CPU's answer by default;
// tests switch it off to compare the two roundings. Process-wide; not for
// concurrent use.
inline bool g_bf16_instructions = cpu_has_bf16_instructions();
void use_bf16_instructions(bool on);  // on takes effect only where the CPU has them

// The most bytes one array's row may have for the kernels to fetch the next
// row ahead (NextRows, prefetch-inl.hpp; wider rows are fetched from within):
// 256 KiB on a core whose L2 is at most 512 KiB, where such a row cannot stay
// in L2 whatever is fetched, else 128 KiB. L2 size from glibc (unknown: 128
// KiB). Measured in docs/kernels.md, "Fetching a wide row from within".
std::size_t next_row_max_bytes();
inline const std::size_t g_next_row_max_bytes = next_row_max_bytes();

// How the backward's pass A takes rows on targets that take two at a time
// (AVX-512; backward.cc, PairsRows): two where that pays (the default), one
// at a time, or two wherever parameter gradients are wanted, whatever the
// row's width. The bits are the same in every case; tests compare never
// with always. Process-wide; not for concurrent use.
enum class RowPairs { where_it_pays, never, always };
inline RowPairs g_backward_row_pairs = RowPairs::where_it_pays;

// Threads cpu_forward / cpu_backward use for these arguments (the kernels
// call the same functions).
int forward_threads(const ForwardArgs& a);
int backward_threads(const BackwardArgs& a);

// Outputs of at least this many bytes per call are written with
// non-temporal stores: they skip the read-for-ownership of every line and do
// not evict the inputs still to be read. 4 MiB is twice a core's L2: an
// output that large has left L2 before anyone reads it, while smaller ones
// stay cached for the consumer. Measured in docs/kernels.md.
inline constexpr std::int64_t kStreamMinBytes = std::int64_t{4} << 20;

// Whether cpu_forward writes y (cpu_backward dx) with non-temporal stores:
// large outputs, already mapped in, that do not overwrite an input in place
// (cpu/pages.hpp).
bool forward_streams(const ForwardArgs& a);
// Whether the fused forward writes h with non-temporal stores: a large h,
// already mapped in, that overwrites neither input, and not a bf16 h where
// rounding to bf16 takes integer operations. Its output pass then forms h
// again (the sum, rounded to h's dtype) from the cached x and residual
// rather than reading h back: an ordinary store of h reads each line for
// ownership first, which made the fused op slower than an add and a norm
// (docs/kernels.md).
bool fused_h_streams(const ForwardArgs& a);
bool backward_streams(const BackwardArgs& a);

}  // namespace normkit::detail
