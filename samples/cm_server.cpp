// cm_server ADDRESS [PORT]: an RDMA CM server written with co_await.
//
// An accept loop hands each connection request to a coroutine of its own, which reads the
// client's private data, accepts with a greeting of its own, waits for the client to
// disconnect and disconnects too. SIGINT or SIGTERM stops it cleanly: the listener and
// every connection are closed, and the io_context runs out of work.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <iostream>
#include <set>
#include <string>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using rdmacm::cm_id;

namespace {

std::string text(std::span<const std::byte> b) {
    std::string s(reinterpret_cast<const char*>(b.data()), b.size());
    return s.substr(0, s.find('\0')); // IB pads private data with zeros
}

std::set<cm_id*> live; // to close at shutdown

awaitable<void> serve(cm_id conn, rdmacm::cm_event request, int n) {
    live.insert(&conn);
    std::cout << "server: connection " << n << " from " << conn.remote_endpoint() << " says \""
              << text(request.private_data()) << "\"" << std::endl;
    try {
        auto attr = rdmacm::rc_qp_init_attr();
        conn.create_qp(attr);
        const std::string greeting = "welcome, client " + std::to_string(n);
        rdmacm::conn_params params;
        params.private_data = std::as_bytes(std::span(greeting));
        co_await conn.async_accept(params, use_awaitable);
        std::cout << "server: connection " << n << " ESTABLISHED" << std::endl;
        for (;;) {
            auto ev = co_await conn.async_next_event(use_awaitable);
            std::cout << "server: connection " << n << " " << rdmacm::to_string(ev.type()) << std::endl;
            if (ev.type() == RDMA_CM_EVENT_DISCONNECTED) break;
        }
        co_await conn.async_disconnect(use_awaitable);
        std::cout << "server: connection " << n << " closed" << std::endl;
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
    live.erase(&conn);
}

awaitable<void> accept_loop(rdmacm::listener& l) {
    for (int n = 1;; ++n) {
        auto [ec, request] = co_await l.async_accept(asio::as_tuple(use_awaitable));
        if (ec) co_return; // closed
        asio::co_spawn(l.get_executor(), serve(std::move(request.id), request.event, n), asio::detached);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: cm_server ADDRESS [PORT]\n";
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
        signals.async_wait([&](boost::system::error_code, int sig) {
            std::cout << "server: signal " << sig << ", shutting down" << std::endl;
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
