#pragma once
/// @file
/// `rdmacm::async_connect`: resolve address, resolve route, (create the queue pair),
/// connect — as one operation.
#include "rdmacm/cm_id.hpp"

#include <boost/asio/compose.hpp>

#include <chrono>
#include <optional>

namespace rdmacm {

/// What the composed connect needs beyond the peer's address.
struct connect_options {
    conn_params params{};                            ///< private data is copied at once
    std::chrono::milliseconds resolve_timeout{2000}; ///< for each of the two resolutions
    endpoint local{};                                ///< source address; empty: any
    std::optional<ibv_qp_init_attr> qp{};            ///< if set, created before connecting
    ibv_pd* pd = nullptr;                            ///< for `qp`; nullptr: the device's default
};

namespace detail {

template <typename Executor>
struct connect_op {
    basic_cm_id<Executor>& id;
    endpoint remote;
    connect_options options;
    owned_conn_params params;
    int step = 0;

    template <typename Self>
    void operator()(Self& self, error_code ec = {}) {
        if (!ec && self.get_cancellation_state().cancelled() != boost::asio::cancellation_type::none)
            ec = boost::asio::error::operation_aborted;
        if (ec) return self.complete(ec, cm_event{});
        switch (step++) {
        case 0: return id.async_resolve_address(options.local, remote, options.resolve_timeout, std::move(self));
        case 1: return id.async_resolve_route(options.resolve_timeout, std::move(self));
        default:
            if (options.qp) {
                id.create_qp(*options.qp, options.pd, ec);
                if (ec) return self.complete(ec, cm_event{});
            }
            return id.async_connect(params.view(), std::move(self));
        }
    }
    template <typename Self>
    void operator()(Self& self, error_code ec, cm_event ev) {
        self.complete(ec, std::move(ev));
    }
};

} // namespace detail

/// Connects `id` to `remote`: `async_resolve_address`, `async_resolve_route`, the queue
/// pair from `options.qp` if any, then `async_connect`.
///
/// Signature: `void(error_code, cm_event)` — the ESTABLISHED event, or the error of the
/// step that failed (each step's errors as documented on cm_id). Executor: `id`'s (or the
/// handler's associated one). Cancellation: terminal, passed to the step in progress.
/// Lifetime: `id` must outlive the operation; `options` is copied.
template <typename Executor, BOOST_ASIO_COMPLETION_TOKEN_FOR(void(error_code, cm_event))
                                 Token = boost::asio::default_completion_token_t<Executor>>
auto async_connect(basic_cm_id<Executor>& id, const endpoint& remote, const connect_options& options,
                   Token&& token = boost::asio::default_completion_token_t<Executor>()) {
    return boost::asio::async_compose<Token, void(error_code, cm_event)>(
        detail::connect_op<Executor>{id, remote, options, detail::owned_conn_params(options.params)}, token,
        id.get_executor());
}

} // namespace rdmacm
