#pragma once
// The event channel of an execution context (compiled in src/cm/context_channel.cpp): what an
// id made or moved with an executor and no channel of its own is on — `cm_id id(ctx)`,
// `listener l(ctx)`, `async_migrate(ex)`. One per context, as the completion channels are:
// one fd for all its ids. Made on first use, it lives while an id is on it (each id owns
// it), and goes with the last of them; the next id makes a new one. It keeps the context
// running only while an operation waits there (fd_reader's liveness::operations): as
// with Asio's sockets, run() returns when no operation is pending, ids open or not.
#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <utility>

namespace rdmacm::detail {

class channel_impl;

// The channel with an owner taken for the holder, let go of with the holder (an id made on
// it takes one of its own first).
class owned_channel {
public:
    owned_channel() = default;
    explicit owned_channel(std::shared_ptr<channel_impl> ch) noexcept : channel_(std::move(ch)) {}
    owned_channel(owned_channel&&) noexcept = default;
    owned_channel& operator=(owned_channel&& other) noexcept {
        std::swap(channel_, other.channel_); // (ours goes with `other`)
        return *this;
    }
    owned_channel(const owned_channel&) = delete;
    ~owned_channel();
    const std::shared_ptr<channel_impl>& get() const noexcept { return channel_; }
    explicit operator bool() const noexcept { return channel_ != nullptr; }

private:
    std::shared_ptr<channel_impl> channel_;
};

// The channel of the execution context `ex` runs on (its reader on that context's own
// executor, context_executor(ex)); throws system_error naming the failed call.
owned_channel context_channel(const boost::asio::any_io_executor& ex);

} // namespace rdmacm::detail
