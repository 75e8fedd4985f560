#pragma once
// The compiled, executor-agnostic part of basic_shard_pool: the pool's core (pool_impl,
// compiled in src/: its shards, threads, registry and lock stay out of what users include),
// and the initiations of its operations. Defined in src/pool/shard_pool.cpp.
#include "rdmacm/detail/initiation.hpp"
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

class shard_pool_base {
public:
    /// How `stop` ends the connections.
    using stop_mode = pool_stop_mode;
    /// What becomes of an exception that escapes a handler run by a shard, or a coroutine
    /// started by `async_serve`: called with it on that shard's thread (`shard`: its index);
    /// the shard goes on serving the others. Must not throw.
    using exception_handler = std::function<void(std::size_t shard, std::exception_ptr)>;

    using void_handler = completion_handler<void(error_code)>;
    using place_handler = completion_handler<void(error_code, pooled_connection)>;
    using rebalance_handler = completion_handler<void(error_code, rebalance_report)>;
    using serve_function = std::function<boost::asio::awaitable<void>(pooled_connection)>;

    std::size_t size() const noexcept;
    boost::asio::io_context& context(std::size_t i);
    /// Connections on each shard now.
    std::vector<std::size_t> connection_counts() const;
    /// Every connection's key, shard and load now, oldest first: those being placed too
    /// (listed on the shard they go to from the moment the placement picks it; a move of
    /// one waits for its placement to end).
    std::vector<connection_load> snapshot() const;
    /// The shard whose thread calls this; empty on any other thread.
    std::optional<std::size_t> running_shard() const noexcept;
    /// Stops: closes the listeners being served (their pending requests are rejected) and
    /// refuses new placements and moves; completes the placements still on their way (an
    /// `async_place` whose move has not ended) with errc::pool_stopped and closes their
    /// connections, in either mode; then closes every connection (`close`) or lets each
    /// end on its own (`drain`); then waits for every shard's io_context to run out of work
    /// and joins the threads. Called on one of the pool's threads it does not wait (the
    /// destructor does). Idempotent.
    void stop(stop_mode mode = stop_mode::close);

    shard_pool_base(const shard_pool_base&) = delete;
    shard_pool_base& operator=(const shard_pool_base&) = delete;

protected:
    using executor_type = boost::asio::any_io_executor;
    // Starts `shards` threads; throws system_error (an event channel), errc::no_such_shard (0).
    shard_pool_base(std::size_t shards, placement_policy placement, exception_handler on_exception);
    ~shard_pool_base() { stop(stop_mode::close); }

    // Shard `shard`'s io_context executor; throws std::out_of_range past the end.
    executor_type shard_executor(std::size_t shard) const;

    // What an operation's initiation holds: the pool's core, and the executor its handler
    // runs on by default (a shard's, or a served listener's).
    template <typename Derived, typename Signature>
    struct pool_initiation : initiation<Derived, Signature> {
        std::shared_ptr<pool_impl> impl;
        executor_type ex;
        const executor_type& get_executor() const noexcept { return ex; }
    };
    struct initiate_place : pool_initiation<initiate_place, void(error_code, pooled_connection)> {
        template <typename Handler>
        void operator()(Handler&& h, connection_request request) const {
            place(*impl, std::move(request), this->erase(std::forward<Handler>(h)));
        }
    };
    // Serves the requests of the listening id `source` (null: the listener was moved from),
    // whose executor is `ex`. (`serve` copied: a deferred operation may be started more than
    // once, each time from what it stored.)
    struct initiate_serve : pool_initiation<initiate_serve, void(error_code)> {
        template <typename Handler>
        void operator()(Handler&& h, const std::shared_ptr<id_impl>& source, const serve_function& serve) const {
            shard_pool_base::serve(*impl, source, ex, serve, this->erase(std::forward<Handler>(h)));
        }
    };
    // Moves a connection, or the one with a key (errc::not_open if there is none).
    struct initiate_move : pool_initiation<initiate_move, void(error_code)> {
        template <typename Handler, typename Connection>
        void operator()(Handler&& h, const Connection& connection, std::size_t to) const {
            move(*impl, connection, to, this->erase(std::forward<Handler>(h)));
        }
    };
    struct initiate_rebalance : pool_initiation<initiate_rebalance, void(error_code, rebalance_report)> {
        template <typename Handler>
        void operator()(Handler&& h, const rebalance_plan& plan) const {
            rebalance(*impl, plan, this->erase(std::forward<Handler>(h)));
        }
    };
    template <typename Initiation, typename Signature, typename Token, typename... Args>
    auto start(executor_type ex, Token&& token, Args&&... args) {
        return boost::asio::async_initiate<Token, Signature>(Initiation{{{}, impl_, std::move(ex)}}, token,
                                                             std::forward<Args>(args)...);
    }

    std::shared_ptr<pool_impl> impl_;

private:
    static void place(pool_impl& pool, connection_request request, place_handler h);
    static void serve(pool_impl& pool, const std::shared_ptr<id_impl>& source, const executor_type& ex,
                      serve_function serve, void_handler h);
    static void move(pool_impl& pool, const std::shared_ptr<pooled_state>& connection, std::size_t to, void_handler h);
    static void move(pool_impl& pool, std::uint64_t key, std::size_t to, void_handler h);
    static void rebalance(pool_impl& pool, const rebalance_plan& plan, rebalance_handler h);
};

} // namespace rdmacm::detail
