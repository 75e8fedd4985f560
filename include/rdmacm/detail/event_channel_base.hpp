#pragma once
// The compiled, executor-agnostic part of basic_event_channel: a move-only owner of the
// channel's shared state (channel_impl, compiled in src/: its reader, descriptor and locks
// stay out of what users include). Defined in src/cm/event_channel.cpp.
#include <boost/asio/any_io_executor.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace rdmacm::detail {

class channel_impl;

class event_channel_base {
public:
    using native_handle_type = rdma_event_channel*;

    /// The librdmacm channel (still owned by this object).
    native_handle_type native_handle() const noexcept;
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// Lets go of the channel: this object is closed (ids can no longer be made on it:
    /// errc::channel_closed), and the channel itself ends once its last id is gone, its
    /// reader then leaving the execution context. Idempotent; also done by the destructor.
    void close() noexcept;
    /// Number of CM events read so far.
    std::uint64_t events_read() const noexcept;

    event_channel_base(const event_channel_base&) = delete;
    event_channel_base& operator=(const event_channel_base&) = delete;

protected:
    friend struct access;
    // A new channel, its reader on `ex`; throws system_error naming the failed call.
    explicit event_channel_base(const boost::asio::any_io_executor& ex);
    event_channel_base(event_channel_base&& other) noexcept = default;
    event_channel_base& operator=(event_channel_base&& other) noexcept {
        if (this != &other) {
            close();
            impl_ = std::move(other.impl_);
        }
        return *this;
    }
    ~event_channel_base() { close(); }

    std::shared_ptr<channel_impl> impl_;
};

} // namespace rdmacm::detail
