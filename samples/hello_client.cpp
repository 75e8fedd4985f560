// hello_client ADDRESS PORT [NAME]: connects to hello_server, sends NAME, prints the
// greeting that comes back, disconnects. One file.
//
// The habits it shows: one composed operation connects with the data path ready (address
// and route resolved, a queue pair, its receives posted before the server can send); a
// receive is given a time-out, with a timer and `||`; the client speaks first and says it
// again when no answer comes — on soft-iWARP (siw) a first message may stay unread until
// more data follows, and a server that spoke first could fail the client's connect
// (docs/co_await-connections.md, "Who speaks first"). No other retry is needed: the
// connection itself is reliable.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;

// [greet]
asio::awaitable<void> greet(rdmacm::endpoint server, std::string name) {
    rdmacm::cm_id id(co_await asio::this_coro::executor); // on its context's event channel
    // Resolve, route, a queue pair with 4 receives of 80 bytes posted, connect: one operation.
    auto [established, qp, inbox] = co_await rdmacm::async_connect(
        id, server, rdmacm::data_path_options{.receives = {.depth = 4, .message_size = 80}}, asio::use_awaitable);
    rdmacm::memory_region name_mr(qp.pd(), std::as_writable_bytes(std::span(name)));
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int attempt = 1;; ++attempt) {
        co_await qp.async_send(name_mr, std::as_bytes(std::span(name)), asio::use_awaitable);
        timer.expires_after(1s);
        auto first = co_await (inbox.async_receive(asio::as_tuple(asio::use_awaitable)) ||
                               timer.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (first.index() == 0) { // the receive, before the time-out
            auto [ec, greeting] = std::get<0>(std::move(first));
            if (ec) throw boost::system::system_error(ec, "receive");
            std::cout << "client: "
                      << std::string_view(reinterpret_cast<const char*>(greeting.data().data()), greeting.size())
                      << std::endl;
            break;
        }
        if (attempt == 10) throw std::runtime_error("no answer in 10 s");
    }
    co_await id.async_disconnect(asio::use_awaitable);
    std::cout << "client: disconnected" << std::endl;
}
// [greet]

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) {
        std::cerr << "usage: hello_client ADDRESS PORT [NAME]\n";
        return 2;
    }
    const std::string name = argc == 4 ? argv[3] : "client";
    if (name.empty() || name.size() > 64) {
        std::cerr << "hello_client: NAME must have 1 to 64 characters (the server's receives take 64 bytes)\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        const rdmacm::endpoint server{asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2]))};
        asio::co_spawn(ctx, greet(server, name), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
        ctx.run(); // returns once no operation waits: greet() is done
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "client: " << e.what() << std::endl;
        return 1;
    }
}
