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
    /// errc::connect_error, errc::private_data_too_long, the call's errno, errc::not_open,
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
    /// disconnected first, it completes at once.
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

private:
    friend class detail::id_impl;
    explicit cm_id(std::shared_ptr<detail::id_impl> impl) noexcept;
};

} // namespace rdmacm
