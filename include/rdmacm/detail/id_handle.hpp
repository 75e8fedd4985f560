#pragma once
// What cm_id and listener share, apart from their executor type: a move-only handle on an
// id_impl, and the operations that make sense on both (close, cancel, addresses); the
// asynchronous ones they share are typed_id's.
#include "rdmacm/detail/async_start.hpp"
#include "rdmacm/detail/id_impl.hpp"
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
    executor_type get_executor() const noexcept { return impl_ ? impl_->get_executor() : executor_; }
    /// The librdmacm id (still owned by this object); nullptr when closed.
    native_handle_type native_handle() const noexcept { return impl_ && !impl_->closed() ? impl_->native() : nullptr; }
    bool is_open() const noexcept { return native_handle() != nullptr; }

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

    // Moves the id to the channel `target`, its handlers then on `ex` (see async_migrate).
    template <typename Token>
    auto start_migrate(const std::shared_ptr<channel_impl>& target, const executor_type& ex, Token&& token) {
        return async_start<void(error_code)>(
            ex, std::forward<Token>(token), [this_ex = executor_, impl = impl_, target, ex](auto handler) {
                if (impl && target)
                    impl->migrate(target, ex, std::move(handler));
                else
                    id_impl::refuse(this_ex, std::move(handler), impl ? errc::channel_closed : errc::not_open);
            });
    }

    executor_type executor_;
    std::shared_ptr<id_impl> impl_;
};

} // namespace rdmacm::detail
