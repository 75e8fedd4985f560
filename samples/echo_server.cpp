// echo_server ADDRESS [PORT]: an RDMA echo server written with co_await.
//
// Each connection gets a queue pair and a coroutine that sends every message it receives
// straight back, until the peer disconnects (its receives are then flushed). It speaks
// with rdma-core's `ucmatose` client (which checks that as many messages come back as it
// sent) and takes `cmtime`'s connections. SIGINT or SIGTERM stops it cleanly.
#include "receive_queue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <set>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr std::size_t depth = 64, message_size = 4096;
std::set<rdmacm::cm_id*> live; // to close at shutdown

awaitable<void> serve(rdmacm::cm_id conn, int n) {
    live.insert(&conn);
    std::size_t echoed = 0;
    try {
        rdmacm::queue_pair qp(conn, {.max_send_wr = depth, .max_recv_wr = depth});
        receive_queue received(qp, depth, message_size); // posted before the accept
        co_await conn.async_accept({}, use_awaitable);
        std::cout << "server: connection " << n << " from " << conn.remote_endpoint() << std::endl;
        for (;;) {
            auto [ec, length, slot] = co_await received.async_next(asio::as_tuple(use_awaitable));
            if (ec) break; // flushed: the peer has gone
            co_await qp.async_send(received.region(), received.slot(slot).first(length), use_awaitable);
            received.post(slot);
            ++echoed;
        }
        co_await conn.async_disconnect(use_awaitable);
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
    std::cout << "server: connection " << n << " closed after " << echoed << " messages" << std::endl;
    live.erase(&conn);
}

awaitable<void> accept_loop(rdmacm::listener& l) {
    for (int n = 1;; ++n) {
        auto [ec, request] = co_await l.async_accept(asio::as_tuple(use_awaitable));
        if (ec) co_return; // closed
        asio::co_spawn(l.get_executor(), serve(std::move(request.id), n), asio::detached);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: echo_server ADDRESS [PORT]\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        auto channel = std::make_unique<rdmacm::event_channel>(ctx);
        rdmacm::listener l(*channel);
        l.bind({asio::ip::make_address(argv[1]), static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0)});
        l.listen();
        std::cout << "server: listening on " << l.local_endpoint() << std::endl;
        asio::signal_set signals(ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int) {
            l.close();
            for (auto* c : live) c->close();
            channel.reset(); // the last id gone, the channel goes and run() returns
        });
        asio::co_spawn(ctx, accept_loop(l), asio::detached);
        ctx.run();
        std::cout << "server: stopped cleanly" << std::endl;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}
