#pragma once
/// @file
/// `rdmacm::event_channel`: an `rdma_event_channel` driven by Asio.
#include "rdmacm/detail/channel_impl.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <memory>
#include <type_traits>

namespace rdmacm {

/// An RDMA CM event channel whose fd is watched by an Asio `posix::stream_descriptor`.
///
/// One reader, on a strand of the channel's executor, reads every event to EAGAIN on each
/// readiness, copies it into a `cm_event`, acknowledges it at once and hands it to its id.
/// One channel serves any number of ids; ids keep it alive (the channel is destroyed after
/// its last id, the fd closed by librdmacm, never by Asio).
///
/// Thread safety: distinct objects safe; shared objects unsafe. The reader itself runs on
/// its own strand, so the executor may be an io_context run by several threads.
///
/// The channel and its ids must be destroyed before their execution context, as with
/// every Asio I/O object.
class event_channel {
public:
    using executor_type = boost::asio::any_io_executor;

    /// Creates the channel; throws `boost::system::system_error` naming the failed call
    /// (e.g. "rdma_create_event_channel": no RDMA CM in this kernel).
    explicit event_channel(const executor_type& ex) : executor_(ex), impl_(detail::channel_impl::create(ex)) {}
    template <typename ExecutionContext,
              typename = std::enable_if_t<std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>>>
    explicit event_channel(ExecutionContext& ctx) : event_channel(executor_type(ctx.get_executor())) {}

    // A moved-from channel keeps its executor, as Asio's I/O objects do.
    event_channel(event_channel&& other) noexcept
        : executor_(other.executor_), // NOLINT(performance-move-constructor-init): kept, see above
          impl_(std::move(other.impl_)) {}
    event_channel& operator=(event_channel&& other) noexcept {
        if (this != &other) {
            release();
            executor_ = other.executor_;
            impl_ = std::move(other.impl_);
        }
        return *this;
    }
    event_channel(const event_channel&) = delete;
    event_channel& operator=(const event_channel&) = delete;
    ~event_channel() { release(); }

    /// The executor the channel's reader and, by default, its ids run on.
    const executor_type& get_executor() const noexcept { return executor_; }
    /// The librdmacm channel (still owned by this object).
    rdma_event_channel* native_handle() const noexcept { return impl_ ? impl_->native() : nullptr; }
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Number of CM events read so far.
    std::uint64_t events_read() const noexcept { return impl_ ? impl_->events_read() : 0; }

    /// For the library's own classes.
    const std::shared_ptr<detail::channel_impl>& impl() const noexcept { return impl_; }

private:
    void release() noexcept {
        if (impl_) std::exchange(impl_, nullptr)->remove_owner();
    }
    executor_type executor_;
    std::shared_ptr<detail::channel_impl> impl_;
};

} // namespace rdmacm
