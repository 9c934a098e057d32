// The RMSNorm instantiations of the forward kernels (forward-inl.hpp), in a
// translation unit of their own so that a build compiles them in parallel
// with the LayerNorm ones in forward.cc, which also holds the entry point.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/forward_rms.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "cpu/forward-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace normkit::detail::HWY_NAMESPACE {

void ForwardRmsRange(const ForwardArgs& a, std::int64_t begin, std::int64_t end, bool stream) {
  ForwardKind<NormKind::rms_norm>(a, begin, end, stream);
}

}  // namespace normkit::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace normkit::detail {

HWY_EXPORT(ForwardRmsRange);

void forward_rms_range(const ForwardArgs& a, std::int64_t begin, std::int64_t end, bool stream) {
  HWY_DYNAMIC_DISPATCH(ForwardRmsRange)(a, begin, end, stream);
}

}  // namespace normkit::detail
#endif  // HWY_ONCE
