// libFuzzer harness over normkit's public API.
//
// The input bytes choose one call — op, shapes, strides, dtypes (invalid
// enum values too), eps and weight_offset (negative, NaN, Inf too), optional
// arguments, one broken argument, aliasing between arguments, the thread
// count — and the values in every input (NaN, Inf, largest finite,
// subnormal, huge offsets). Every call must either
//   * throw normkit::Error whose message starts with "<function>: ", having
//     written nothing (every byte of every buffer as before), or
//   * return having written only its outputs' elements (row padding and
//     inputs untouched), with results that match the fp64 oracle within the
//     documented budget (tests/cpp/tolerance.hpp) and, where the oracle is
//     not finite, the same NaN/Inf (ops.hpp, "Edge cases").
// Anything else aborts with a description. The sanitizers (address,
// undefined) catch out-of-bounds access and undefined behaviour.
//
// Input layout (bytes past the end read as 0), see fuzz/make_corpus.py:
//   0 op           1 rows        2 D           3 x dtype      4 presence flags
//   5 extra flags  6 eps         7 w. offset   8 stride pads  9 broken arg
//   10 how broken  11 alias out  12 alias into 13 alias offset 14 threads, SIMD target
//   15 value class 16-23 value seed
//   then 3-byte special-value injections: (argument, element, kind) …
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "cpu/introspect.hpp"
#include "normkit/normkit.hpp"
#include "reference.hpp"
#include "tolerance.hpp"

namespace nk = normkit;
using nk::DType;
using nk::reference::smallest_subnormal;
using nk::test::accum_roundoff;
using nk::test::growth;

namespace {

// ---- reading the input --------------------------------------------------

class Bytes {
 public:
  Bytes(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= static_cast<std::uint64_t>(u8()) << (8 * k);
    return v;
  }
  bool left() const { return i_ < n_; }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

std::string g_call;  // the call being checked, for the report

// A double for a report: all significant digits, any magnitude.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "normkit_fuzz: %s\n  call: %s\n", what.c_str(), g_call.c_str());
  std::fflush(stderr);
  std::abort();
}

// ---- the call's arguments -------------------------------------------------

enum Slot { X, RES, DY, DHOUT, W, B, MEAN, RSTD, Y, H, DX, DW, DB, kSlots };

enum class Op { layer, rms, add_layer, add_rms, layer_bwd, rms_bwd, add_layer_bwd, add_rms_bwd };
constexpr int kOps = 8;

bool is_layer(Op o) { return o == Op::layer || o == Op::add_layer || o == Op::layer_bwd || o == Op::add_layer_bwd; }
bool is_fused(Op o) { return o == Op::add_layer || o == Op::add_rms || o == Op::add_layer_bwd || o == Op::add_rms_bwd; }
bool is_bwd(Op o) { return o == Op::layer_bwd || o == Op::rms_bwd || o == Op::add_layer_bwd || o == Op::add_rms_bwd; }

const char* op_name(Op o) {
  static const char* names[] = {"layer_norm",          "rms_norm",          "add_layer_norm",          "add_rms_norm",
                                "layer_norm_backward", "rms_norm_backward", "add_layer_norm_backward", "add_rms_norm_backward"};
  return names[static_cast<int>(o)];
}

struct Arg {
  bool used = false, output = false, matrix = false;
  bool present = false;
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0, stride = 0;
  nk::Device device = nk::Device::cpu;
  bool null_data = false;
  int arena = -1;          // which buffer holds it
  std::size_t offset = 0;  // bytes into that buffer
};

bool valid_dtype(DType t) { return static_cast<unsigned>(t) <= 3; }
std::size_t esize(DType t) { return valid_dtype(t) ? nk::dtype_size(t) : 1; }

// Bytes a view spans (0 when it holds no element, or could not be
// allocated: such views only reach the library with a tiny buffer).
std::size_t span_bytes(const Arg& a) {
  if (a.rows <= 0 || a.cols <= 0) return 0;
  if (a.rows > (1 << 20) || a.cols > (1 << 20) || a.stride > (1 << 20)) return 0;
  return static_cast<std::size_t>((a.rows - 1) * a.stride + a.cols) * esize(a.dtype);
}

// The largest finite value of dtype t (also the largest value generated).
double max_finite(DType t) {
  switch (t) {
    case DType::f64: return std::numeric_limits<double>::max();
    case DType::f32: return std::numeric_limits<float>::max();
    case DType::f16: return 65504.0;
    case DType::bf16: return 3.3895313892515355e38;
  }
  return 0;
}

struct Call {
  Op op;
  std::int64_t rows = 0, D = 0;
  DType act = DType::f32;
  double eps = 1e-5, offset = 0.0;
  Arg a[kSlots];
  bool perturbed = false, aliased = false;
  bool stats_garbage = false;  // a backward's mean/rstd hold injected values
  std::vector<std::vector<unsigned char>> arenas;
};

double pick_double(Bytes& in, const std::vector<double>& table) {
  const std::uint8_t b = in.u8();
  if (b < table.size() * 8) return table[b % table.size()];
  std::uint64_t bits = in.u64();
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// Decodes the call, lays out its buffers and fills them.
Call decode(Bytes& in) {
  Call c;
  c.op = static_cast<Op>(in.u8() % kOps);
  c.rows = in.u8() % 6;
  const std::uint8_t db = in.u8();
  static const std::int64_t wide[] = {0, 1, 127, 128, 129, 255, 256, 257, 1000, 4097};
  c.D = db < 200 ? db % 66 : wide[db % 10];
  const std::uint8_t xb = in.u8();
  c.act = static_cast<DType>(xb % 8 < 6 ? xb % 4 : 4 + xb % 200);  // mostly valid, sometimes not
  const std::uint8_t pres = in.u8(), extra = in.u8();
  c.eps = pick_double(in, {1e-5, 1e-6, 0.0, 1.0, 1e-12, 1e10, -0.0, 0x1p-1074, -1e-5,
                           std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 1e-300, 0.5});
  c.offset = pick_double(in, {0.0, 0.0, 0.0, 1.0, -1.0, 0.5, std::numeric_limits<double>::quiet_NaN(), INFINITY,
                              1e30, -0.0});
  const std::uint8_t pads = in.u8();

  const bool layer = is_layer(c.op), fused = is_fused(c.op), bwd = is_bwd(c.op);
  const bool sixteen = c.act == DType::f16 || c.act == DType::bf16;
  const DType param = (extra & 1) && sixteen ? DType::f32 : c.act;
  const DType stream = (extra & 2) && sixteen ? DType::f32 : c.act;
  const DType stat = c.act == DType::f64 ? DType::f64 : DType::f32;
  c.stats_garbage = bwd && (extra & 4);

  auto mat = [&](Slot s, DType t, bool output, bool present = true) {
    Arg& a = c.a[s];
    a.used = true;
    a.output = output;
    a.matrix = true;
    a.present = present;
    a.dtype = t;
    a.rows = c.rows;
    a.cols = c.D;
    a.stride = c.D + ((pads >> (2 * (s % 4))) & 3);
  };
  auto vec = [&](Slot s, DType t, bool output, bool present, std::int64_t n) {
    Arg& a = c.a[s];
    a.used = true;
    a.output = output;
    a.present = present;
    a.dtype = t;
    a.rows = 1;
    a.cols = n;
    a.stride = n;
  };
  if (!bwd) {
    mat(X, c.act, false);
    if (fused) {
      mat(RES, stream, false);
      mat(H, stream, true);
    }
    mat(Y, c.act, true);
    vec(W, param, false, pres & 1, c.D);
    if (layer) vec(B, param, false, pres & 2, c.D);
    if (layer) vec(MEAN, stat, true, pres & 4, c.rows);
    vec(RSTD, stat, true, pres & 8, c.rows);
  } else {
    mat(DY, c.act, false);
    mat(X, fused ? stream : c.act, false);  // x, or h for the fused backward
    if (fused) mat(DHOUT, stream, false, pres & 64);
    if (layer) vec(MEAN, stat, false, true, c.rows);
    vec(RSTD, stat, false, true, c.rows);
    vec(W, param, false, pres & 1, c.D);
    mat(DX, fused ? stream : c.act, true);  // dx, or dh
    vec(DW, param, true, pres & 16, c.D);
    if (layer) vec(DB, param, true, pres & 32, c.D);
  }
  // weight_offset is only meaningful with a weight; keep it 0 without one
  // unless the input explicitly asks for the invalid combination.
  if (!c.a[W].present && !(extra & 8)) c.offset = 0.0;

  // One broken argument.
  const std::uint8_t which = in.u8(), how = in.u8();
  std::vector<Slot> used;
  for (int s = 0; s < kSlots; ++s)
    if (c.a[s].used) used.push_back(static_cast<Slot>(s));
  if (how % 16 != 0) {
    Arg& a = c.a[used[which % used.size()]];
    c.perturbed = true;
    switch (how % 16) {
      case 1: a.rows += 1; a.cols = a.matrix ? a.cols : a.cols + 1; break;
      case 2: a.cols = a.cols > 0 ? a.cols - 1 : 1; if (!a.matrix) a.stride = a.cols; break;
      case 3: a.stride = a.cols - 1; break;
      case 4: (a.matrix ? a.rows : a.cols) = -1 - how / 16; break;
      case 5: a.null_data = true; break;
      case 6: a.device = nk::Device::cuda; break;
      case 7: a.dtype = static_cast<DType>((static_cast<unsigned>(a.dtype) + 1 + how / 16 % 3) % 4); break;
      case 8: a.dtype = static_cast<DType>(4 + how / 16); break;
      case 9: a.present = !a.present; break;
      case 10: a.null_data = true; a.rows = std::int64_t{1} << 62; a.cols = a.matrix ? 3 << 20 : a.rows; a.stride = a.cols; break;
      case 11: a.rows = a.matrix ? std::int64_t{1} << 40 : 1; a.cols = std::int64_t{1} << 40; a.stride = a.cols; break;
      case 12: a.cols = -1 - how / 16; break;
      case 13: a.stride = a.cols + 1 + how / 16 * 7; break;
      case 14: a.cols = 0; a.stride = 0; break;
      default: c.perturbed = false; break;
    }
    if (!a.matrix) {  // a vector view has only a size
      a.rows = 1;
      a.stride = a.cols;
    }
  }

  // Buffers: one per argument, exactly the size it spans (so that an access
  // past it is a heap overflow the address sanitizer sees).
  for (int s = 0; s < kSlots; ++s) {
    Arg& a = c.a[s];
    if (!a.used || !a.present || a.null_data) continue;
    const bool huge = a.rows > (1 << 20) || a.cols > (1 << 20) || a.stride > (1 << 20);
    const std::size_t n = huge || a.rows < 0 || a.cols < 0 || a.stride < 0 ? 16 : std::max<std::size_t>(span_bytes(a), 1);
    a.arena = static_cast<int>(c.arenas.size());
    c.arenas.emplace_back(n);
  }

  // Aliasing: an output placed inside another argument's buffer, at an
  // element offset (0 with equal layout is the in-place case).
  const std::uint8_t alias_out = in.u8(), alias_into = in.u8(), alias_off = in.u8();
  if (alias_out % 4 != 0) {
    std::vector<Slot> outs, others;
    for (Slot s : used)
      if (c.a[s].arena >= 0) (c.a[s].output ? outs : others).push_back(s);
    for (Slot s : used)
      if (c.a[s].arena >= 0 && c.a[s].output) others.push_back(s);
    if (!outs.empty()) {
      const Slot o = outs[alias_out % outs.size()];
      const Slot t = others[alias_into % others.size()];
      auto small = [](const Arg& a) { return a.rows <= 64 && a.cols <= 8192 && a.stride <= 8192; };
      if (o != t && c.a[t].arena >= 0 && small(c.a[o]) && small(c.a[t])) {
        Arg& ao = c.a[o];
        // Offsets keep the output aligned to its own element size: the API
        // takes typed data, and a misaligned element pointer is not a view.
        const std::size_t off = static_cast<std::size_t>(alias_off % 8) * std::max(esize(c.a[t].dtype), esize(ao.dtype)) *
                                (alias_off >= 128 ? static_cast<std::size_t>(std::max<std::int64_t>(c.a[t].cols, 1)) : 1);
        // Interleaving: same stride as the target, one row further on.
        if (alias_off % 8 == 7 && ao.matrix && c.a[t].matrix && c.rows > 0 && c.D > 0) {
          const std::int64_t st = 2 * c.D;
          c.a[t].stride = st;
          ao.stride = st;
          c.arenas[c.a[t].arena].resize(std::max(span_bytes(c.a[t]), static_cast<std::size_t>(c.D) * esize(ao.dtype) + span_bytes(ao)));
          ao.offset = static_cast<std::size_t>(c.D) * std::max(esize(c.a[t].dtype), esize(ao.dtype));
        } else {
          ao.offset = off;
        }
        auto& buf = c.arenas[c.a[t].arena];
        if (buf.size() < ao.offset + span_bytes(ao)) buf.resize(ao.offset + span_bytes(ao));
        ao.arena = c.a[t].arena;
        c.aliased = true;
      }
    }
  }
  // Thread count (low 2 bits) and the SIMD target the kernels dispatch to
  // (the rest): every target compiled in and supported here gets fuzzed,
  // not only the best one.
  const std::uint8_t tb = in.u8();
  nk::set_num_threads(tb % 4);
  static const std::vector<std::int64_t> targets = nk::detail::cpu_targets();
  nk::detail::force_cpu_target(targets.empty() ? 0 : targets[(tb / 4) % targets.size()]);

  // Values.
  const std::uint8_t cls = in.u8();
  std::mt19937_64 rng(in.u64());
  std::normal_distribution<double> normal(0.0, 1.0);
  auto draw = [&](Slot s, DType t) -> double {
    const bool param_slot = s == W || s == B;
    if (param_slot && cls < 128) return s == W ? 1.0 + 0.5 * normal(rng) : 0.5 * normal(rng);
    if (s == MEAN || s == RSTD) return std::abs(normal(rng));
    switch (cls % 10) {
      case 0: return normal(rng);
      case 1: return 0.5 + 2.0 * normal(rng);
      case 2: return 1e4 + normal(rng);
      case 3: return 1e20 * normal(rng);
      case 4: return max_finite(t) * (0.5 + 0.5 * std::tanh(normal(rng))) * (normal(rng) < 0 ? -1 : 1);
      case 5: return smallest_subnormal(t) * std::floor(64 * std::abs(normal(rng))) * (normal(rng) < 0 ? -1 : 1);
      case 6: return 3.25;
      case 7: return 1e-30 * normal(rng);
      case 8: return 1e-3 * normal(rng);
      default: {
        const double pick[] = {normal(rng), 1e4 + normal(rng), max_finite(t), -max_finite(t), smallest_subnormal(t), 0.0};
        return pick[rng() % 6];
      }
    }
  };
  for (int s = 0; s < kSlots; ++s) {
    const Arg& a = c.a[s];
    if (a.arena < 0 || !valid_dtype(a.dtype) || a.rows <= 0 || a.cols <= 0 || a.rows > 64 || a.cols > 8192) continue;
    if (a.output) continue;
    auto* base = c.arenas[a.arena].data() + a.offset;
    for (std::int64_t r = 0; r < a.rows; ++r)
      for (std::int64_t j = 0; j < a.cols; ++j) nk::support::store(base, a.dtype, r * a.stride + j, draw(static_cast<Slot>(s), a.dtype));
  }
  // Outputs start as recognisable garbage (not zero: a kernel that skips a
  // write is caught).
  for (int s = 0; s < kSlots; ++s)
    if (c.a[s].output && c.a[s].arena >= 0 && c.a[s].arena != c.a[X].arena) {
      bool shared = false;
      for (int t = 0; t < kSlots; ++t) shared |= t != s && c.a[t].arena == c.a[s].arena && !c.a[t].output;
      if (!shared) std::memset(c.arenas[c.a[s].arena].data(), 0x5a, c.arenas[c.a[s].arena].size());
    }

  // Special values: (argument, element, kind) triples.
  for (int k = 0; k < 24 && in.left(); ++k) {
    const Slot s = used[in.u8() % used.size()];
    const std::uint8_t at = in.u8(), kind = in.u8();
    const Arg& a = c.a[s];
    if (a.arena < 0 || a.output || !valid_dtype(a.dtype) || a.rows <= 0 || a.cols <= 0 || a.rows > 64 || a.cols > 8192)
      continue;
    const std::int64_t r = at % a.rows, j = (at * 37 + kind) % a.cols;
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, max_finite(a.dtype),
                               -max_finite(a.dtype), smallest_subnormal(a.dtype), 0.0, -0.0, 1e30, 1e-30};
    nk::support::store(c.arenas[a.arena].data() + a.offset, a.dtype, r * a.stride + j, specials[kind % 10]);
    if (s == MEAN || s == RSTD) c.stats_garbage = true;
  }
  // A backward's statistics: the oracle's, rounded to their dtype, as a
  // forward would have written them — unless the input asked for garbage.
  if (bwd && !c.stats_garbage && c.a[X].arena >= 0 && valid_dtype(c.a[X].dtype) && c.a[X].rows == c.rows &&
      c.a[X].cols == c.D && c.rows > 0 && c.D > 0 && (c.a[X].stride >= c.D || c.rows == 1)) {
    const nk::ConstMatrix xv{c.arenas[c.a[X].arena].data() + c.a[X].offset, c.a[X].dtype, c.rows, c.D, c.a[X].stride};
    const double e = std::isfinite(c.eps) && c.eps >= 0 ? c.eps : 1e-5;
    const nk::reference::Forward f = layer ? nk::reference::layer_norm(xv, {}, {}, e) : nk::reference::rms_norm(xv, {}, e);
    for (Slot s : {MEAN, RSTD}) {
      const Arg& a = c.a[s];
      if (a.arena < 0 || !valid_dtype(a.dtype) || a.cols != c.rows) continue;
      const std::vector<double>& v = s == MEAN ? f.mean : f.rstd;
      for (std::int64_t r = 0; r < c.rows; ++r) nk::support::store(c.arenas[a.arena].data() + a.offset, a.dtype, r, v[r]);
    }
  } else if (bwd) {
    c.stats_garbage = true;  // whatever the statistics hold, they are not x's
  }

  if (c.stats_garbage && bwd) {
    for (Slot s : {MEAN, RSTD}) {
      const Arg& a = c.a[s];
      if (a.arena < 0 || !valid_dtype(a.dtype) || a.cols <= 0 || a.cols > 64) continue;
      for (std::int64_t r = 0; r < a.cols; ++r)
        if (rng() % 3 == 0) nk::support::store(c.arenas[a.arena].data() + a.offset, a.dtype, r, draw(s, a.dtype) * 1e3 - 5);
    }
  }
  return c;
}

// One line per argument: what the call was, for a failure report.
std::string describe(const Call& c) {
  static const char* slot[] = {"x", "residual", "dy", "dh_out", "weight", "bias", "mean", "rstd",
                               "y", "h", "dx", "dweight", "dbias"};
  std::string s = std::string(op_name(c.op)) + " rows=" + std::to_string(c.rows) + " D=" + std::to_string(c.D) +
                  " eps=" + num(c.eps) + " offset=" + num(c.offset) +
                  (c.stats_garbage ? " garbage-stats" : "");
  for (int k = 0; k < kSlots; ++k) {
    const Arg& a = c.a[k];
    if (!a.used) continue;
    s += std::string("\n    ") + slot[k] + ": " + (a.present ? "" : "absent ") +
         (valid_dtype(a.dtype) ? std::string(nk::dtype_name(a.dtype)) : "dtype#" + std::to_string(static_cast<int>(a.dtype))) +
         " (" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + ") stride " + std::to_string(a.stride) +
         (a.null_data ? " null" : "") + (a.device != nk::Device::cpu ? " cuda" : "") + " buffer " +
         std::to_string(a.arena) + " +" + std::to_string(a.offset);
    if (a.arena >= 0 && a.present && !a.null_data && valid_dtype(a.dtype) && a.rows > 0 && a.cols > 0 && a.rows <= 8 &&
        a.cols <= (std::getenv("NORMKIT_FUZZ_VERBOSE") ? 4096 : 16) && a.stride <= 4096) {
      s += " [";
      for (std::int64_t r = 0; r < a.rows; ++r)
        for (std::int64_t j = 0; j < a.cols; ++j)
          s += num(nk::reference::load(c.arenas[a.arena].data() + a.offset, a.dtype, r * a.stride + j)) +
               (j + 1 < a.cols ? " " : r + 1 < a.rows ? " | " : "");
      s += "]";
    }
  }
  return s;
}

// ---- views and the call ---------------------------------------------------

const void* data_of(const Arg& a, const std::vector<std::vector<unsigned char>>& arenas) {
  if (!a.present || a.null_data || a.arena < 0) return nullptr;
  return arenas[a.arena].data() + a.offset;
}

nk::ConstMatrix cmat(const Call& c, Slot s, const std::vector<std::vector<unsigned char>>& arenas) {
  const Arg& a = c.a[s];
  if (!a.present) return {};
  return {data_of(a, arenas), a.dtype, a.rows, a.cols, a.stride, a.device};
}
nk::Matrix mat(Call& c, Slot s) {
  const nk::ConstMatrix m = cmat(c, s, c.arenas);
  return {const_cast<void*>(m.data), m.dtype, m.rows, m.cols, m.row_stride, m.device};
}
nk::ConstVector cvec(const Call& c, Slot s, const std::vector<std::vector<unsigned char>>& arenas) {
  const Arg& a = c.a[s];
  if (!a.present) return {};
  return {data_of(a, arenas), a.dtype, a.cols, a.device};
}
nk::Vector vec(Call& c, Slot s) {
  const nk::ConstVector v = cvec(c, s, c.arenas);
  return {const_cast<void*>(v.data), v.dtype, v.size, v.device};
}

void invoke(Call& c) {
  const auto& A = c.arenas;
  switch (c.op) {
    case Op::layer:
      nk::layer_norm(cmat(c, X, A), cvec(c, W, A), cvec(c, B, A), c.eps, mat(c, Y), vec(c, MEAN), vec(c, RSTD));
      break;
    case Op::rms:
      nk::rms_norm(cmat(c, X, A), cvec(c, W, A), c.eps, mat(c, Y), vec(c, RSTD), c.offset);
      break;
    case Op::add_layer:
      nk::add_layer_norm(cmat(c, X, A), cmat(c, RES, A), cvec(c, W, A), cvec(c, B, A), c.eps, mat(c, H), mat(c, Y),
                         vec(c, MEAN), vec(c, RSTD));
      break;
    case Op::add_rms:
      nk::add_rms_norm(cmat(c, X, A), cmat(c, RES, A), cvec(c, W, A), c.eps, mat(c, H), mat(c, Y), vec(c, RSTD),
                       c.offset);
      break;
    case Op::layer_bwd:
      nk::layer_norm_backward(cmat(c, DY, A), cmat(c, X, A), cvec(c, MEAN, A), cvec(c, RSTD, A), cvec(c, W, A),
                              mat(c, DX), vec(c, DW), vec(c, DB));
      break;
    case Op::rms_bwd:
      nk::rms_norm_backward(cmat(c, DY, A), cmat(c, X, A), cvec(c, RSTD, A), cvec(c, W, A), mat(c, DX), vec(c, DW),
                            c.offset);
      break;
    case Op::add_layer_bwd:
      nk::add_layer_norm_backward(cmat(c, DY, A), cmat(c, DHOUT, A), cmat(c, X, A), cvec(c, MEAN, A),
                                  cvec(c, RSTD, A), cvec(c, W, A), mat(c, DX), vec(c, DW), vec(c, DB));
      break;
    case Op::add_rms_bwd:
      nk::add_rms_norm_backward(cmat(c, DY, A), cmat(c, DHOUT, A), cmat(c, X, A), cvec(c, RSTD, A), cvec(c, W, A),
                                mat(c, DX), vec(c, DW), c.offset);
      break;
  }
}

// Conditions under which the call must fail, whatever else is true.
std::string must_fail(const Call& c) {
  if (c.rows > 0 && c.D == 0 && c.a[X].present) return "D = 0 with rows > 0";
  for (int s = 0; s < kSlots; ++s) {
    const Arg& a = c.a[s];
    if (!a.used || !a.present) continue;
    if (a.device != nk::Device::cpu) return "an argument on cuda";
    if (a.rows < 0 || a.cols < 0) return "a negative size";
    if (!valid_dtype(a.dtype)) return "an invalid dtype";
    if (a.null_data && a.rows > 0 && a.cols > 0) return "null data with elements";
    if (a.rows > 1 && a.stride < a.cols) return "row_stride < D";
  }
  // Scalars enter the activations' arithmetic: f32 unless they are f64.
  const double scalar_max = max_finite(c.act == DType::f64 ? DType::f64 : DType::f32);
  const bool needs_eps = !is_bwd(c.op);
  if (needs_eps && !(std::isfinite(c.eps) && c.eps >= 0 && c.eps <= scalar_max)) return "eps not finite, >= 0, in range";
  if (!is_layer(c.op) && !(std::isfinite(c.offset) && std::abs(c.offset) <= scalar_max))
    return "weight_offset not finite and in range";
  if (c.offset != 0 && !c.a[W].present && !is_layer(c.op)) return "weight_offset without weight";
  return "";
}

// ---- checking a successful call -------------------------------------------

using Arenas = std::vector<std::vector<unsigned char>>;

// Bytes of each arena that some output view covers.
std::vector<std::vector<bool>> written_mask(const Call& c) {
  std::vector<std::vector<bool>> m(c.arenas.size());
  for (std::size_t i = 0; i < m.size(); ++i) m[i].assign(c.arenas[i].size(), false);
  for (int s = 0; s < kSlots; ++s) {
    const Arg& a = c.a[s];
    if (!a.output || a.arena < 0 || !a.present || a.rows <= 0 || a.cols <= 0) continue;
    const std::size_t es = esize(a.dtype);
    for (std::int64_t r = 0; r < a.rows; ++r)
      for (std::size_t b = 0; b < static_cast<std::size_t>(a.cols) * es; ++b)
        m[a.arena][a.offset + static_cast<std::size_t>(r * a.stride) * es + b] = true;
  }
  return m;
}

std::vector<double> values(const Call& c, Slot s, const Arenas& arenas) {
  const Arg& a = c.a[s];
  if (a.matrix) return nk::reference::to_double(cmat(c, s, arenas));
  return nk::reference::to_double(cvec(c, s, arenas), a.cols, 0.0);
}

// A reference value as the output dtype holds it when it is beyond range.
double as_stored(double v, DType t) {
  unsigned char one[8];
  nk::support::store(one, t, 0, v);
  const double s = nk::reference::load(one, t, 0);
  return std::isinf(s) ? s : v;
}

// Compares got with ref element by element: a finite reference within the
// budget (skipped where the budget's own scale passes the arithmetic's range,
// when intermediate overflow is the honest answer), a non-finite one matched
// (for statistics, any non-finite value).
void compare(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
             const std::vector<double>& scale, DType out, DType acc, double g,
             const std::vector<bool>* row_checked = nullptr, std::int64_t D = 1) {
  const double limit =
      (acc == DType::f64 ? std::numeric_limits<double>::max() : double{std::numeric_limits<float>::max()}) / 64;
  const double out_max = max_finite(out);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (row_checked && !(*row_checked)[i / static_cast<std::size_t>(D)]) continue;
    // Beyond the arithmetic's range the intermediate may honestly overflow.
    if (std::isfinite(scale[i]) && std::abs(scale[i]) > limit) continue;
    auto fail = [&](const std::string& why) {
      die(std::string(what) + "[" + std::to_string(i) + "] = " + num(got[i]) + ", reference " + num(ref[i]) + ": " +
          why);
    };
    // A non-finite reference needs a non-finite result. Which of NaN and
    // ±Inf is not held to the oracle's here: it can hinge on whether an
    // intermediate underflowed to 0 before meeting an Inf (x̂·Inf is Inf,
    // 0·Inf is NaN); tests/cpp/test_nonfinite.cc asserts the documented
    // patterns for NaN/Inf in x exactly.
    if (!std::isfinite(ref[i])) {
      if (std::isfinite(got[i])) fail("expected a non-finite value");
      continue;
    }
    // A finite reference whose budget is not finite (a row whose statistics
    // are non-finite, e.g. RMSNorm of a row holding Inf, where rstd = 0): a
    // finite result, unless the exact value itself rounds past the range.
    if (!std::isfinite(scale[i])) {
      if (!std::isfinite(got[i]) && std::abs(ref[i]) <= out_max) fail("expected a finite value");
      continue;
    }
    // Otherwise within the budget — or non-finite where the budget reaches
    // past the output's range (the exact value may round to ±Inf).
    const double b = nk::test::budget(out, acc, g, ref[i], scale[i]);
    if (std::abs(got[i] - ref[i]) <= b) continue;
    if (!std::isfinite(got[i]) && std::abs(ref[i]) + b > out_max) continue;
    fail("budget " + num(b));
  }
}

void check_values(const Call& c, const Arenas& before) {
  const std::int64_t rows = c.rows, D = c.D;
  if (rows == 0) return;
  const bool layer = is_layer(c.op);
  const Arenas& after = c.arenas;
  const nk::ConstVector w = cvec(c, W, before), b = layer ? cvec(c, B, before) : nk::ConstVector{};
  // LayerNorm has no weight_offset.
  const std::vector<double> gain = nk::test::gain_size(w, D, layer ? 0.0 : c.offset);
  const std::vector<double> shift = nk::reference::to_double(b, D, 0.0);
  const DType act = c.act;
  // Rows the oracle can judge: its arithmetic is double, so f64 rows with
  // |x| beyond ~1e154/√D overflow its own squares, and rows below ~1e-154
  // underflow them (which matters when eps does not dominate). The kernels
  // rescale such rows; the oracle does not. Those rows are not value-checked.
  const double eps_used = is_bwd(c.op) ? (std::isfinite(c.eps) && c.eps >= 0 ? c.eps : 1e-5) : c.eps;
  auto judgeable = [&](const std::vector<double>& xin) {
    std::vector<bool> ok(static_cast<std::size_t>(rows), true);
    for (std::int64_t r = 0; r < rows; ++r) {
      double amax = 0;
      for (std::int64_t j = 0; j < D; ++j) {
        const double v = xin[static_cast<std::size_t>(r * D + j)];
        amax = std::max(amax, std::abs(v));
      }
      if (act == DType::f64 && (amax > 1e150 || (amax < 1e-145 && eps_used < 1e-250))) ok[r] = false;
    }
    return ok;
  };

  if (!is_bwd(c.op)) {
    // The norm's input: x, or h as the kernel stored it (checked first).
    std::vector<double> xin;
    nk::ConstMatrix xin_view = cmat(c, X, before);
    if (is_fused(c.op)) {
      const std::vector<double> xv = values(c, X, before), rv = values(c, RES, before);
      std::vector<double> href(xv.size()), hscale(xv.size());
      for (std::size_t i = 0; i < xv.size(); ++i) {
        href[i] = xv[i] + rv[i];
        hscale[i] = std::abs(href[i]);
      }
      compare("h", values(c, H, after), href, hscale, c.a[H].dtype, act, 0.25);
      xin_view = cmat(c, H, after);
    }
    xin = nk::reference::to_double(xin_view);
    const nk::reference::Forward ref =
        layer ? nk::reference::layer_norm(xin_view, w, b, c.eps) : nk::reference::rms_norm(xin_view, w, c.eps, c.offset);
    const nk::test::Scales s = nk::test::scales(xin, nullptr, rows, D, gain, shift, ref, layer, act);
    const std::vector<bool> ok = judgeable(xin);
    compare("y", values(c, Y, after), ref.y, s.y, act, act, growth(D), &ok, D);
    const nk::test::StatScales ss = nk::test::stat_scales(xin, rows, D, ref, act);
    if (c.a[RSTD].present)
      compare("rstd", values(c, RSTD, after), ref.rstd, ss.rstd, c.a[RSTD].dtype, act, growth(D), &ok, 1);
    if (layer && c.a[MEAN].present)
      compare("mean", values(c, MEAN, after), ref.mean, ss.mean, c.a[MEAN].dtype, act, growth(D), &ok, 1);
    return;
  }

  // Backward: statistics as written by a forward, unless the input put
  // garbage in them (then only the checks above apply).
  if (c.stats_garbage) return;
  const double e = std::isfinite(c.eps) && c.eps >= 0 ? c.eps : 1e-5;
  const nk::ConstMatrix xv = cmat(c, X, before), dyv = cmat(c, DY, before);
  const std::vector<double> xin = nk::reference::to_double(xv), dy = nk::reference::to_double(dyv);
  // The oracle's statistics without a gain (as stored for the kernel) and
  // its backward with the gain.
  const nk::reference::Forward fref =
      layer ? nk::reference::layer_norm(xv, w, b, e) : nk::reference::rms_norm(xv, w, e, c.offset);
  nk::reference::Backward ref = layer ? nk::reference::layer_norm_backward(dyv, xv, w, e)
                                      : nk::reference::rms_norm_backward(dyv, xv, w, e, c.offset);
  nk::test::Scales s = nk::test::scales(xin, &dy, rows, D, gain, shift, fref, layer, act);
  // The stored statistics were rounded to their dtype: for f32 an extra
  // relative 2^-24 in rstd and u·|mean| in the mean, both inside one growth·u.
  // dx is rstd times a sum of terms of size |g·dy|: when those pass the
  // arithmetic's range before the multiplication by rstd brings them back,
  // the bound does not apply (huge dy with huge gains); such elements are
  // skipped like the forward's (scale past the limit).
  // The same for the terms inside the row sums (g·x̂ for one large gain).
  const double range = act == DType::f64 ? std::numeric_limits<double>::max() : double{std::numeric_limits<float>::max()};
  std::vector<bool> terms_in_range(static_cast<std::size_t>(rows), true);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double mu = layer ? fref.mean[r] : 0.0;
    for (std::int64_t j = 0; j < D; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * D + j);
      const double term = std::abs(gain[j] * dy[i]) * (1 + std::abs((xin[i] - mu) * fref.rstd[r]));
      if (term > range / 64) terms_in_range[r] = false;
      double& sc = s.dx[i];
      if (fref.rstd[r] > 0 && sc / fref.rstd[r] > range / 64) sc = std::numeric_limits<double>::max();
    }
  }
  if (is_fused(c.op) && c.a[DHOUT].present) {
    const std::vector<double> dho = values(c, DHOUT, before);
    if (std::getenv("NORMKIT_FUZZ_VERBOSE"))
      for (std::size_t i = 0; i < 20 && i < dho.size(); ++i)
        std::fprintf(stderr, "  dx_ref[%zu] = %.9g, dh_out = %.9g, scale %.9g\n", i, ref.dx[i], dho[i], s.dx[i]);
    for (std::size_t i = 0; i < dho.size(); ++i) {
      ref.dx[i] += dho[i];
      s.dx[i] += std::abs(dho[i]);
    }
  }
  // Rows whose exact rstd is beyond the stored dtype's normal range (eps = 0
  // on a tiny row: Inf; a huge eps: 0 or subnormal) were handed a statistic
  // that has lost its digits: not the forward's information, not checked.
  std::vector<bool> row_ok = judgeable(xin);
  bool all_ok = true;
  const DType st = c.a[RSTD].dtype;
  const double st_min = st == DType::f64 ? 0x1p-1022 : 0x1p-126;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double exact = fref.rstd[r], stored = as_stored(exact, st);
    const bool kept = !std::isfinite(exact) || exact == 0 || (std::isfinite(stored) && std::abs(exact) >= st_min);
    row_ok[r] = row_ok[r] && kept && terms_in_range[r];
    all_ok = all_ok && row_ok[r];
  }
  compare(is_fused(c.op) ? "dh" : "dx", values(c, DX, after), ref.dx, s.dx, c.a[DX].dtype, act, growth(D),
          &row_ok, D);
  if (!all_ok) return;
  if (c.a[DW].present)
    compare("dweight", values(c, DW, after), ref.dweight, s.dweight, c.a[DW].dtype, act, growth(D) + growth(rows));
  if (layer && c.a[DB].present)
    compare("dbias", values(c, DB, after), ref.dbias, s.dbias, c.a[DB].dtype, act, growth(rows));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  Call c = decode(in);
  const Arenas before = c.arenas;
  g_call = describe(c);
  const std::string fail_reason = must_fail(c);
  try {
    invoke(c);
  } catch (const nk::Error& e) {
    const std::string msg = e.what(), prefix = std::string(op_name(c.op)) + ": ";
    if (msg.compare(0, prefix.size(), prefix) != 0) die("message does not start with '" + prefix + "': " + msg);
    if (c.arenas != before) die("a buffer changed before the error: " + msg);
    // A call built without any broken argument or aliasing must succeed.
    if (fail_reason.empty() && !c.perturbed && !c.aliased) die("a valid call failed: " + msg);
    return 0;
  }
  if (!fail_reason.empty()) die(std::string("no error for ") + fail_reason + " in " + op_name(c.op));
  // Only the outputs' elements may have changed.
  const auto mask = written_mask(c);
  for (std::size_t i = 0; i < c.arenas.size(); ++i)
    for (std::size_t k = 0; k < c.arenas[i].size(); ++k)
      if (!mask[i][k] && c.arenas[i][k] != before[i][k])
        die("byte " + std::to_string(k) + " of buffer " + std::to_string(i) + " outside every output was written");
  if (c.rows > 64 || c.D > 8192) return 0;
  check_values(c, before);
  return 0;
}
