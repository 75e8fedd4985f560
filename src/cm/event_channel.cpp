#include "rdmacm/detail/event_channel_base.hpp"

#include "cm/channel_impl.hpp"

#include <utility>

namespace rdmacm::detail {

event_channel_base::event_channel_base(const boost::asio::any_io_executor& ex)
    : impl_(channel_impl::create(ex, fd_reader::liveness::reader)) {}

event_channel_base::native_handle_type event_channel_base::native_handle() const noexcept {
    return impl_ ? impl_->native() : nullptr;
}

void event_channel_base::close() noexcept {
    if (impl_) std::exchange(impl_, nullptr)->remove_owner();
}

std::uint64_t event_channel_base::events_read() const noexcept { return impl_ ? impl_->events_read() : 0; }

} // namespace rdmacm::detail
