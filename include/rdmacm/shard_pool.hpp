#pragma once
/// @file
/// `rdmacm::basic_shard_pool`, `rdmacm::shard_pool`: a server sharded over several
/// io_contexts, with live rebalancing.
#include "rdmacm/detail/async_start.hpp"
#include "rdmacm/detail/pool_ops.hpp"
#include "rdmacm/listener.hpp"
#include "rdmacm/placement.hpp"
#include "rdmacm/pool_stop_mode.hpp"
#include "rdmacm/pooled_connection.hpp"
#include "rdmacm/rebalance.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace rdmacm {

/// N shards, each an io_context run by a thread of its own with an event channel of its own.
/// Connection requests accepted anywhere are placed on a shard (`placement_policy`), their
/// ids moved there before they are accepted; connections can later be moved between shards
/// live (`async_move`, `async_rebalance`), their data path and pending operations with them.
///
/// Every asynchronous function's handler runs on its associated executor, by default the
/// executor named in its description — once the pool has stopped (its shards no longer
/// run), the system executor; none runs inside the initiating call.
///
/// Thread safety: every member function may be called from any thread, including the
/// shards' own. Lifetime: connections, listeners being served and operations in flight must
/// end before the pool is destroyed (`stop()` ends them); the pool must not be destroyed on
/// one of its own threads. Not movable: it owns its threads, and a pool that could be
/// moved from would be one whose every member is a misuse.
///
/// `Executor`: the type of `get_executor(i)`, whose default completion token the
/// operations take: constructible from `any_io_executor`, as for every I/O object of the
/// library. `use_awaitable_t<>::as_default_on_t<shard_pool> pool(n)` makes a pool whose
/// operations `co_await` without a token.
template <typename Executor = boost::asio::any_io_executor>
class basic_shard_pool {
public:
    using executor_type = Executor;
    /// The same pool type on another executor type (e.g. for `as_default_on_t`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_shard_pool<Executor1>;
    };
    /// How `stop` ends the connections (one type for every `Executor`).
    using stop_mode = pool_stop_mode;

    /// What becomes of an exception that escapes a handler run by a shard, or a coroutine
    /// started by `async_serve`: called with it on that shard's thread (`shard`: its index);
    /// the shard goes on serving the others. Must not throw.
    using exception_handler = std::function<void(std::size_t shard, std::exception_ptr)>;

    /// Starts `shards` threads (at least one). Throws system_error if an event channel cannot
    /// be created ("rdma_create_event_channel"), errc::no_such_shard for 0 shards.
    /// `on_exception` empty (the default): such an exception is reported on stderr — never
    /// swallowed silently.
    explicit basic_shard_pool(std::size_t shards, placement_policy placement = round_robin(),
                              exception_handler on_exception = {})
        : impl_(detail::pool_ops::create(shards, std::move(placement), std::move(on_exception))) {}
    basic_shard_pool(const basic_shard_pool&) = delete;
    basic_shard_pool& operator=(const basic_shard_pool&) = delete;
    /// `stop(stop_mode::close)`.
    ~basic_shard_pool() { stop(stop_mode::close); }

    std::size_t size() const noexcept { return detail::pool_ops::size(*impl_); }
    /// Shard `i`'s io_context executor (throws std::out_of_range past the end).
    executor_type get_executor(std::size_t i) const {
        return detail::executor_as<Executor>(detail::pool_ops::executor(*impl_, i));
    }
    boost::asio::io_context& context(std::size_t i) { return detail::pool_ops::context(*impl_, i); }
    /// Connections on each shard now.
    std::vector<std::size_t> connection_counts() const { return detail::pool_ops::connection_counts(*impl_); }
    /// Every connection's key, shard and load now, oldest first: those being placed too
    /// (listed on the shard they go to from the moment the placement picks it; a move of
    /// one waits for its placement to end).
    std::vector<connection_load> snapshot() const { return detail::pool_ops::snapshot(*impl_); }
    /// The shard whose thread calls this; empty on any other thread.
    std::optional<std::size_t> running_shard() const noexcept { return detail::pool_ops::running_shard(*impl_); }

    /// Places a connection request (from any listener) on the shard the placement policy
    /// picks: the request's id moves to that shard's event channel, then the handler gets the
    /// connection, still to be accepted (or rejected) by its new owner.
    ///
    /// @par Completion Signature
    /// `void(error_code, pooled_connection)`.
    /// @par Errors
    /// On any of these the request is rejected:
    /// - errc::pool_stopped.
    /// - errc::no_such_shard: from the placement.
    /// - errc::not_open.
    /// - The migration's errors.
    /// @par Executor
    /// The handler's, by default the chosen shard's.
    /// @par Per-Operation Cancellation
    /// None: a cancellation request is ignored (the move is short, and half a placement
    /// would leave the request nowhere).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, pooled_connection))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_place(connection_request request,
                     Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return detail::async_start<void(error_code, pooled_connection)>(
            detail::pool_ops::executor(*impl_, 0), std::forward<Token>(token),
            [impl = impl_, r = std::move(request)](auto handler) mutable {
                detail::pool_ops::place(*impl, std::move(r), std::move(handler));
            });
    }

    /// Accepts connection requests from `l` until it is closed or the pool stops, places
    /// each, and spawns `serve(pooled_connection)` (a function returning `awaitable<void>`) on the
    /// connection's executor: the coroutine starts on its shard and follows the connection
    /// when it moves. A coroutine's exception ends that connection only (closes it) and goes
    /// to the pool's exception handler. Requests
    /// that cannot be placed are rejected.
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - The error that ended accepting: operation_aborted when the listener was closed or
    ///   the pool stopped.
    /// - errc::not_open: `l` closed, or moved from, already; or closed between two requests.
    /// @par Executor
    /// The handler's, by default the listener's; so is the default token (a listener made
    /// with `as_default_on` gives its own).
    /// @par Lifetime
    /// The operation refers to the listening id, not to `l`: the object may be moved
    /// meanwhile (or go, which closes the id and ends the operation).
    /// @par Per-Operation Cancellation
    /// None through the slot: close the listener (or stop the pool) to end it; requests not
    /// yet accepted are then rejected. Connections already served go on.
    template <typename ListenerExecutor, typename Serve,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<ListenerExecutor>>
    auto async_serve(basic_listener<ListenerExecutor>& l, Serve serve,
                     Token&& token = boost::asio::default_completion_token_t<ListenerExecutor>()) {
        // One line saying what is wrong, instead of std::function's many.
        constexpr bool callable = std::is_invocable_r_v<boost::asio::awaitable<void>, Serve&, pooled_connection>;
        static_assert(callable, "async_serve: `serve` must be callable as awaitable<void>(rdmacm::pooled_connection)");
        if constexpr (callable) {
            const boost::asio::any_io_executor ex(l.get_executor());
            return detail::async_start<void(error_code)>(
                ex, std::forward<Token>(token),
                [impl = impl_, source = detail::access::impl(l), ex,
                 s = detail::pool_ops::serve_function(std::move(serve))](auto handler) mutable {
                    detail::pool_ops::serve(*impl, source, ex, std::move(s), std::move(handler));
                });
        }
    }

    /// Moves a live connection to shard `to`: its id (`rdma_migrate_id` to that shard's
    /// event channel), its queue pair's completion polling (its CQ's channel read on the new
    /// shard), and its strand — handlers
    /// pending on the connection's executor run on the new shard, in order, none lost. Works
    /// while the connection carries traffic.
    ///
    /// @par Completion Signature
    /// `void(error_code)`. Moving to the shard it is on succeeds at once.
    /// @par Errors
    /// - errc::not_open: the connection closed.
    /// - errc::no_such_shard.
    /// - errc::operation_in_progress: a move of the connection waits already.
    /// - errc::pool_stopped: also for a move still waiting when the pool stops.
    /// - The migration's errors: the connection then stays where it was.
    /// @par Executor
    /// The handler's, by default shard `to`'s (shard 0's when `to` is out of range).
    /// @par Per-Operation Cancellation
    /// None: a cancellation request is ignored (as for cm_id::async_migrate: a move is
    /// short, and once `rdma_migrate_id` is made it cannot be undone).
    /// @par Ordered while the connection is placed or moved
    /// The move waits for that to end and is made then, before anything ordered later (one
    /// move may wait so). A placement ends by way of the request's context (the listener's):
    /// do not block the thread running it on such a move (a future's `get()`).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_move(const pooled_connection& c, std::size_t to,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return detail::async_start<void(error_code)>(detail::pool_ops::executor(*impl_, to < size() ? to : 0),
                                                     std::forward<Token>(token),
                                                     [impl = impl_, s = detail::access::state(c), to](auto handler) {
                                                         detail::pool_ops::move(*impl, s, to, std::move(handler));
                                                     });
    }
    /// The same, for the connection with key `key` (`pooled_connection::key()`, `snapshot()`):
    /// errc::not_open if there is none.
    /// @par Completion Signature
    /// As for the overload above.
    /// @par Per-Operation Cancellation
    /// None, as for the overload above.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_move(std::uint64_t key, std::size_t to,
                    Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return detail::async_start<void(error_code)>(
            detail::pool_ops::executor(*impl_, to < size() ? to : 0), std::forward<Token>(token),
            [impl = impl_, key, to](auto handler) { detail::pool_ops::move(*impl, key, to, std::move(handler)); });
    }

    /// Takes a snapshot, asks `plan` which connections to move, and moves them all (at once).
    ///
    /// @par Completion Signature
    /// `void(error_code, rebalance_report)`: the counts before and after, the moves made and
    /// those that failed (a connection that closed meanwhile).
    /// @par Errors
    /// - errc::pool_stopped.
    /// - errc::no_such_shard: the plan named one.
    /// @par Executor
    /// The handler's, by default shard 0's.
    /// @par Per-Operation Cancellation
    /// None: a cancellation request is ignored; every move asked for is made.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, rebalance_report))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_rebalance(rebalance_plan plan,
                         Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return detail::async_start<void(error_code, rebalance_report)>(
            detail::pool_ops::executor(*impl_, 0), std::forward<Token>(token),
            [impl = impl_, p = std::move(plan)](auto handler) {
                detail::pool_ops::rebalance(*impl, p, std::move(handler));
            });
    }

    /// Stops: closes the listeners being served (their pending requests are rejected) and
    /// refuses new placements and moves; completes the placements still on their way (an
    /// `async_place` whose move has not ended) with errc::pool_stopped and closes their
    /// connections, in either mode; then closes every connection (`close`) or lets each
    /// end on its own (`drain`); then waits for every shard's io_context to run out of work
    /// and joins the threads. Called on one of the pool's threads it does not wait (the
    /// destructor does). Idempotent.
    void stop(stop_mode mode = stop_mode::close) { detail::pool_ops::stop(*impl_, mode); }

private:
    std::shared_ptr<detail::pool_impl> impl_;
};

/// The shard pool whose shards' executors are `any_io_executor`s.
using shard_pool = basic_shard_pool<>;

} // namespace rdmacm
