#pragma once
/// @file
/// `rdmacm::basic_shard_pool`, `rdmacm::shard_pool`: a server sharded over several
/// io_contexts, with live rebalancing.
#include "rdmacm/detail/shard_pool_base.hpp"
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
class basic_shard_pool : public detail::shard_pool_base {
public:
    using executor_type = Executor;
    /// The same pool type on another executor type (e.g. for `as_default_on_t`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_shard_pool<Executor1>;
    };
    /// Starts `shards` threads (at least one). Throws system_error if an event channel cannot
    /// be created ("rdma_create_event_channel"), errc::no_such_shard for 0 shards.
    /// `on_exception` empty (the default): such an exception is reported on stderr — never
    /// swallowed silently.
    explicit basic_shard_pool(std::size_t shards, placement_policy placement = round_robin(),
                              exception_handler on_exception = {})
        : shard_pool_base(shards, std::move(placement), std::move(on_exception)) {}
    /// `stop(stop_mode::close)`.
    ~basic_shard_pool() = default;

    /// Shard `i`'s io_context executor (throws std::out_of_range past the end).
    executor_type get_executor(std::size_t i) const { return detail::executor_as<Executor>(shard_executor(i)); }

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
        return start<initiate_place, void(error_code, pooled_connection)>(shard_executor(0), std::forward<Token>(token),
                                                                          std::move(request));
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
            return start<initiate_serve, void(error_code)>(boost::asio::any_io_executor(l.get_executor()),
                                                           std::forward<Token>(token), detail::access::impl(l),
                                                           serve_function(std::move(serve)));
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
        return start<initiate_move, void(error_code)>(shard_executor(to < size() ? to : 0), std::forward<Token>(token),
                                                      detail::access::state(c), to);
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
        return start<initiate_move, void(error_code)>(shard_executor(to < size() ? to : 0), std::forward<Token>(token),
                                                      key, to);
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
        return start<initiate_rebalance, void(error_code, rebalance_report)>(
            shard_executor(0), std::forward<Token>(token), std::move(plan));
    }

    // (stop, size, context, connection_counts, snapshot, running_shard: shard_pool_base's.)
};

/// The shard pool whose shards' executors are `any_io_executor`s.
using shard_pool = basic_shard_pool<>;

} // namespace rdmacm
