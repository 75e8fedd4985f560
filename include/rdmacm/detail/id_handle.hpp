#pragma once
// The compiled, executor-agnostic part that cm_id and listener share: a move-only handle on
// the id's shared state (id_impl, compiled in src/: its mutex, queues and migration
// machinery stay out of what users include), the operations that make sense on both (close,
// cancel, addresses), and the initiations of the asynchronous ones, which typed_id and
// cm_id type. Defined in src/cm/id_handle.cpp.
#include "rdmacm/detail/initiation.hpp"
#include "rdmacm/detail/io_handle.hpp"
#include "rdmacm/detail/id_machine.hpp"
#include "rdmacm/detail/op_call.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event.hpp"
#include "rdmacm/event_channel.hpp"

#include <memory>
#include <variant>

namespace rdmacm {
struct connection_request;
}

namespace rdmacm::detail {

class id_impl;
class channel_impl;

class id_handle : public io_handle<id_handle, id_impl> {
public:
    using executor_type = boost::asio::any_io_executor;
    using native_handle_type = rdma_cm_id*;

    // The handlers the core holds, one type per completion signature.
    using void_handler = completion_handler<void(error_code)>;
    using event_handler = completion_handler<void(error_code, cm_event)>;
    using request_handler = completion_handler<void(error_code, connection_request)>;
    using any_handler = std::variant<std::monostate, void_handler, event_handler, request_handler>;

    /// The executor completion handlers run on unless they have their own: the one the id
    /// was created with, or the one it last migrated to.
    executor_type get_executor() const noexcept { return current_executor(impl_, executor_); }
    /// The librdmacm id (still owned by this object); nullptr when closed.
    native_handle_type native_handle() const noexcept;
    bool is_open() const noexcept { return native_handle() != nullptr; }

    /// Aborts every outstanding operation: their handlers get operation_aborted. CM work
    /// already started in the kernel (a resolution, a connect) goes on, its events are
    /// dropped; a cancelled connect leaves an id that is only good for close().
    void cancel() noexcept;
    /// Cancels, then destroys the id and its queue pair on the library's destroyer thread
    /// (librdmacm's destroy can block: siw holds a connecting id up to 10 s), never on an
    /// io_context thread. A connection request never accepted is rejected. Idempotent;
    /// also done by the destructor.
    void close() noexcept;

    /// The bound / resolved local address; empty endpoint when there is none.
    endpoint local_endpoint() const noexcept;
    /// The peer's address once resolved or connected.
    endpoint remote_endpoint() const noexcept;

    id_handle(id_handle&& other) noexcept = default;
    id_handle& operator=(id_handle&& other) noexcept = default;

protected:
    // The id's executor as it is now (it moves), or `fallback` when there is no id.
    static executor_type current_executor(const std::shared_ptr<id_impl>& impl, const executor_type& fallback) noexcept;
    // `impl` by reference: callers may read the executor from it in the same call.
    id_handle(executor_type ex, std::shared_ptr<id_impl>&& impl) noexcept : io_handle(std::move(ex), std::move(impl)) {}
    ~id_handle() { close(); }

    // What an operation's initiation holds of the handle: the id's state, and the handle's
    // executor (where a closed handle's refusal runs).
    struct id_ref {
        std::shared_ptr<id_impl> impl;
        executor_type fallback;
        executor_type now() const noexcept { return current_executor(impl, fallback); }
    };
    id_ref ref() const { return {impl_, executor_}; }

    // Starts an operation of `kind` on the id, `call` being the librdmacm call that starts it
    // (none for waits). A closed or moved-from handle completes with errc::not_open.
    template <typename Signature>
    struct initiate_start : initiation<initiate_start<Signature>, Signature, work_of_followers::by_object> {
        id_ref id;
        executor_type get_executor() const noexcept { return id.now(); }
        template <typename Handler>
        void operator()(Handler&& h, op_kind kind, const op_call& call) const {
            start_on(id, kind, this->erase(std::forward<Handler>(h)), call);
        }
    };
    template <typename Signature, typename Token>
    auto start(op_kind kind, Token&& token, op_call call) {
        return boost::asio::async_initiate<Token, Signature>(initiate_start<Signature>{{}, ref()}, token, kind,
                                                             std::move(call));
    }

    // Closes the id; the handler completes once it is destroyed (see async_close). Its work
    // follows the id (a move made before the destroy takes it along).
    struct initiate_close : initiation<initiate_close, void(error_code), work_of_followers::by_object> {
        id_ref id;
        executor_type get_executor() const noexcept { return id.now(); }
        template <typename Handler>
        void operator()(Handler&& h) const {
            close_when_destroyed(id, this->erase(std::forward<Handler>(h)));
        }
    };
    template <typename Token>
    auto start_close(Token&& token) {
        return boost::asio::async_initiate<Token, void(error_code)>(initiate_close{{}, ref()}, token);
    }

    // Moves the id: to the channel `target`, or to the channel of `target_ex`'s execution
    // context, its handlers then on `target_ex`; or into synchronous mode (no target). The
    // handler runs on the target executor by default; with none given (an empty executor,
    // refused with invalid_argument) or none to give (synchronous mode), on the id's, so
    // that a refusal has somewhere to run instead of the initiation throwing bad_executor.
    struct initiate_migrate : initiation<initiate_migrate, void(error_code)> {
        id_ref id;
        executor_type handler_ex;
        const executor_type& get_executor() const noexcept { return handler_ex; }
        template <typename Handler>
        void operator()(Handler&& h, const std::shared_ptr<channel_impl>& target,
                        const executor_type& target_ex) const {
            migrate(id, target, target_ex, this->erase(std::forward<Handler>(h)));
        }
        template <typename Handler>
        void operator()(Handler&& h, const executor_type& target_ex) const {
            migrate_to_context(id, target_ex, this->erase(std::forward<Handler>(h)));
        }
        template <typename Handler>
        void operator()(Handler&& h) const {
            migrate_to_synchronous(id, this->erase(std::forward<Handler>(h)));
        }
    };
    template <typename Token, typename... Target>
    auto start_migrate(const executor_type& target_ex, Token&& token, const Target&... target) {
        executor_type handler_ex = target_ex ? target_ex : get_executor();
        return boost::asio::async_initiate<Token, void(error_code)>(initiate_migrate{{}, ref(), std::move(handler_ex)},
                                                                    token, target...);
    }

private:
    // The compiled operations the initiations start; with no id (a closed or moved-from
    // handle), each completes with errc::not_open on the handle's executor.
    static void start_on(const id_ref& id, op_kind kind, any_handler h, const op_call& call);
    static void close_when_destroyed(const id_ref& id, void_handler h); // (no id: at once, no error)
    // Errors: no target, errc::channel_closed; an empty target_ex, invalid_argument (on the
    // id's executor).
    static void migrate(const id_ref& id, const std::shared_ptr<channel_impl>& target, const executor_type& target_ex,
                        void_handler h);
    // Those of making the context's channel too.
    static void migrate_to_context(const id_ref& id, const executor_type& target_ex, void_handler h);
    static void migrate_to_synchronous(const id_ref& id, void_handler h);
};

} // namespace rdmacm::detail
