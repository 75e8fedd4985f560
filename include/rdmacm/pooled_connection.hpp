#pragma once
/// @file
/// `rdmacm::pooled_connection`: a connection served by a `shard_pool`.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/detail/access.hpp"
#include "rdmacm/event.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <memory>

namespace rdmacm {

namespace detail {
struct pooled_state;
class pool_impl;
} // namespace detail

/// A connection placed on a shard of a `shard_pool`: its id (on the shard's event channel,
/// not yet accepted when the pool hands it over), the CONNECT_REQUEST event, and its place in
/// the pool (counted for placement, moved by rebalancing).
///
/// `get_executor()` is the connection's own strand, on whatever shard the connection is on:
/// a coroutine spawned on it (as `shard_pool::async_serve` does) and handlers bound to it run
/// on the connection's shard, one at a time and in order, and follow the connection when the
/// pool moves it. I/O objects the handler creates (timers, ...) stay on the io_context they
/// were created on (their completions still follow).
///
/// Destroying the connection closes the id (and its queue pair) and takes it out of the pool.
/// Thread safety: as for cm_id; `shard()`, `key()` and `set_load()` from any thread. A
/// connection must not outlive its pool's execution contexts (destroy it in its handler).
class pooled_connection {
public:
    using executor_type = boost::asio::any_io_executor;

    pooled_connection(pooled_connection&&) noexcept = default;
    pooled_connection& operator=(pooled_connection&& other) noexcept;
    pooled_connection(const pooled_connection&) = delete;
    pooled_connection& operator=(const pooled_connection&) = delete;
    ~pooled_connection() { leave(); }

    cm_id& id() noexcept { return id_; }
    const cm_id& id() const noexcept { return id_; }
    /// The peer's CONNECT_REQUEST (private data, connection parameters).
    const cm_event& request() const noexcept { return request_; }
    /// The connection's strand on its current shard (see above).
    executor_type get_executor() const noexcept { return executor_; }
    /// The shard the connection is on now.
    std::size_t shard() const noexcept;
    /// Names the connection in rebalance plans; unique within its pool.
    std::uint64_t key() const noexcept;
    /// The load `even_load()` balances (e.g. bytes or requests per second); 0 by default.
    void set_load(double load) noexcept;
    double load() const noexcept;

private:
    friend class detail::pool_impl;
    friend struct detail::access;
    pooled_connection(cm_id id, const cm_event& request, std::shared_ptr<detail::pooled_state> state,
                      executor_type ex) noexcept;
    void leave() noexcept;

    cm_id id_;
    cm_event request_;
    std::shared_ptr<detail::pooled_state> state_;
    executor_type executor_;
};

} // namespace rdmacm
