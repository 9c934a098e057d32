#include "dispatch/observer.hpp"

namespace normkit {

namespace detail {
std::atomic<OpObserver*> g_op_observer{nullptr};
}  // namespace detail

OpObserver* set_op_observer(OpObserver* observer) noexcept {
  return detail::g_op_observer.exchange(observer, std::memory_order_acq_rel);
}

OpObserver* op_observer() noexcept { return detail::installed_observer(); }

}  // namespace normkit
