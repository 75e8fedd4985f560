#pragma once
// What basic_cm_id and basic_listener share that depends on their Executor: the typed
// executor, default completion tokens, and the asynchronous operations of every id (next
// event, migrate). `Base` is their compiled, executor-agnostic part.
#include "rdmacm/detail/id_handle.hpp"
#include "rdmacm/event.hpp"
#include "rdmacm/event_channel.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/executor.hpp>

#include <type_traits>

namespace rdmacm::detail {

template <typename Executor, typename Base>
class typed_id : public Base {
public:
    using executor_type = Executor;

    /// The executor completion handlers run on unless they have their own: the one the id
    /// was created with, or the one it last migrated to.
    executor_type get_executor() const noexcept { return executor_as<Executor>(Base::get_executor()); }

    /// Waits for the next CM event that no other operation consumes: the peer's
    /// DISCONNECTED, ADDR_CHANGE, DEVICE_REMOVAL, TIMEWAIT_EXIT, and events the id got
    /// through calls made on `native_handle()`. Events are kept, in order, until asked for.
    ///
    /// @par Completion Signature
    /// `void(error_code, cm_event)`.
    /// @par Errors
    /// - errc::operation_in_progress: another next-event wait is outstanding.
    /// - errc::not_open, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal, partial, total: the wait ends with operation_aborted; no event is lost
    /// (a later wait gets it).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_next_event(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code, cm_event)>(op_kind::next_event, std::forward<Token>(token),
                                                                op_call{});
    }

    /// Closes the id, as `close()` does, and completes once librdmacm has destroyed it (on
    /// the library's destroyer thread, after `close()` has returned): a listener's port is
    /// free for a new bind then, and a connection's queue pair is gone. What a server that
    /// restarts on its port waits for.
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// None (an id closed already completes once it is destroyed; a moved-from one at once).
    /// @par Executor
    /// The handler's, by default the id's executor when it completes (a move made before the
    /// destroy takes it along); its work is tracked until then, there, so `run()` waits for
    /// the destroy.
    /// @par Per-Operation Cancellation
    /// None: a destroy cannot be undone; a cancellation request is ignored.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_close(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->start_close(std::forward<Token>(token));
    }

    /// Moves the id, live, to `target` (`rdma_migrate_id`): from then on its events come
    /// through `target` and its handlers run on `ex` (default: the target's executor) —
    /// between io_contexts, or between strands of one. Works in any state (resolving,
    /// connecting, a connection request before accept, established, disconnecting), except
    /// a listening listener (errc::listener_cannot_migrate: migrate before listen).
    ///
    /// While it moves, nothing of the id runs on the old channel: events are held and new
    /// operations wait; afterwards they are delivered, then started, on the new executor,
    /// in order, before anything newer (per-id FIFO: no event lost, duplicated or
    /// reordered). Outstanding operations carry on and complete on the new executor
    /// (unless their handler has an executor of its own). Handlers already handed to the
    /// old executor run before the migration completes. Never blocks a thread: the
    /// migrate call itself is made on the old channel's reader strand and does not wait
    /// (every event read was acknowledged at once).
    ///
    /// A coroutine awaiting this stays on its own executor (as any Asio operation's
    /// awaiter does): the id's events and unbound handlers move, the coroutine does not.
    /// Serve the id from a `shard_pool` to move the coroutine with it (a pooled
    /// connection's executor, its coroutine's, moves to the new shard).
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - The call's errno (location "rdma_migrate_id"): the id then stays, fully usable,
    ///   where it was.
    /// - errc::operation_in_progress: another migration of the id is under way.
    /// - errc::listener_cannot_migrate.
    /// - errc::channel_closed, errc::not_open.
    /// - boost::asio::error::invalid_argument: `ex` is empty (the id stays).
    /// - operation_aborted: closed while moving.
    /// @par Executor
    /// The handler's, by default `ex` (the id's, when `ex` is empty).
    /// @par Lifetime
    /// Both channels' execution contexts must outlive the operation.
    /// @par Per-Operation Cancellation
    /// None: a migration is short and cannot be undone halfway; a cancellation request is
    /// ignored.
    template <typename ChannelExecutor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                                            Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_migrate(basic_event_channel<ChannelExecutor>& target,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        const auto target_ex =
            target.is_open() ? boost::asio::any_io_executor(target.get_executor()) : Base::get_executor();
        return this->start_migrate(target_ex, std::forward<Token>(token), access::impl(target), target_ex);
    }
    template <typename ChannelExecutor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                                            Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_migrate(basic_event_channel<ChannelExecutor>& target, const executor_type& ex,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        const boost::asio::any_io_executor target_ex(ex);
        return this->start_migrate(target_ex, std::forward<Token>(token), access::impl(target), target_ex);
    }
    /// Moves the id to the event channel of the execution context `ex` runs on (the one
    /// `cm_id(ctx)` uses), its handlers then on `ex`: another io_context, or a strand of
    /// one. As above otherwise; errors also those of making that channel (location
    /// "rdma_create_event_channel").
    template <typename TargetExecutor,
              BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>,
              typename = std::enable_if_t<boost::asio::execution::is_executor<TargetExecutor>::value>>
    auto async_migrate(const TargetExecutor& ex,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        const boost::asio::any_io_executor target_ex(ex);
        return this->start_migrate(target_ex, std::forward<Token>(token), target_ex);
    }

protected:
    using Base::Base;
    explicit typed_id(Base&& other) noexcept : Base(std::move(other)) {}
};

} // namespace rdmacm::detail
