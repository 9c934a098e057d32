// normkit measure — the plain streaming loops: the bandwidth ceilings and the
// elementwise add of the unfused add-then-norm.
//
// They are SIMD loops compiled for every x86 target and picked at run time
// (Highway dynamic dispatch), so they run at the widest vectors the machine
// has, as the normkit kernels do: a ceiling measured with narrower vectors
// than the kernels use would not be a ceiling.
#pragma once

#include <cstddef>
#include <cstdint>

#include "normkit/tensor.hpp"

namespace normkit::measure {

// Reads every byte of [p, p + bytes) once and returns their 64-bit word sum
// (so the reads cannot be optimised away). Four independent accumulators:
// one add per load keeps the loop bound by loads, not by add latency.
std::uint64_t read_sum(const std::byte* p, std::size_t bytes);

// dst[i] = src[i] for bytes bytes with full-width vector loads and ordinary
// stores (not streaming stores: the kernels do not use them either).
void vector_copy(std::byte* dst, const std::byte* src, std::size_t bytes);

// The same with non-temporal (streaming) stores, which write to memory
// without first reading the destination line into the cache; the normkit
// kernels write large outputs this way, so a copy ceiling must too.
void stream_copy(std::byte* dst, const std::byte* src, std::size_t bytes);

// out[i] = a[i] + b[i] for n elements of dtype t (f32, bf16 or f16), added
// in f32 and rounded to nearest even: the elementwise add a user calls
// before a separate norm.
void add(DType t, const void* a, const void* b, void* out, std::size_t n);

}  // namespace normkit::measure
