// Builds and links against asio-rdmacm; run, it says what it found (needs no RDMA device).
// It also compiles what an Asio user writes first: I/O objects whose default completion
// token is use_awaitable (as_default_on), awaited without a token.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <iostream>

namespace asio = boost::asio;
using awaitable_channel = asio::use_awaitable_t<>::as_default_on_t<rdmacm::event_channel>;
using awaitable_id = asio::use_awaitable_t<>::as_default_on_t<rdmacm::cm_id>;
using awaitable_listener = asio::use_awaitable_t<>::as_default_on_t<rdmacm::listener>;
using awaitable_queue_pair = asio::use_awaitable_t<>::as_default_on_t<rdmacm::queue_pair>;
using awaitable_receive_pool = asio::use_awaitable_t<>::as_default_on_t<rdmacm::receive_pool>;

asio::awaitable<void> echo_once(awaitable_listener& l, awaitable_channel& other) {
    awaitable_id id = (co_await l.async_get_request()).id;
    awaitable_queue_pair qp(id);
    awaitable_receive_pool inbox(qp, 4, 64); // posted before the accept: the peer may send at once
    co_await id.async_accept({});
    co_await id.async_migrate(other);
    auto message = co_await inbox.async_receive();
    co_await qp.async_send(inbox.region(), message.data());
    co_await id.async_next_event();
}

// Resolve, route, a queue pair with its receives posted, connect: one operation.
asio::awaitable<void> connect(awaitable_id& id, const rdmacm::endpoint& to) {
    auto [established, qp, inbox] =
        co_await rdmacm::async_connect(id, to, {.receives = {.depth = 4, .message_size = 64}});
    auto greeting = co_await inbox.async_receive();
    co_await qp.async_send(inbox.region(), greeting.data()); // said back
}

int main() {
    rdmacm::error_code ec = rdmacm::errc::rejected;
    std::cout << ec.category().name() << ": " << ec.message() << "\n";
    return ec == boost::system::errc::connection_refused ? 0 : 1;
}
