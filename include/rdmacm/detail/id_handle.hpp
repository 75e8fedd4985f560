#pragma once
// What cm_id and listener share, apart from their executor type: a move-only handle on an
// id_impl, and the operations that make sense on both (close, cancel, addresses); the
// asynchronous ones they share are typed_id's.
#include "rdmacm/detail/async_start.hpp"
#include "rdmacm/detail/id_ops.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event_channel.hpp"

#include <memory>

namespace rdmacm::detail {

class id_handle {
public:
    using executor_type = boost::asio::any_io_executor;
    using native_handle_type = rdma_cm_id*;

    /// The executor completion handlers run on unless they have their own: the one the id
    /// was created with, or the one it last migrated to.
    executor_type get_executor() const noexcept { return current_executor(impl_, executor_); }
    /// The librdmacm id (still owned by this object); nullptr when closed.
    native_handle_type native_handle() const noexcept { return impl_ ? id_ops::native(*impl_) : nullptr; }
    bool is_open() const noexcept { return native_handle() != nullptr; }

    /// Aborts every outstanding operation: their handlers get operation_aborted. CM work
    /// already started in the kernel (a resolution, a connect) goes on, its events are
    /// dropped; a cancelled connect leaves an id that is only good for close().
    void cancel() noexcept {
        if (impl_) id_ops::cancel(*impl_);
    }
    /// Cancels, then destroys the id and its queue pair on the library's destroyer thread
    /// (librdmacm's destroy can block: siw holds a connecting id up to 10 s), never on an
    /// io_context thread. A connection request never accepted is rejected. Idempotent;
    /// also done by the destructor.
    void close() noexcept {
        if (impl_) id_ops::close(*impl_);
    }

    /// The bound / resolved local address; empty endpoint when there is none.
    endpoint local_endpoint() const noexcept;
    /// The peer's address once resolved or connected.
    endpoint remote_endpoint() const noexcept;

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
    friend struct access;
    // The id's executor as it is now (it moves), or `fallback` when there is no id.
    static executor_type current_executor(const std::shared_ptr<id_impl>& impl,
                                          const executor_type& fallback) noexcept {
        return impl ? id_ops::executor(*impl) : fallback;
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
            [ex = executor_, impl = impl_] { return current_executor(impl, ex); }, std::forward<Token>(token),
            [ex = executor_, impl = impl_, kind, call = std::move(call)](auto handler) {
                id_ops::start(impl, ex, kind, std::move(handler), call);
            });
    }

    // Closes the id; the handler completes once it is destroyed (see async_close). Its work
    // follows the id (a move made before the destroy takes it along).
    template <typename Token>
    auto start_close(Token&& token) {
        return async_start<void(error_code), work_of_followers::by_object>(
            [ex = executor_, impl = impl_] { return current_executor(impl, ex); }, std::forward<Token>(token),
            [ex = executor_, impl = impl_](auto handler) {
                id_ops::close_when_destroyed(impl, ex, std::move(handler));
            });
    }

    // Moves the id to the channel `target`, its handlers then on `ex` (see async_migrate).
    template <typename Token>
    auto start_migrate(const std::shared_ptr<channel_impl>& target, executor_type ex, Token&& token) {
        auto io_ex = migrate_initiation_executor(ex);
        return async_start<void(error_code)>(
            io_ex, std::forward<Token>(token),
            [this_ex = executor_, impl = impl_, target, ex = std::move(ex)](auto handler) {
                id_ops::migrate(impl, this_ex, target, ex, std::move(handler));
            });
    }

    // Moves the id to the channel of `ex`'s execution context, its handlers then on `ex`.
    template <typename Token>
    auto start_migrate_to_context(const executor_type& ex, Token&& token) {
        return async_start<void(error_code)>(migrate_initiation_executor(ex), std::forward<Token>(token),
                                             [this_ex = executor_, impl = impl_, ex](auto handler) {
                                                 id_ops::migrate_to_context(impl, this_ex, ex, std::move(handler));
                                             });
    }

    // A move's handler runs on its target executor by default; with none given (an empty
    // executor, refused with invalid_argument), on the id's, so that the refusal has
    // somewhere to run instead of the initiation throwing bad_executor.
    executor_type migrate_initiation_executor(const executor_type& target_ex) const noexcept {
        return target_ex ? target_ex : get_executor();
    }

    executor_type executor_;
    std::shared_ptr<id_impl> impl_;
};

} // namespace rdmacm::detail
