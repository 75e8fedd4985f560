#pragma once
// One connection for a benchmark that runs the same code over an rdmacm::stream and over
// Asio's own TCP socket (bench/stream_bench, bench/http_bench): the server listens (saying
// "listening" once it does), the client connects (saying "connected"), and `body(stream)`
// runs on the connected one; then the context runs until everything is done. Returns main()'s status; an error is
// printed as "NAME: what".
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <iostream>
#include <optional>

namespace bench {

// The end of this side's data, as the peer reads it: eof.
inline void end_data(rdmacm::stream& s) { s.shutdown(); }
inline void end_data(boost::asio::ip::tcp::socket& s) { s.shutdown(boost::asio::ip::tcp::socket::shutdown_send); }

struct connection_setup {
    const char* name;
    bool client;
    boost::asio::ip::address address;
    unsigned short port;
    bool over_tcp;                  // else over RDMA, a stream with `options`
    rdmacm::stream_options options; // (over RDMA)
};

// `body`: a callable taking (auto& stream) and returning asio::awaitable<void>.
template <typename Body>
int run_connected(const connection_setup& setup, Body body) {
    namespace asio = boost::asio;
    using asio::use_awaitable;
    using tcp = asio::ip::tcp;
    try {
        asio::io_context ctx;
        rdmacm::stream s(ctx, setup.options);
        tcp::socket socket(ctx);
        std::optional<rdmacm::listener> l;
        std::optional<tcp::acceptor> acceptor;
        if (!setup.client && setup.over_tcp) {
            acceptor.emplace(ctx, tcp::endpoint(setup.address, setup.port));
            std::cout << "listening" << std::endl;
        } else if (!setup.client) {
            l.emplace(ctx);
            l->bind({setup.address, setup.port});
            l->listen();
            std::cout << "listening" << std::endl;
        }
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
                if (setup.over_tcp) {
                    if (setup.client)
                        co_await socket.async_connect(tcp::endpoint(setup.address, setup.port), use_awaitable);
                    else
                        co_await acceptor->async_accept(socket, use_awaitable);
                    if (setup.client) std::cout << "connected" << std::endl;
                    socket.set_option(tcp::no_delay(true));
                    co_await body(socket);
                } else {
                    if (setup.client)
                        co_await s.async_connect({setup.address, setup.port}, use_awaitable);
                    else
                        co_await s.async_accept(co_await l->async_get_request(use_awaitable), use_awaitable);
                    if (setup.client) std::cout << "connected" << std::endl;
                    co_await body(s);
                }
            },
            [](const std::exception_ptr& e) {
                if (e) std::rethrow_exception(e);
            });
        ctx.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << setup.name << ": " << e.what() << std::endl;
        return 1;
    }
}

} // namespace bench
