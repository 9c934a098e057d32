// The RMSNorm forward kernels: forward_rows<NormKind::rms_norm> (forward_rows.inc).
#define NORMKIT_FORWARD_KIND rms_norm
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/forward_rows.inc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "cpu/forward_rows.inc"
