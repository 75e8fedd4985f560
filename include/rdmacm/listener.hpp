#pragma once
/// @file
/// `rdmacm::listener`: a listening RDMA CM id.
#include "rdmacm/connection_request.hpp"
#include "rdmacm/detail/id_handle.hpp"
#include "rdmacm/event_channel.hpp"

namespace rdmacm {

/// A listening id: `bind`, `listen`, then `async_accept` connection requests. The requests'
/// new ids live on the listener's channel and run their handlers on its executor.
///
/// Thread safety: distinct objects safe; shared objects unsafe, except `cancel()` and
/// `close()` from any thread. Closing the listener rejects the requests not yet accepted.
class listener : public detail::id_handle {
public:
    /// Throws system_error ("rdma_create_id") on failure.
    explicit listener(event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);
    listener(const executor_type& ex, event_channel& channel, rdma_port_space ps = RDMA_PS_TCP);
    listener(listener&&) noexcept = default;
    listener& operator=(listener&&) noexcept = default;
    ~listener() = default;

    /// Binds to `local` (`rdma_bind_addr`); port 0 picks a free port (`local_endpoint()`
    /// tells which). IPv4 or IPv6 only. Throws system_error / sets `ec`.
    void bind(const endpoint& local);
    void bind(const endpoint& local, error_code& ec) noexcept;

    /// Starts listening (`rdma_listen`). A second listen gives errc::already_listening.
    /// `backlog` bounds the connection requests waiting for `async_accept` (0 or less: the
    /// kernel's maximum, 1024): those beyond it are rejected at once — the peer's connect
    /// fails (`errc::rejected`, or on iWARP the connection error its device reports). The
    /// library applies the bound itself (the kernel is given its maximum, so that it never
    /// holds a request back, its peer hanging until it times out).
    void listen(int backlog = 128);
    void listen(int backlog, error_code& ec) noexcept;

    /// Waits for the next connection request; requests that arrive while nobody waits are
    /// queued, in order, up to the backlog.
    ///
    /// Signature: `void(error_code, connection_request)`. Errors: errc::not_open,
    /// errc::operation_in_progress, operation_aborted. Cancellation: terminal, partial,
    /// total (no request is lost).
    template <typename Token>
    auto async_accept(Token&& token) {
        return start<void(error_code, connection_request)>(detail::op_kind::request, std::forward<Token>(token),
                                                           detail::op_call{});
    }

private:
    bool listening_ = false;
};

} // namespace rdmacm
