// hello_server ADDRESS [PORT]: the smallest complete RDMA server, in one file. It answers
// each message a client sends with a greeting, until the client disconnects; SIGINT or
// SIGTERM stops it cleanly. PORT 0 (the default): any free port, printed.
//
// The habits it shows: each connection request is served by a coroutine of its own (one
// slow peer never stalls the listener); the queue pair and its receives are made before
// the accept (on iWARP a message that finds no receive posted breaks the connection); a
// stop closes the listener and every connection, and run() then returns on its own.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstdio>
#include <exception>
#include <set>
#include <span>
#include <iostream>
#include <string>

namespace asio = boost::asio;

// [serve]
// One connection, from its request to the peer's disconnect.
asio::awaitable<void> serve(rdmacm::connection_request request, std::set<rdmacm::cm_id*>& live) {
    rdmacm::cm_id id = std::move(request.id);
    live.insert(&id); // a stop closes it
    struct leave {
        std::set<rdmacm::cm_id*>& live;
        rdmacm::cm_id* id;
        ~leave() { live.erase(id); }
    } on_end{live, &id};
    rdmacm::queue_pair qp(id, {.max_send_wr = 4, .max_recv_wr = 4});
    rdmacm::receive_pool inbox(qp, 4, 64); // 4 receives of 64 bytes, posted now
    std::array<char, 80> reply{};
    rdmacm::memory_region reply_mr(qp.pd(), std::as_writable_bytes(std::span(reply)));
    auto [refused, established] = co_await id.async_accept({}, asio::as_tuple(asio::use_awaitable));
    for (bool open = !refused; open;) {
        auto [gone, message] = co_await inbox.async_receive(asio::as_tuple(asio::use_awaitable));
        if (gone) break; // the connection is over (the peer disconnected, or a stop closed it)
        const std::string name(reinterpret_cast<const char*>(message.data().data()), message.size());
        std::cout << "server: a message from " << name << std::endl;
        const int n = std::snprintf(reply.data(), reply.size(), "hello, %s", name.c_str());
        const auto text = std::as_bytes(std::span(reply)).first(static_cast<std::size_t>(n));
        auto [failed, sent] = co_await qp.async_send(reply_mr, text, asio::as_tuple(asio::use_awaitable));
        open = !failed;
    }
    co_await id.async_disconnect(asio::as_tuple(asio::use_awaitable)); // (the peer may have gone first)
    std::cout << "server: a connection closed" << std::endl;
}
// [serve]

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: hello_server ADDRESS [PORT]\n";
        return 2;
    }
    try {
        // [listen]
        asio::io_context ctx;
        rdmacm::listener listener(ctx); // on ctx's event channel, which its ids share
        listener.bind(
            {asio::ip::make_address(argv[1]), static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0)});
        listener.listen();
        std::cout << "server: listening on " << listener.local_endpoint() << std::endl;
        std::set<rdmacm::cm_id*> live;
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
                for (;;) {
                    auto [closed, request] = co_await listener.async_get_request(asio::as_tuple(asio::use_awaitable));
                    if (closed) co_return;
                    asio::co_spawn(ctx, serve(std::move(request), live), [](std::exception_ptr e) {
                        try {
                            if (e) std::rethrow_exception(e);
                        } catch (const std::exception& x) { // (this connection only)
                            std::cerr << "server: a connection failed: " << x.what() << std::endl;
                        }
                    });
                }
            },
            asio::detached);
        asio::signal_set signals(ctx, SIGINT, SIGTERM);
        signals.async_wait([&](boost::system::error_code, int) {
            listener.close();
            for (auto* id : live) id->close(); // their coroutines end
        });
        ctx.run(); // returns once no operation waits: the listener is closed, every session over
        // [listen]
        std::cout << "server: stopped cleanly" << std::endl;
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "server: " << e.what() << std::endl;
        return 1;
    }
}
