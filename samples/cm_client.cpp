// cm_client ADDRESS PORT [MESSAGE]: an RDMA CM client written with co_await.
//
// Resolves, connects (with MESSAGE as private data) under a 5 s time-out — a timer that
// cancels the connect — prints the server's reply, then disconnects. Its I/O objects have
// use_awaitable for their default token (as_default_on, awaitable.hpp): co_await without
// tokens.
#include "awaitable.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/system/system_error.hpp>

#include <iostream>
#include <string>

namespace asio = boost::asio;
using asio::awaitable;
using namespace asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

using sample::awaitable_id;
using sample::awaitable_timer;

std::string text(std::span<const std::byte> b) {
    std::string s(reinterpret_cast<const char*>(b.data()), b.size());
    return s.substr(0, s.find('\0'));
}

awaitable<void> client(rdmacm::endpoint server, std::string message) {
    awaitable_id id(co_await asio::this_coro::executor); // on the context's event channel
    rdmacm::connect_options options;
    options.params.private_data = std::as_bytes(std::span(message));
    options.qp = rdmacm::rc_qp_init_attr();

    awaitable_timer timeout(co_await asio::this_coro::executor, 5s);
    // as_tuple: a refusal ends the race at once, with its error (`||` waits for a success).
    auto result = co_await (rdmacm::async_connect(id, server, options, asio::as_tuple(asio::use_awaitable)) ||
                            timeout.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (result.index() == 1) {
        std::cout << "client: no connection within 5 s" << std::endl;
        co_return; // the connect was cancelled; closing the id cleans up
    }
    auto& [ec, established] = std::get<0>(result);
    if (ec) throw boost::system::system_error(ec, "connect");
    std::cout << "client: " << rdmacm::to_string(established.type()) << " with " << id.remote_endpoint()
              << ", server says \"" << text(established.private_data()) << "\"" << std::endl;
    co_await id.async_disconnect();
    std::cout << "client: DISCONNECTED" << std::endl;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) {
        std::cerr << "usage: cm_client ADDRESS PORT [MESSAGE]\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        rdmacm::endpoint server(asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2])));
        asio::co_spawn(ctx, client(server, argc == 4 ? argv[3] : "hello"), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
        ctx.run(); // returns once no operation waits: the client is done
    } catch (const std::exception& e) {
        std::cerr << "client: " << e.what() << std::endl;
        return 1;
    }
}
