#pragma once
/// @file
/// `rdmacm::cm_id`: an RDMA CM connection id as an Asio I/O object.
#include "rdmacm/conn_params.hpp"
#include "rdmacm/detail/id_handle.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event.hpp"
#include "rdmacm/event_channel.hpp"

#include <chrono>
#include <span>

namespace rdmacm {

class queue_pair;

/// The tag for `cm_id::async_migrate(synchronous, token)`: synchronous mode.
struct synchronous_t {
    explicit synchronous_t() = default;
};
inline constexpr synchronous_t synchronous{};

/// One end of an RDMA connection: an `rdma_cm_id` on an `event_channel`, with the CM's
/// operations as Asio asynchronous operations (any completion token: callbacks,
/// `use_awaitable`, `use_future`, `deferred`, `as_tuple`, ...).
///
/// **Handlers** never run inside the initiating call. They run on their associated
/// executor, by default `get_executor()` (the channel's executor unless another was given);
/// outstanding work is tracked on it until the handler has run; the handler's associated
/// allocator is used for the operation's state.
///
/// **Overlap**: at most one operation of each kind (resolve address, resolve route,
/// connect/accept, disconnect, next event) may be outstanding; another one of the same kind
/// completes with errc::operation_in_progress.
///
/// **Cancellation**: `cancel()` aborts all outstanding operations; each operation honours
/// its handler's cancellation slot as documented. A CM operation cannot be recalled from
/// the kernel: a cancelled resolve/connect/accept/disconnect is abandoned (its event is
/// dropped when it comes), and a new one of that kind is refused until then; after a
/// cancelled connect the id is only good for `close()`. Time-outs are cancellation: bind a
/// timer's expiry to the slot (e.g. `co_await (op || timer.async_wait())`).
///
/// **Lifetime**: the object may be destroyed (or closed) with operations outstanding: they
/// complete with operation_aborted. The id itself is destroyed on the library's destroyer
/// thread, never on an io_context thread (every event read was acknowledged at once, so
/// librdmacm never waits for acks). Destroy ids and channels before their execution
/// context.
///
/// **Thread safety**: distinct objects safe; shared objects unsafe, except that `cancel()`
/// and `close()` may be called from any thread.
class cm_id : public detail::id_handle {
public:
    /// A new id on `channel`, its handlers on the channel's executor (or `ex`). Throws
    /// system_error ("rdma_create_id") on failure. `ps`: RDMA_PS_TCP (RC), RDMA_PS_UDP (UD).
    explicit cm_id(event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);
    cm_id(const executor_type& ex, event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);
    /// An empty (closed) id whose operations complete with errc::not_open.
    explicit cm_id(const executor_type& ex) noexcept : id_handle(ex, nullptr) {}
    cm_id(cm_id&&) noexcept = default;
    cm_id& operator=(cm_id&&) noexcept = default;
    ~cm_id() = default;

    /// Resolves `remote` to an RDMA device and address (`rdma_resolve_addr`), from `local`
    /// if given (else from the address the route to `remote` uses). `timeout` bounds the
    /// kernel's resolution (then errc::address_error, status -ETIMEDOUT).
    ///
    /// Signature: `void(error_code)`. Errors: errc::address_error (the event's status is the
    /// kernel's reason), errc::address_family_not_supported, the call's errno
    /// (system_category, location "rdma_resolve_addr"), errc::not_open,
    /// errc::operation_in_progress, operation_aborted. Cancellation: terminal.
    template <typename Token>
    auto async_resolve_address(const endpoint& remote, std::chrono::milliseconds timeout, Token&& token) {
        return async_resolve_address(endpoint{}, remote, timeout, std::forward<Token>(token));
    }
    template <typename Token>
    auto async_resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds timeout,
                               Token&& token) {
        return start<void(error_code)>(detail::op_kind::resolve_address, std::forward<Token>(token),
                                       detail::op_call::resolve_address(local, remote, timeout));
    }

    /// Resolves the route to the resolved address (`rdma_resolve_route`).
    /// Signature: `void(error_code)`; errc::route_error, the call's errno, as above.
    /// Cancellation: terminal.
    template <typename Token>
    auto async_resolve_route(std::chrono::milliseconds timeout, Token&& token) {
        return start<void(error_code)>(detail::op_kind::resolve_route, std::forward<Token>(token),
                                       detail::op_call::resolve_route(timeout));
    }

    /// Connects (`rdma_connect`) and completes when the connection is ESTABLISHED, with
    /// that event (the peer's accept private data, `conn_param()`). Create the queue pair
    /// first (iWARP requires one).
    ///
    /// Signature: `void(error_code, cm_event)`. Errors: errc::rejected (the event keeps the
    /// reject reason as `status()` and the peer's private data), errc::unreachable,
    /// errc::connect_error, errc::disconnected (the connection went before it was
    /// established: DISCONNECTED, or TIMEWAIT_EXIT alone), errc::device_removed,
    /// errc::private_data_too_long, the call's errno, errc::not_open,
    /// errc::operation_in_progress, operation_aborted. Cancellation: terminal.
    template <typename Token>
    auto async_connect(const conn_params& params, Token&& token) {
        return start<void(error_code, cm_event)>(detail::op_kind::establish, std::forward<Token>(token),
                                                 detail::op_call::connect(params));
    }

    /// Accepts the connection request this id came from (`rdma_accept`) and completes when
    /// the connection is ESTABLISHED. Create the queue pair first.
    /// Signature: `void(error_code, cm_event)`; errors as for async_connect.
    /// Cancellation: terminal.
    template <typename Token>
    auto async_accept(const conn_params& params, Token&& token) {
        return start<void(error_code, cm_event)>(detail::op_kind::establish, std::forward<Token>(token),
                                                 detail::op_call::accept(params));
    }

    /// Rejects the connection request this id came from, sending `private_data`
    /// (`rdma_reject`). Throws system_error / sets `ec` on failure.
    void reject(std::span<const std::byte> private_data = {});
    void reject(std::span<const std::byte> private_data, error_code& ec) noexcept;

    /// Disconnects (`rdma_disconnect`) and completes on this side's DISCONNECTED. On IB
    /// that waits for the peer's own disconnect (or the CM's time-out); if the peer
    /// disconnected first, it completes at once; a TIMEWAIT_EXIT with no DISCONNECTED
    /// before it completes it too (the connection is gone).
    /// Signature: `void(error_code)`. Cancellation: terminal.
    template <typename Token>
    auto async_disconnect(Token&& token) {
        return start<void(error_code)>(detail::op_kind::disconnect, std::forward<Token>(token),
                                       detail::op_call::disconnect());
    }

    /// Creates an RC/UD queue pair on the id (`rdma_create_qp`): `pd` nullptr takes the
    /// device's default protection domain; `attr.send_cq`/`recv_cq` nullptr makes librdmacm
    /// create the completion queues. Needs a resolved route or a connection request. The
    /// queue pair is destroyed with the id. Throws system_error / sets `ec`.
    void create_qp(ibv_qp_init_attr& attr, ibv_pd* pd = nullptr);
    void create_qp(ibv_qp_init_attr& attr, ibv_pd* pd, error_code& ec) noexcept;
    /// The queue pair, or nullptr.
    ibv_qp* qp() const noexcept;

    using id_handle::async_migrate;
    /// Puts the id in **synchronous mode** (`rdma_migrate_id(id, NULL)`): its events go to
    /// a private channel of librdmacm, and the CM calls are the blocking ones below, made
    /// on any thread that is not needed to run handlers meanwhile. Asynchronous operations
    /// then complete with errc::synchronous_mode. `async_migrate(channel, ...)` brings the
    /// id back (events queued meanwhile move with it).
    ///
    /// Refused with errc::event_pending while anything of the id is queued or expected (an
    /// event not yet delivered, an operation or next-event wait outstanding — cancel it,
    /// or let it complete, first): librdmacm's next blocking call would take that event
    /// for its own answer (semantics F5). An event the kernel still held is caught after
    /// the move, and the move undone. Already synchronous: completes at once.
    ///
    /// Signature: `void(error_code)`. Errors: errc::event_pending, the call's errno
    /// (location "rdma_migrate_id"), and those of the other async_migrate. Executor: the
    /// id's (which stays). Cancellation: none.
    template <typename Token>
    auto async_migrate(synchronous_t, Token&& token) {
        return detail::async_start<void(error_code)>(
            get_executor(), std::forward<Token>(token), [this_ex = executor_, impl = impl_](auto handler) {
                if (impl)
                    impl->migrate(nullptr, {}, std::move(handler));
                else
                    detail::id_impl::refuse(this_ex, std::move(handler), errc::not_open);
            });
    }

    /// @name Blocking calls of synchronous mode
    /// Each makes its librdmacm call and waits for the event that answers it; `ec` as the
    /// asynchronous operation would complete with (errc::rejected, ...). Refused with
    /// errc::not_synchronous on an id not in synchronous mode, errc::event_pending while
    /// an event of the id is queued (read it with next_event first), and
    /// errc::operation_in_progress while another blocking call runs on the id. If another
    /// event came first, it is kept for next_event and the call fails with
    /// errc::unexpected_event (its own answer follows through next_event). `close()` waits
    /// for a blocking call in progress. Not thread-safe beyond that.
    /// @{
    void resolve_address(const endpoint& remote, std::chrono::milliseconds timeout, error_code& ec) {
        resolve_address(endpoint{}, remote, timeout, ec);
    }
    void resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds timeout,
                         error_code& ec) {
        call_sync(detail::op_kind::resolve_address, detail::op_call::resolve_address(local, remote, timeout), ec);
    }
    void resolve_route(std::chrono::milliseconds timeout, error_code& ec) {
        call_sync(detail::op_kind::resolve_route, detail::op_call::resolve_route(timeout), ec);
    }
    /// Returns the ESTABLISHED event (or the failure's, e.g. REJECTED with its status).
    cm_event connect(const conn_params& params, error_code& ec) {
        return call_sync(detail::op_kind::establish, detail::op_call::connect(params), ec);
    }
    cm_event accept(const conn_params& params, error_code& ec) {
        return call_sync(detail::op_kind::establish, detail::op_call::accept(params), ec);
    }
    /// After the peer's DISCONNECTED was read, returns at once (IB answers nothing more;
    /// the id's destruction replies to the peer).
    void disconnect(error_code& ec) { call_sync(detail::op_kind::disconnect, detail::op_call::disconnect(), ec); }
    /// The id's next event not taken by a call (e.g. the peer's DISCONNECTED), waiting up to
    /// `timeout` (boost::asio::error::timed_out), negative: no limit.
    cm_event next_event(std::chrono::milliseconds timeout, error_code& ec);
    /// @}

private:
    friend class detail::id_impl;
    friend class queue_pair;
    explicit cm_id(std::shared_ptr<detail::id_impl> impl) noexcept;
    cm_event call_sync(detail::op_kind kind, const detail::op_call& call, error_code& ec);
};

} // namespace rdmacm
