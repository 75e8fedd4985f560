#pragma once
/// @file
/// `rdmacm::basic_listener`: a listening RDMA CM id.
#include "rdmacm/connection_request.hpp"
#include "rdmacm/detail/typed_id.hpp"
#include "rdmacm/event_channel.hpp"

#include <boost/asio/async_result.hpp>

#include <type_traits>

namespace rdmacm {

namespace detail {
// The compiled, executor-agnostic part of basic_listener.
class listener_base : public id_handle {
public:
    /// Binds to `local` (`rdma_bind_addr`); port 0 picks a free port (`local_endpoint()`
    /// tells which). IPv4 or IPv6 only. Throws system_error / sets `ec`.
    void bind(const endpoint& local);
    void bind(const endpoint& local, error_code& ec) noexcept;

    /// Starts listening (`rdma_listen`). A second listen gives errc::already_listening.
    /// `backlog` bounds the connection requests waiting for `async_get_request` (0 or less:
    /// the kernel's maximum, 1024): those beyond it are rejected at once — the peer's
    /// connect fails (`errc::rejected`, or on iWARP the connection error its device
    /// reports). The library applies the bound itself (the kernel is given its maximum, so
    /// that it never holds a request back, its peer hanging until it times out).
    void listen(int backlog = 128);
    void listen(int backlog, error_code& ec) noexcept;

    listener_base(listener_base&&) noexcept = default;
    listener_base& operator=(listener_base&&) noexcept = default;

protected:
    // A new id on `channel`; throws system_error ("rdma_create_id").
    listener_base(const executor_type& ex, const std::shared_ptr<channel_impl>& channel, rdma_port_space ps);
    listener_base(const executor_type& ex, rdma_port_space ps); // on the channel of ex's context
    ~listener_base() = default;

private:
    bool listening_ = false;
};
} // namespace detail

/// A listening id: `bind`, `listen`, then `async_get_request` for each connection request
/// (librdmacm's `rdma_get_request`). The requests' new ids live on the listener's channel and
/// run their handlers on its executor; accept one with its id's `async_accept`.
///
/// `async_next_event`, `async_migrate`, `get_executor` and the rest every id has come from
/// its bases (detail::typed_id and below) and are listed with its own.
///
/// Thread safety: distinct objects safe; shared objects unsafe, except `cancel()` and
/// `close()` from any thread. Closing the listener rejects the requests not yet taken; its
/// port is free for a new bind once `async_close` completes (`close()` returns before).
///
/// `Executor`: constructible from `any_io_executor` (see `basic_event_channel`).
template <typename Executor = boost::asio::any_io_executor>
class basic_listener : public detail::typed_id<Executor, detail::listener_base> {
    using base = detail::typed_id<Executor, detail::listener_base>;

public:
    using executor_type = Executor;
    /// The same listener type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_listener<Executor1>;
    };

    /// A listener on the event channel of the execution context `ctx` (the one
    /// `cm_id(ctx)` uses: made on first use, gone with its last id), its handlers on
    /// `ctx.get_executor()`. `ctx.run()` returns when no operation waits, the listener
    /// open or not; requests that come meanwhile wait in the kernel's backlog.
    /// Throws system_error ("rdma_create_event_channel", "rdma_create_id") on failure.
    template <typename ExecutionContext,
              typename = std::enable_if_t<std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>>>
    explicit basic_listener(ExecutionContext& ctx, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ctx.get_executor()), ps) {}
    /// The same on the channel of the execution context `ex` runs on, its handlers on `ex`.
    explicit basic_listener(const executor_type& ex, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ex), ps) {}
    /// A listener on `channel`, its handlers on the channel's executor (or `ex`). Throws
    /// system_error ("rdma_create_id") on failure.
    template <typename ChannelExecutor>
    explicit basic_listener(basic_event_channel<ChannelExecutor>& channel, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(channel.get_executor()), detail::access::impl(channel), ps) {}
    template <typename ChannelExecutor>
    basic_listener(const executor_type& ex, basic_event_channel<ChannelExecutor>& channel,
                   rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ex), detail::access::impl(channel), ps) {}
    basic_listener(basic_listener&&) noexcept = default;
    basic_listener& operator=(basic_listener&&) noexcept = default;
    /// Takes over a listener of another executor type.
    template <typename Executor1, typename = std::enable_if_t<!std::is_same_v<Executor, Executor1>>>
    basic_listener(basic_listener<Executor1>&& other) noexcept // NOLINT(google-explicit-constructor)
        : base(static_cast<detail::listener_base&&>(other)) {}
    ~basic_listener() = default;

    /// Waits for the next connection request (`rdma_get_request`'s counterpart); requests
    /// that arrive while nobody waits are queued, in order, up to the backlog. The request's
    /// id is not accepted yet: create its queue pair, then `async_accept` (or `reject`).
    ///
    /// @par Completion Signature
    /// `void(error_code, connection_request)`.
    /// @par Errors
    /// - errc::not_open, errc::operation_in_progress, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()`; the request's id is on the listener's
    /// channel until moved.
    /// @par Per-Operation Cancellation
    /// terminal, partial, total: the wait ends with operation_aborted; no request is lost
    /// (a later wait gets it).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, connection_request))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_get_request(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code, connection_request)>(
            detail::op_kind::request, std::forward<Token>(token), detail::op_call{});
    }
};

/// The listener on any executor (`any_io_executor`).
using listener = basic_listener<>;

} // namespace rdmacm
