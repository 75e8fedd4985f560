#pragma once
// The compiled, executor-agnostic part of basic_cm_id: creating the id, and the synchronous
// calls (reject, create_qp, the blocking calls of synchronous mode).
#include "rdmacm/conn_params.hpp"
#include "rdmacm/detail/id_handle.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event.hpp"

#include <chrono>
#include <span>

namespace rdmacm::detail {

// Says which constructor makes an empty id.
struct empty_id {
    explicit empty_id() = default;
};

class cm_id_base : public id_handle {
public:
    /// Rejects the connection request this id came from, sending `private_data`
    /// (`rdma_reject`). Throws system_error / sets `ec` on failure.
    void reject(std::span<const std::byte> private_data = {});
    void reject(std::span<const std::byte> private_data, error_code& ec) noexcept;

    /// Creates an RC/UD queue pair on the id (`rdma_create_qp`): `pd` nullptr takes the
    /// device's default protection domain; `attr.send_cq`/`recv_cq` nullptr makes librdmacm
    /// create the completion queues. Needs a resolved route or a connection request. The
    /// queue pair is destroyed with the id. Throws system_error / sets `ec`: the call's
    /// errno, errc::not_open, errc::no_device (no address resolved or bound yet).
    void create_qp(ibv_qp_init_attr& attr, ibv_pd* pd = nullptr);
    void create_qp(ibv_qp_init_attr& attr, ibv_pd* pd, error_code& ec) noexcept;
    /// The queue pair, or nullptr.
    ibv_qp* qp() const noexcept;

    /// @name Blocking calls of synchronous mode
    /// Each makes its librdmacm call and waits for the event that answers it; `ec` as the
    /// asynchronous operation would complete with (errc::rejected, ...), or, without `ec`,
    /// thrown as system_error. Refused with errc::not_synchronous on an id not in
    /// synchronous mode, errc::event_pending while an event of the id is queued (read it
    /// with next_event first), and errc::operation_in_progress while another blocking call
    /// runs on the id. If another event came first, it is kept for next_event and the call
    /// fails with errc::unexpected_event (its own answer follows through next_event).
    /// `close()` waits for a blocking call in progress. Not thread-safe beyond that.
    /// @{
    void resolve_address(const endpoint& remote, std::chrono::milliseconds timeout, error_code& ec) {
        resolve_address(endpoint{}, remote, timeout, ec);
    }
    void resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds timeout,
                         error_code& ec) {
        call_sync(op_kind::resolve_address, op_call::resolve_address(local, remote, timeout), ec);
    }
    void resolve_route(std::chrono::milliseconds timeout, error_code& ec) {
        call_sync(op_kind::resolve_route, op_call::resolve_route(timeout), ec);
    }
    /// Returns the ESTABLISHED event (or the failure's, e.g. REJECTED with its status).
    cm_event connect(const conn_params& params, error_code& ec) {
        return call_sync(op_kind::establish, op_call::connect(params), ec);
    }
    cm_event accept(const conn_params& params, error_code& ec) {
        return call_sync(op_kind::establish, op_call::accept(params), ec);
    }
    /// After the peer's DISCONNECTED was read, returns at once (IB answers nothing more;
    /// the id's destruction replies to the peer).
    void disconnect(error_code& ec) { call_sync(op_kind::disconnect, op_call::disconnect(), ec); }
    /// The id's next event not taken by a call (e.g. the peer's DISCONNECTED), waiting up to
    /// `timeout` (boost::asio::error::timed_out), negative: no limit.
    cm_event next_event(std::chrono::milliseconds timeout, error_code& ec);

    void resolve_address(const endpoint& remote, std::chrono::milliseconds timeout) {
        resolve_address(endpoint{}, remote, timeout);
    }
    void resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds timeout) {
        call_sync(op_kind::resolve_address, op_call::resolve_address(local, remote, timeout));
    }
    void resolve_route(std::chrono::milliseconds timeout) {
        call_sync(op_kind::resolve_route, op_call::resolve_route(timeout));
    }
    cm_event connect(const conn_params& params) { return call_sync(op_kind::establish, op_call::connect(params)); }
    cm_event accept(const conn_params& params) { return call_sync(op_kind::establish, op_call::accept(params)); }
    void disconnect() { call_sync(op_kind::disconnect, op_call::disconnect()); }
    cm_event next_event(std::chrono::milliseconds timeout);
    /// @}

    cm_id_base(cm_id_base&&) noexcept = default;
    cm_id_base& operator=(cm_id_base&&) noexcept = default;

protected:
    // A new id on `channel`; throws system_error ("rdma_create_id").
    cm_id_base(const executor_type& ex, const std::shared_ptr<channel_impl>& channel, rdma_port_space ps);
    // A new id on the channel of `ex`'s execution context; throws system_error.
    cm_id_base(const executor_type& ex, rdma_port_space ps);
    // An empty (closed) id.
    explicit cm_id_base(const executor_type& ex) noexcept : id_handle(ex, nullptr) {}
    explicit cm_id_base(std::shared_ptr<id_impl> impl) noexcept
        : id_handle(current_executor(impl, {}), std::move(impl)) {}
    ~cm_id_base() = default;

private:
    cm_event call_sync(op_kind kind, const op_call& call, error_code& ec);
    cm_event call_sync(op_kind kind, const op_call& call); // throws system_error
};

} // namespace rdmacm::detail
