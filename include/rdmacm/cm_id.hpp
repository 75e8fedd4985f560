#pragma once
/// @file
/// `rdmacm::cm_id`: an RDMA CM connection id as an Asio I/O object.
#include "rdmacm/conn_params.hpp"
#include "rdmacm/detail/access.hpp"
#include "rdmacm/detail/cm_id_base.hpp"
#include "rdmacm/detail/typed_id.hpp"
#include "rdmacm/endpoint.hpp"
#include "rdmacm/event.hpp"
#include "rdmacm/event_channel.hpp"

#include <boost/asio/async_result.hpp>

#include <chrono>
#include <type_traits>

namespace rdmacm {

/// One end of an RDMA connection: an `rdma_cm_id` on an `event_channel`, with the CM's
/// operations as Asio asynchronous operations (any completion token: callbacks,
/// `use_awaitable`, `use_future`, `deferred`, `as_tuple`, ...).
///
/// The operations every id has — `async_next_event`, `async_migrate` (to a channel),
/// `get_executor`, `cancel`, `close`, `native_handle`, the endpoints and the synchronous
/// calls — come from its bases (detail::typed_id and below) and are listed with its own.
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
template <typename Executor = boost::asio::any_io_executor>
class basic_cm_id : public detail::typed_id<Executor, detail::cm_id_base> {
    using base = detail::typed_id<Executor, detail::cm_id_base>;

public:
    using executor_type = Executor;
    /// The same id type on another executor type (e.g. for `as_default_on`).
    template <typename Executor1>
    struct rebind_executor {
        using other = basic_cm_id<Executor1>;
    };

    /// A new id on `channel`, its handlers on the channel's executor (or `ex`). Throws
    /// system_error ("rdma_create_id") on failure. `ps`: RDMA_PS_TCP (RC), RDMA_PS_UDP (UD).
    template <typename ChannelExecutor>
    explicit basic_cm_id(basic_event_channel<ChannelExecutor>& channel, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(channel.get_executor()), detail::access::impl(channel), ps) {}
    template <typename ChannelExecutor>
    basic_cm_id(const executor_type& ex, basic_event_channel<ChannelExecutor>& channel,
                rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ex), detail::access::impl(channel), ps) {}
    /// A new id on the event channel of the execution context `ctx` (made by the library
    /// on first use, shared by the context's ids and listeners made without a channel,
    /// gone with the last of them: one fd per context), its handlers on
    /// `ctx.get_executor()`. As with an Asio socket, `ctx.run()` returns when no operation
    /// waits, the id open or not; what arrives meanwhile is read once an operation asks.
    /// Throws system_error ("rdma_create_event_channel", "rdma_create_id") on failure.
    template <typename ExecutionContext,
              typename = std::enable_if_t<std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>>>
    explicit basic_cm_id(ExecutionContext& ctx, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ctx.get_executor()), ps) {}
    /// The same on the channel of the execution context `ex` runs on, its handlers on `ex`
    /// (a strand of it, say).
    explicit basic_cm_id(const executor_type& ex, rdma_port_space ps = RDMA_PS_TCP)
        : base(boost::asio::any_io_executor(ex), ps) {}
    basic_cm_id(basic_cm_id&&) noexcept = default;
    basic_cm_id& operator=(basic_cm_id&&) noexcept = default;
    /// Takes over an id of another executor type (e.g. a connection request's `cm_id` into
    /// an id whose default token is `use_awaitable`).
    template <typename Executor1, typename = std::enable_if_t<!std::is_same_v<Executor, Executor1>>>
    basic_cm_id(basic_cm_id<Executor1>&& other) noexcept // NOLINT(google-explicit-constructor)
        : base(static_cast<detail::cm_id_base&&>(other)) {}
    ~basic_cm_id() = default;

    /// Resolves `remote` to an RDMA device and address (`rdma_resolve_addr`), from `local`
    /// if given (else from the address the route to `remote` uses). `timeout` bounds the
    /// kernel's resolution (then errc::address_error, status -ETIMEDOUT).
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - errc::address_error: the event's status is the kernel's reason.
    /// - errc::address_family_not_supported.
    /// - The call's errno (system_category, location "rdma_resolve_addr").
    /// - errc::not_open, errc::operation_in_progress, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal: the operation ends with operation_aborted; the kernel's work cannot be
    /// recalled and goes on, its event dropped when it comes (see the class's description).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_resolve_address(const endpoint& remote, std::chrono::milliseconds timeout,
                               Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return async_resolve_address(endpoint{}, remote, timeout, std::forward<Token>(token));
    }
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_resolve_address(const endpoint& local, const endpoint& remote, std::chrono::milliseconds timeout,
                               Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code)>(detail::op_kind::resolve_address, std::forward<Token>(token),
                                                      detail::op_call::resolve_address(local, remote, timeout));
    }

    /// Resolves the route to the resolved address (`rdma_resolve_route`).
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - errc::route_error.
    /// - The call's errno (location "rdma_resolve_route").
    /// - As for async_resolve_address.
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal: the operation ends with operation_aborted; the kernel's work cannot be
    /// recalled and goes on, its event dropped when it comes (see the class's description).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_resolve_route(std::chrono::milliseconds timeout,
                             Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code)>(detail::op_kind::resolve_route, std::forward<Token>(token),
                                                      detail::op_call::resolve_route(timeout));
    }

    /// Connects (`rdma_connect`) and completes when the connection is ESTABLISHED, with
    /// that event (the peer's accept private data, `conn_param()`). Create the queue pair
    /// first (iWARP requires one).
    ///
    /// @par Completion Signature
    /// `void(error_code, cm_event)`.
    /// @par Errors
    /// - errc::rejected: the event keeps the reject reason as `status()` and the peer's
    ///   private data; compares equal to connection_refused, as does iWARP's ECONNREFUSED
    ///   from the call when nothing listens.
    /// - errc::unreachable, errc::connect_error.
    /// - errc::disconnected: the connection went before it was established (DISCONNECTED,
    ///   or TIMEWAIT_EXIT alone).
    /// - errc::device_removed.
    /// - errc::private_data_too_long.
    /// - The call's errno.
    /// - errc::no_device: the address was never resolved.
    /// - errc::not_open, errc::operation_in_progress, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal: the operation ends with operation_aborted; the kernel's work cannot be
    /// recalled and goes on, its event dropped when it comes (see the class's description).
    /// After a cancelled connect the id is only good for `close()`.
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_connect(const conn_params& params,
                       Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code, cm_event)>(detail::op_kind::establish, std::forward<Token>(token),
                                                                detail::op_call::connect(params));
    }

    /// Accepts the connection request this id came from (`rdma_accept`) and completes when
    /// the connection is ESTABLISHED. Create the queue pair first.
    ///
    /// @par Completion Signature
    /// `void(error_code, cm_event)`.
    /// @par Errors
    /// As for async_connect (location "rdma_accept").
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal: the operation ends with operation_aborted; the kernel's work cannot be
    /// recalled and goes on, its event dropped when it comes (see the class's description).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_accept(const conn_params& params,
                      Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code, cm_event)>(detail::op_kind::establish, std::forward<Token>(token),
                                                                detail::op_call::accept(params));
    }

    /// Disconnects (`rdma_disconnect`) and completes on this side's DISCONNECTED. On IB
    /// that waits for the peer's own disconnect (or the CM's time-out); if the peer
    /// disconnected first, it completes at once; a TIMEWAIT_EXIT with no DISCONNECTED
    /// before it completes it too (the connection is gone).
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - The call's errno (location "rdma_disconnect").
    /// - errc::device_removed.
    /// - errc::not_open, errc::operation_in_progress, operation_aborted.
    /// @par Executor
    /// The handler's, by default `get_executor()`.
    /// @par Per-Operation Cancellation
    /// terminal: the operation ends with operation_aborted; the kernel's work cannot be
    /// recalled and goes on, its event dropped when it comes (see the class's description).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_disconnect(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->template start<void(error_code)>(detail::op_kind::disconnect, std::forward<Token>(token),
                                                      detail::op_call::disconnect());
    }

    /// Puts the id in **synchronous mode** (`rdma_migrate_id(id, NULL)`): its events go to
    /// a private channel of librdmacm, and the CM calls are the blocking ones below, made
    /// on any thread that is not needed to run handlers meanwhile. Asynchronous operations
    /// then complete with errc::synchronous_mode. `async_migrate(channel, ...)` brings the
    /// id back (events queued meanwhile move with it).
    ///
    /// Refused with errc::event_pending while anything of the id is queued or expected (an
    /// event not yet delivered, an operation or next-event wait outstanding — cancel it,
    /// or let it complete, first): librdmacm's next blocking call would take that event
    /// for its own answer (docs/semantics.md, F5). An event the kernel still held is caught after
    /// the move, and the move undone. Already synchronous: completes at once.
    /// The blocking calls (`resolve_address`, `connect`, ...) are detail::cm_id_base's.
    ///
    /// @par Completion Signature
    /// `void(error_code)`.
    /// @par Errors
    /// - errc::event_pending.
    /// - The call's errno (location "rdma_migrate_id").
    /// - Those of async_migrate.
    /// @par Executor
    /// The handler's, by default the id's (which stays).
    /// @par Per-Operation Cancellation
    /// None: a cancellation request is ignored (as for async_migrate).
    template <BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code))
                  Token = boost::asio::default_completion_token_t<executor_type>>
    auto async_enter_synchronous_mode(Token&& token = boost::asio::default_completion_token_t<executor_type>()) {
        return this->start_migrate(boost::asio::any_io_executor(), std::forward<Token>(token));
    }

private:
    friend struct detail::access;
    // Adopts an id the library made (a connection request's).
    explicit basic_cm_id(std::shared_ptr<detail::id_impl> impl) noexcept : base(std::move(impl)) {}
    // An empty (closed) id on `ex`, whose operations complete with errc::not_open (a failed
    // placement's connection).
    basic_cm_id(detail::empty_id, const executor_type& ex) noexcept : base(boost::asio::any_io_executor(ex)) {}
};

/// The id on any executor (`any_io_executor`).
using cm_id = basic_cm_id<>;

} // namespace rdmacm
