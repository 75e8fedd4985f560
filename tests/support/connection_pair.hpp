#pragma once
// Both ends of one connection through a listener, each with its queue pair.
#include "support/fixture.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace rdmacm::test {

struct connection_pair {
    std::optional<cm_id> client, server;
    std::optional<queue_pair> client_qp, server_qp;
};

inline asio::awaitable<void> accept_side(listener& l, connection_pair& p, queue_pair_options o) {
    auto req = co_await l.async_get_request(asio::use_awaitable);
    p.server.emplace(std::move(req.id));
    p.server_qp.emplace(*p.server, o);
    co_await p.server->async_accept(conn_params{}, asio::use_awaitable);
}

inline asio::awaitable<void> connect_side(event_channel& ch, endpoint to, connection_pair& p, queue_pair_options o) {
    p.client.emplace(ch);
    co_await p.client->async_resolve_address(to, 2s, asio::use_awaitable);
    co_await p.client->async_resolve_route(2s, asio::use_awaitable);
    p.client_qp.emplace(*p.client, o);
    co_await p.client->async_connect(conn_params{}, asio::use_awaitable);
}

// Connects a pair through `l` (server side on its executor) and `client_ch`.
inline asio::awaitable<void> connect_pair(listener& l, event_channel& client_ch, connection_pair& p,
                                          queue_pair_options o = {}) {
    using namespace asio::experimental::awaitable_operators;
    co_await (accept_side(l, p, o) && connect_side(client_ch, l.local_endpoint(), p, o));
}

} // namespace rdmacm::test
