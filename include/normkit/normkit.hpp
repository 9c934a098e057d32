// normkit — everything a user needs, in one include.
#pragma once

#include "normkit/device.hpp"
#include "normkit/error.hpp"
#include "normkit/half.hpp"
#include "normkit/observer.hpp"
#include "normkit/ops.hpp"
#include "normkit/tensor.hpp"
#include "normkit/threading.hpp"
#include "normkit/version.hpp"
