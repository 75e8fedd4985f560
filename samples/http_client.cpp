// http_client ADDRESS PORT [N [PAUSE_MS]]: N keep-alive HTTP/1.1 requests (default 10) to
// http_server over one RDMA connection, written with Beast on an rdmacm::stream, PAUSE_MS
// milliseconds apart (default 0); each body is checked.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <iostream>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;

// [requests]
asio::awaitable<void> requests(rdmacm::endpoint server, int n, std::chrono::milliseconds pause) {
    // Probed when idle for 5 s: a server's host that crashed ends the read below with an
    // error, also when the request went and its answer never comes.
    rdmacm::stream s(co_await asio::this_coro::executor, {.keep_alive = std::chrono::seconds(5)});
    co_await s.async_connect(server, asio::use_awaitable);
    std::cout << "client: connected to " << server << std::endl;
    boost::beast::flat_buffer buffer;
    asio::steady_timer timer(s.get_executor());
    for (int i = 1; i <= n; ++i) {
        if (i > 1 && pause.count() > 0) {
            timer.expires_after(pause);
            co_await timer.async_wait(asio::use_awaitable);
        }
        http::request<http::empty_body> req(http::verb::get, "/" + std::to_string(i), 11);
        req.set(http::field::host, "rdma");
        co_await http::async_write(s, req, asio::use_awaitable);
        http::response<http::string_body> res;
        co_await http::async_read(s, buffer, res, asio::use_awaitable);
        if (res.body() != "hello over RDMA, you asked for /" + std::to_string(i))
            throw std::runtime_error("request " + std::to_string(i) + ": unexpected body \"" + res.body() + "\"");
    }
    // The end of our data; the server then ends its own, read as end_of_stream.
    co_await s.async_shutdown(asio::use_awaitable);
    http::response<http::string_body> none;
    auto [ec, bytes] = co_await http::async_read(s, buffer, none, asio::as_tuple(asio::use_awaitable));
    if (ec != http::error::end_of_stream) throw boost::system::system_error(ec, "the server's end");
    std::cout << "client: " << n << " requests over RDMA, all bodies correct" << std::endl;
}
// [requests]

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::cerr << "usage: http_client ADDRESS PORT [N [PAUSE_MS]]\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        const rdmacm::endpoint server{asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2]))};
        const int n = argc >= 4 ? std::stoi(argv[3]) : 10;
        const std::chrono::milliseconds pause(argc == 5 ? std::stoi(argv[4]) : 0);
        asio::co_spawn(ctx, requests(server, n, pause), [](const std::exception_ptr& e) {
            if (e) std::rethrow_exception(e);
        });
        ctx.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "client: " << e.what() << std::endl;
        return 1;
    }
}
