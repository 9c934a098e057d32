// normkit measure — the norm ops the bench times and the bytes each must move.
//
// Every op is described by the arrays it reads and the arrays it writes.
// That one description decides both which buffers the bench allocates and
// how many bytes the op must move, so the two cannot disagree.
//
// Shapes, as everywhere in normkit:
//   x, residual, h, y, dy, dx : (rows, D)  activation dtype
//   weight, bias, dweight, dbias : (D)     parameter dtype
//   mean, rstd                : (rows)     f32 (f64 for f64 activations)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "normkit/tensor.hpp"
#include "support/norm_kind.hpp"

namespace normkit::measure {

enum class Pass : std::uint8_t {
  forward,        // y = norm(x)
  backward,       // dx, dweight (and dbias) from dy, x and the saved statistics
  backward_dx,    // dx alone: the backward of a norm whose parameters are frozen
  fused,          // h = x + residual, y = norm(h), in one call
  add_then_norm,  // the same as two calls: an add, then the plain norm of h
  fused_backward,     // dh = norm_backward(dy) + dh_out, in one call
  backward_then_add,  // the same as two calls: the plain backward into dx, then dh = dx + dh_out
};

constexpr bool is_backward(Pass p) {
  return p == Pass::backward || p == Pass::backward_dx || p == Pass::fused_backward ||
         p == Pass::backward_then_add;
}

// The fused passes and the same work as two calls.
constexpr bool is_fused(Pass p) { return p == Pass::fused || p == Pass::fused_backward; }
constexpr bool is_two_calls(Pass p) { return p == Pass::add_then_norm || p == Pass::backward_then_add; }
constexpr Pass two_calls_of(Pass fused) { return fused == Pass::fused ? Pass::add_then_norm : Pass::backward_then_add; }

std::string_view norm_name(NormKind n);
std::string_view pass_name(Pass p);

// Every array an op may touch.
enum class Array : std::uint8_t {
  x, residual, h, y, dy, dx, dh_out, dh,  // (rows, D), activation dtype
  weight, bias, dweight, dbias,        // (D), parameter dtype
  mean, rstd,                          // (rows), f32
};
inline constexpr int kArrayCount = 14;

constexpr bool is_activation(Array a) { return a <= Array::dh; }
constexpr bool is_parameter(Array a) { return a >= Array::weight && a <= Array::dbias; }

// A set of arrays as a bit mask.
struct Arrays {
  std::uint32_t bits = 0;
  constexpr Arrays() = default;
  constexpr Arrays(std::initializer_list<Array> list) {
    for (Array a : list) bits |= 1u << static_cast<unsigned>(a);
  }
  constexpr bool has(Array a) const { return (bits >> static_cast<unsigned>(a)) & 1u; }
  constexpr void add(Array a) { bits |= 1u << static_cast<unsigned>(a); }
};

struct Op {
  std::string_view name;  // the public function timed ("add_then_*": an add, then that function;
                          // "*_then_add": that function, then an add)
  NormKind norm;
  Pass pass;
  Arrays reads;   // arrays the op must read once
  Arrays writes;  // arrays the op must write once
};

// The ops the bench times. Forward ops save their statistics (the training
// forward); backward ops produce every gradient (x stands for h in the fused
// backward), except *_backward_dx, the same function asked for dx alone, as
// when fine-tuning leaves the norms' parameters frozen. add_then_* reads h a
// second time: that extra pass over h is exactly what the fused op saves;
// *_backward_then_add writes dx and reads it back, the two passes the fused
// backward saves.
inline constexpr Op kOps[] = {
    {"layer_norm", NormKind::layer_norm, Pass::forward,
     {Array::x, Array::weight, Array::bias}, {Array::y, Array::mean, Array::rstd}},
    {"rms_norm", NormKind::rms_norm, Pass::forward,
     {Array::x, Array::weight}, {Array::y, Array::rstd}},
    {"layer_norm_backward", NormKind::layer_norm, Pass::backward,
     {Array::dy, Array::x, Array::mean, Array::rstd, Array::weight},
     {Array::dx, Array::dweight, Array::dbias}},
    {"rms_norm_backward", NormKind::rms_norm, Pass::backward,
     {Array::dy, Array::x, Array::rstd, Array::weight}, {Array::dx, Array::dweight}},
    {"layer_norm_backward_dx", NormKind::layer_norm, Pass::backward_dx,
     {Array::dy, Array::x, Array::mean, Array::rstd, Array::weight}, {Array::dx}},
    {"rms_norm_backward_dx", NormKind::rms_norm, Pass::backward_dx,
     {Array::dy, Array::x, Array::rstd, Array::weight}, {Array::dx}},
    {"add_layer_norm", NormKind::layer_norm, Pass::fused,
     {Array::x, Array::residual, Array::weight, Array::bias},
     {Array::h, Array::y, Array::mean, Array::rstd}},
    {"add_rms_norm", NormKind::rms_norm, Pass::fused,
     {Array::x, Array::residual, Array::weight}, {Array::h, Array::y, Array::rstd}},
    {"add_then_layer_norm", NormKind::layer_norm, Pass::add_then_norm,
     {Array::x, Array::residual, Array::h, Array::weight, Array::bias},
     {Array::h, Array::y, Array::mean, Array::rstd}},
    {"add_then_rms_norm", NormKind::rms_norm, Pass::add_then_norm,
     {Array::x, Array::residual, Array::h, Array::weight}, {Array::h, Array::y, Array::rstd}},
    {"add_layer_norm_backward", NormKind::layer_norm, Pass::fused_backward,
     {Array::dy, Array::x, Array::dh_out, Array::mean, Array::rstd, Array::weight},
     {Array::dh, Array::dweight, Array::dbias}},
    {"add_rms_norm_backward", NormKind::rms_norm, Pass::fused_backward,
     {Array::dy, Array::x, Array::dh_out, Array::rstd, Array::weight}, {Array::dh, Array::dweight}},
    {"layer_norm_backward_then_add", NormKind::layer_norm, Pass::backward_then_add,
     {Array::dy, Array::x, Array::mean, Array::rstd, Array::weight, Array::dx, Array::dh_out},
     {Array::dx, Array::dweight, Array::dbias, Array::dh}},
    {"rms_norm_backward_then_add", NormKind::rms_norm, Pass::backward_then_add,
     {Array::dy, Array::x, Array::rstd, Array::weight, Array::dx, Array::dh_out},
     {Array::dx, Array::dweight, Array::dh}},
};

// The op timed by a given norm and pass.
const Op& find_op(NormKind norm, Pass pass);

// What one call works on.
struct Shape {
  std::int64_t rows = 0, D = 0;
  DType act = DType::f32;    // x, residual, h, y, dy, dx
  DType param = DType::f32;  // weight, bias, dweight, dbias
};

// Bytes of one array for a shape.
std::int64_t array_bytes(Array a, const Shape& s);

// The bytes an op must move at least: each array it reads, read once, and
// each array it writes, written once. Caches and write-allocate may move
// more; they cannot make the op move less.
struct Traffic {
  std::int64_t read = 0, written = 0;
  std::int64_t total() const { return read + written; }
};
Traffic traffic(const Op& op, const Shape& s);
Traffic traffic(Arrays reads, Arrays writes, const Shape& s);

// The bytes one call touches (each array counted once): the working set.
std::int64_t working_set_bytes(const Op& op, const Shape& s);

// Pointers to one set of arrays; an array the op does not use is null.
struct Tensors {
  std::array<std::byte*, kArrayCount> p{};
  std::byte* operator[](Array a) const { return p[static_cast<std::size_t>(a)]; }
};

}  // namespace normkit::measure
