// The installed op observer (normkit/observer.hpp), as the dispatch layer
// reads it on every call.
#pragma once

#include <atomic>

#include "normkit/observer.hpp"

namespace normkit::detail {

extern std::atomic<OpObserver*> g_op_observer;

// Acquire: an observer installed by another thread is seen fully built.
inline OpObserver* installed_observer() noexcept { return g_op_observer.load(std::memory_order_acquire); }

}  // namespace normkit::detail
