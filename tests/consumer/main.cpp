// Builds and links against asio-rdmacm; run, it says what it found (needs no RDMA device).
// It also compiles what an Asio user writes first: I/O objects whose default completion
// token is use_awaitable (as_default_on), awaited without a token.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <iostream>

namespace asio = boost::asio;
using awaitable_channel = asio::use_awaitable_t<>::as_default_on_t<rdmacm::event_channel>;
using awaitable_id = asio::use_awaitable_t<>::as_default_on_t<rdmacm::cm_id>;
using awaitable_listener = asio::use_awaitable_t<>::as_default_on_t<rdmacm::listener>;
using awaitable_queue_pair = asio::use_awaitable_t<>::as_default_on_t<rdmacm::queue_pair>;

asio::awaitable<void> echo_once(awaitable_listener& l, awaitable_channel& other) {
    awaitable_id id = (co_await l.async_get_request()).id;
    awaitable_queue_pair qp(id);
    co_await id.async_accept({});
    co_await id.async_migrate(other);
    std::array<std::byte, 64> buffer{};
    rdmacm::memory_region mr(qp.pd(), buffer);
    auto n = co_await qp.async_receive(mr, buffer);
    co_await qp.async_send(mr, std::span(buffer).first(n));
    co_await id.async_next_event();
}

asio::awaitable<void> connect(awaitable_id& id, const rdmacm::endpoint& to) {
    co_await id.async_resolve_address(to, std::chrono::seconds(2));
    co_await id.async_resolve_route(std::chrono::seconds(2));
    co_await rdmacm::async_connect(id, to, {});
}

int main() {
    rdmacm::error_code ec = rdmacm::errc::rejected;
    std::cout << ec.category().name() << ": " << ec.message() << "\n";
    return ec == boost::system::errc::connection_refused ? 0 : 1;
}
