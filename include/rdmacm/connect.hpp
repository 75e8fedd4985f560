#pragma once
/// @file
/// `rdmacm::async_connect`: resolve address, resolve route, (create the queue pair and
/// post receives), connect — as one operation.
#include "rdmacm/cm_id.hpp"
#include "rdmacm/detail/call_error.hpp"
#include "rdmacm/queue_pair.hpp"
#include "rdmacm/receive_pool.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <new>
#include <optional>

namespace rdmacm {

/// What the composed connect needs beyond the peer's address.
struct connect_options {
    conn_params params{};                            ///< private data is copied at once
    std::chrono::milliseconds resolve_timeout{2000}; ///< for each of the two resolutions
    endpoint local{};                                ///< source address; empty: any
    /// A raw queue pair (`cm_id::create_qp`), created before connecting, whose completion
    /// queues are the caller's to poll. For a `queue_pair` (its completions read on the id's
    /// context) use the `async_connect` overload that yields one instead.
    std::optional<ibv_qp_init_attr> qp{};
    ibv_pd* pd = nullptr; ///< for `qp`; nullptr: the device's default
};

/// The data path the composed connect makes before it connects: a `queue_pair` and a
/// `receive_pool` on it, whose receives are posted before the peer can send.
///
/// @code
/// co_await rdmacm::async_connect(id, server, rdmacm::data_path_options{.receives = {.depth = 16}});
/// @endcode
struct data_path_options {
    queue_pair_options qp{};         ///< the queue pair's sizes, protection domain, polling
    receive_pool_options receives{}; ///< `receives.depth` at most `qp.max_recv_wr`
};

namespace detail {

// What a composed connect puts on the id once its route is resolved, and how it completes
// (and, if the policy has a `before_resolve(id)`, what it does first).
// A raw queue pair, if asked for; the completion is the ESTABLISHED event.
struct attach_raw_qp {
    std::optional<ibv_qp_init_attr> qp;
    ibv_pd* pd;

    template <typename Executor>
    error_code before_connect(basic_cm_id<Executor>& id) {
        error_code ec;
        if (qp) id.create_qp(*qp, pd, ec);
        return ec;
    }
    template <typename Self, typename Executor>
    void complete(Self& self, basic_cm_id<Executor>&, error_code ec, cm_event ev = {}) {
        self.complete(ec, std::move(ev));
    }
};

// A queue_pair and a receive_pool whose receives are posted before the connect (iWARP
// breaks a connection whose first message finds none); the completion hands them over, or,
// on an error, unopened ones on the id's executor.
template <typename Executor>
struct attach_queue_pair {
    data_path_options data_path;
    bool raw_qp_too; // connect_options::qp given as well: which one was meant?
    std::optional<basic_queue_pair<Executor>> qp{};
    std::optional<basic_receive_pool<Executor>> pool{};

    error_code before_connect(basic_cm_id<Executor>& id) {
        if (raw_qp_too) return RDMACM_CALL_ERRNO("connect_options::qp", EINVAL);
        // Beyond the queue's receives, the pool would fail its own posts later, unseen.
        const auto& receives = data_path.receives;
        if (!receive_pool_base::valid_sizes(receives.depth, receives.message_size) ||
            receives.depth > data_path.qp.max_recv_wr)
            return RDMACM_CALL_ERRNO("receive_pool", EINVAL);
        try {
            qp.emplace(id, data_path.qp);
            pool.emplace(*qp, receives.depth, receives.message_size);
        } catch (const boost::system::system_error& e) {
            return e.code();
        } catch (const std::bad_alloc&) {
            return make_error_code(boost::system::errc::not_enough_memory);
        }
        return {};
    }
    template <typename Self>
    void complete(Self& self, basic_cm_id<Executor>& id, error_code ec, cm_event ev = {}) {
        if (ec) {
            pool.reset();
            qp.reset();
        }
        // The id's executor, not the operation's (that one counts as work while it lives).
        const auto ex = id.get_executor();
        self.complete(ec, std::move(ev), qp ? std::move(*qp) : basic_queue_pair<Executor>(ex),
                      pool ? std::move(*pool) : basic_receive_pool<Executor>(ex));
    }
};

template <typename Executor, typename Attach>
struct connect_op {
    basic_cm_id<Executor>& id;
    endpoint remote;
    connect_options options;
    owned_conn_params params;
    Attach attach;
    int step = 0;

    template <typename Self>
    void operator()(Self& self, error_code ec = {}) {
        if (!ec && self.get_cancellation_state().cancelled() != boost::asio::cancellation_type::none)
            ec = boost::asio::error::operation_aborted;
        if (ec) return attach.complete(self, id, ec);
        switch (step++) {
        case 0:
            ec = params.error();
            // (A stream's makes its id here: attach_stream, stream.hpp.)
            if constexpr (requires { attach.before_resolve(id); })
                if (!ec) ec = attach.before_resolve(id);
            if (ec) // (refused before any step, from a post: never inside the call)
                return boost::asio::post(id.get_executor(), boost::asio::append(std::move(self), ec));
            return id.async_resolve_address(options.local, remote, options.resolve_timeout, std::move(self));
        case 1: return id.async_resolve_route(options.resolve_timeout, std::move(self));
        default:
            if ((ec = attach.before_connect(id))) return attach.complete(self, id, ec);
            // (A stream's hello tells of the ring made just now: attach_stream, stream.hpp.)
            if constexpr (requires { attach.params(); }) params = owned_conn_params(attach.params());
            return id.async_connect(params.view(), std::move(self));
        }
    }
    template <typename Self>
    void operator()(Self& self, error_code ec, cm_event ev) {
        attach.complete(self, id, ec, std::move(ev));
    }
};

} // namespace detail

/// Connects `id` to `remote`: `async_resolve_address`, `async_resolve_route`, the queue
/// pair from `options.qp` if any, then `async_connect`.
///
/// @par Completion Signature
/// `void(error_code, cm_event)` — the ESTABLISHED event, or the error of the step that
/// failed.
/// @par Errors
/// - Each step's errors as documented on cm_id.
/// - errc::private_data_too_long: before any step, when `options.params` carries more than
///   255 bytes of private data.
/// @par Executor
/// `id`'s (or the handler's associated one).
/// @par Lifetime
/// `id` must outlive the operation; `options` is copied.
/// @par Per-Operation Cancellation
/// terminal, passed to the step in progress.
template <typename Executor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event))
                                 Token = boost::asio::default_completion_token_t<Executor>>
auto async_connect(basic_cm_id<Executor>& id, const endpoint& remote, const connect_options& options,
                   Token&& token = boost::asio::default_completion_token_t<Executor>()) {
    return boost::asio::async_compose<Token, void(error_code, cm_event)>(
        detail::connect_op<Executor, detail::attach_raw_qp>{
            id, remote, options, detail::owned_conn_params(options.params), {options.qp, options.pd}},
        token, id.get_executor());
}

/// Connects `id` to `remote` with a data path: `async_resolve_address`,
/// `async_resolve_route`, a `queue_pair` (`data_path.qp`) and a `receive_pool` on it
/// (`data_path.receives`: its receives posted before the peer can send), then
/// `async_connect`.
///
/// @code
/// auto [established, qp, receives] =
///     co_await rdmacm::async_connect(id, server, rdmacm::data_path_options{.receives = {.depth = 16}});
/// @endcode
///
/// @par Completion Signature
/// `void(error_code, cm_event, basic_queue_pair<Executor>, basic_receive_pool<Executor>)` —
/// the ESTABLISHED event (the peer's private data), the queue pair and the pool.
/// @par Errors
/// On an error both are unopened, on the id's executor, and the id is as a failed
/// `cm_id::async_connect` leaves it (with its queue pair, if one was made): close it.
/// - The step that failed, as documented on cm_id.
/// - "ibv_create_cq", "rdma_create_qp", "ibv_reg_mr" for the data path.
/// - EINVAL "receive_pool": a depth of 0 or beyond `data_path.qp.max_recv_wr`, or a message
///   size of 0 or beyond 2^32 − 2.
/// - EINVAL "connect_options::qp": `options.qp` asks for a raw queue pair as well.
/// - errc::private_data_too_long: before any step, for more than 255 bytes of private data.
/// @par Executor
/// `id`'s (or the handler's associated one); the queue pair's and the pool's follow the id.
/// @par Lifetime
/// `id` must outlive the operation; the options are copied.
/// @par Per-Operation Cancellation
/// terminal, passed to the step in progress.
template <typename Executor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event, basic_queue_pair<Executor>,
                                                                  basic_receive_pool<Executor>))
                                 Token = boost::asio::default_completion_token_t<Executor>>
auto async_connect(basic_cm_id<Executor>& id, const endpoint& remote, const connect_options& options,
                   const data_path_options& data_path,
                   Token&& token = boost::asio::default_completion_token_t<Executor>()) {
    return boost::asio::async_compose<Token, void(error_code, cm_event, basic_queue_pair<Executor>,
                                                  basic_receive_pool<Executor>)>(
        detail::connect_op<Executor, detail::attach_queue_pair<Executor>>{
            id, remote, options, detail::owned_conn_params(options.params), {data_path, options.qp.has_value()}},
        token, id.get_executor());
}

/// As above, with the default `connect_options`.
template <typename Executor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event, basic_queue_pair<Executor>,
                                                                  basic_receive_pool<Executor>))
                                 Token = boost::asio::default_completion_token_t<Executor>>
auto async_connect(basic_cm_id<Executor>& id, const endpoint& remote, const data_path_options& data_path,
                   Token&& token = boost::asio::default_completion_token_t<Executor>()) {
    return async_connect(id, remote, connect_options{}, data_path, std::forward<Token>(token));
}

} // namespace rdmacm
