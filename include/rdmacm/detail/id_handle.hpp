#pragma once
// What cm_id and listener share: a move-only handle on an id_impl, and the operations that
// make sense on both (close, cancel, executor, addresses, next event).
#include "rdmacm/detail/async_start.hpp"
#include "rdmacm/detail/id_impl.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event_channel.hpp"

#include <memory>

namespace rdmacm::detail {

class id_handle {
public:
    using executor_type = boost::asio::any_io_executor;

    /// The executor completion handlers run on unless they have their own: the one the id
    /// was created with, or the one it last migrated to.
    executor_type get_executor() const noexcept { return impl_ ? impl_->get_executor() : executor_; }
    /// The librdmacm id (still owned by this object); nullptr when closed.
    rdma_cm_id* native_handle() const noexcept { return impl_ && !impl_->closed() ? impl_->native() : nullptr; }
    bool is_open() const noexcept { return native_handle() != nullptr; }
    /// For the library's own classes.
    const std::shared_ptr<id_impl>& impl() const noexcept { return impl_; }

    /// Aborts every outstanding operation: their handlers get operation_aborted. CM work
    /// already started in the kernel (a resolution, a connect) goes on, its events are
    /// dropped; a cancelled connect leaves an id that is only good for close().
    void cancel() noexcept {
        if (impl_) impl_->cancel();
    }
    /// Cancels, then destroys the id and its queue pair on the library's destroyer thread
    /// (librdmacm's destroy can block: siw holds a connecting id up to 10 s), never on an
    /// io_context thread. A connection request never accepted is rejected. Idempotent;
    /// also done by the destructor.
    void close() noexcept {
        if (impl_) impl_->close();
    }

    /// The bound / resolved local address; empty endpoint when there is none.
    endpoint local_endpoint() const noexcept;
    /// The peer's address once resolved or connected.
    endpoint remote_endpoint() const noexcept;

    /// Waits for the next CM event that no other operation consumes: the peer's
    /// DISCONNECTED, ADDR_CHANGE, DEVICE_REMOVAL, TIMEWAIT_EXIT, and events the id got
    /// through calls made on `native_handle()`. Events are kept, in order, until asked for.
    ///
    /// Signature: `void(error_code, cm_event)`; error: operation_aborted,
    /// errc::operation_in_progress (another next-event wait is outstanding), errc::not_open.
    /// Cancellation: terminal, partial, total (no event is lost).
    template <typename Token>
    auto async_next_event(Token&& token) {
        return start<void(error_code, cm_event)>(op_kind::next_event, std::forward<Token>(token), op_call{});
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
    /// Signature: `void(error_code)`. Errors: the call's errno (location
    /// "rdma_migrate_id"; the id then stays, fully usable, where it was),
    /// errc::operation_in_progress (another migration of the id is under way),
    /// errc::listener_cannot_migrate, errc::channel_closed, errc::not_open,
    /// operation_aborted (closed while moving). Executor: the handler's, by default `ex`.
    /// Cancellation: none (a migration is short and cannot be undone halfway).
    /// Lifetime: both channels' execution contexts must outlive the operation.
    template <typename Token>
    auto async_migrate(event_channel& target, Token&& token) {
        return async_migrate(target, target.is_open() ? target.get_executor() : get_executor(),
                             std::forward<Token>(token));
    }
    template <typename Token>
    auto async_migrate(event_channel& target, const executor_type& ex, Token&& token) {
        return async_start<void(error_code)>(
            ex, std::forward<Token>(token),
            [this_ex = executor_, impl = impl_, target = target.impl(), ex](auto handler) {
                if (impl && target)
                    impl->migrate(target, ex, std::move(handler));
                else
                    id_impl::refuse(this_ex, std::move(handler), impl ? errc::channel_closed : errc::not_open);
            });
    }

    // A moved-from handle keeps its executor (as Asio's I/O objects do), so operations on
    // it complete with errc::not_open instead of having nowhere to run.
    id_handle(id_handle&& other) noexcept
        : executor_(other.executor_), // NOLINT(performance-move-constructor-init): kept, see above
          impl_(std::move(other.impl_)) {}
    id_handle& operator=(id_handle&& other) noexcept {
        if (this != &other) {
            close();
            executor_ = other.executor_;
            impl_ = std::move(other.impl_);
        }
        return *this;
    }

protected:
    static executor_type executor_of(const std::shared_ptr<id_impl>& impl) noexcept {
        return impl ? impl->get_executor() : executor_type{};
    }
    // `impl` by reference: callers may read the executor from it in the same call.
    id_handle(executor_type ex, std::shared_ptr<id_impl>&& impl) noexcept
        : executor_(std::move(ex)), impl_(std::move(impl)) {}
    ~id_handle() { close(); }

    // Starts an operation of `kind` on the id, `call` being the librdmacm call that starts
    // it (none for waits). A closed or moved-from handle completes with errc::not_open.
    template <typename Signature, typename Token>
    auto start(op_kind kind, Token&& token, op_call call) {
        return async_start<Signature, work_of_followers::by_object>(
            get_executor(), std::forward<Token>(token),
            [ex = executor_, impl = impl_, kind, call = std::move(call)](auto handler) {
                if (impl)
                    impl->start(kind, std::move(handler), call);
                else
                    id_impl::refuse(ex, std::move(handler), errc::not_open);
            });
    }

    executor_type executor_;
    std::shared_ptr<id_impl> impl_;
};

} // namespace rdmacm::detail
