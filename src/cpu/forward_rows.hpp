// The forward kernels of one norm kind: rows [begin, end) on the calling
// thread, at the best SIMD target this CPU supports. Each kind is its own
// translation unit (forward_layer_norm.cc, forward_rms_norm.cc, both
// forward_rows.inc), so a build compiles the two in parallel.
#pragma once

#include <cstdint>

#include "cpu/kernels.hpp"

namespace normkit::detail {

// Which outputs a call writes with non-temporal stores: y (forward_streams)
// and the fused op's h (fused_h_streams).
struct ForwardStreams {
  bool y = false, h = false;
};

template <NormKind K>
void forward_rows(const ForwardArgs& a, std::int64_t begin, std::int64_t end, ForwardStreams stream);

template <>
void forward_rows<NormKind::layer_norm>(const ForwardArgs& a, std::int64_t begin, std::int64_t end,
                                        ForwardStreams stream);
template <>
void forward_rows<NormKind::rms_norm>(const ForwardArgs& a, std::int64_t begin, std::int64_t end,
                                      ForwardStreams stream);

}  // namespace normkit::detail
