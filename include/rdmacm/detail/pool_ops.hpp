#pragma once
// What the public headers do with a shard pool's core (pool_impl, compiled in src/): its
// shards, threads, registry and lock stay out of what users include.
#include "rdmacm/detail/completion_handler.hpp"
#include "rdmacm/placement.hpp"
#include "rdmacm/pool_stop_mode.hpp"
#include "rdmacm/pooled_connection.hpp"
#include "rdmacm/rebalance.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace rdmacm {
struct connection_request;
}

namespace rdmacm::detail {

class id_impl;
class pool_impl;
struct pooled_state;

namespace pool_ops {
using void_handler = completion_handler<void(error_code)>;
using place_handler = completion_handler<void(error_code, pooled_connection)>;
using rebalance_handler = completion_handler<void(error_code, rebalance_report)>;
using serve_function = std::function<boost::asio::awaitable<void>(pooled_connection)>;
using exception_handler = std::function<void(std::size_t shard, std::exception_ptr)>;

// Starts `shards` threads; throws system_error (an event channel), errc::no_such_shard (0).
std::shared_ptr<pool_impl> create(std::size_t shards, placement_policy placement, exception_handler on_exception);
std::size_t size(const pool_impl& pool) noexcept;
// Shard `shard`'s io_context executor; throws std::out_of_range past the end.
boost::asio::any_io_executor executor(const pool_impl& pool, std::size_t shard);
boost::asio::io_context& context(pool_impl& pool, std::size_t shard);
std::vector<std::size_t> connection_counts(const pool_impl& pool);
std::vector<connection_load> snapshot(const pool_impl& pool);
std::optional<std::size_t> running_shard(const pool_impl& pool) noexcept;

void place(pool_impl& pool, connection_request request, place_handler h);
// Serves the requests of the listening id `source` (null: the listener was moved from),
// whose executor is `ex`.
void serve(pool_impl& pool, const std::shared_ptr<id_impl>& source, const boost::asio::any_io_executor& ex,
           serve_function serve, void_handler h);
void move(pool_impl& pool, const std::shared_ptr<pooled_state>& connection, std::size_t to, void_handler h);
// The connection with `key` (errc::not_open if there is none).
void move(pool_impl& pool, std::uint64_t key, std::size_t to, void_handler h);
void rebalance(pool_impl& pool, const rebalance_plan& plan, rebalance_handler h);
void stop(pool_impl& pool, pool_stop_mode mode);
} // namespace pool_ops

} // namespace rdmacm::detail
