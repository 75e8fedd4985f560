#pragma once
// What the public headers do with an event channel's shared state (channel_impl, compiled
// in src/): its reader, descriptor and locks stay out of what users include.
#include <boost/asio/any_io_executor.hpp>

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>

namespace rdmacm::detail {

class channel_impl;

namespace channel_ops {
// A new channel, its reader on `ex`, owned by the caller; throws system_error naming the
// failed call.
std::shared_ptr<channel_impl> create(const boost::asio::any_io_executor& ex);
rdma_event_channel* native(const channel_impl& channel) noexcept;
std::uint64_t events_read(const channel_impl& channel) noexcept;
// The caller's ownership ends (the channel goes once its ids are gone too).
void release(channel_impl& channel) noexcept;
} // namespace channel_ops

} // namespace rdmacm::detail
