// http_server ADDRESS [PORT]: an HTTP/1.1 server written with Beast, over RDMA.
//
// Each connection is an rdmacm::stream — an Asio stream, so Beast's http::async_read and
// async_write run over it unchanged. Keep-alive: requests are answered until the client ends
// its data (Beast's end_of_stream), then the server ends its own. Every answer names what
// was asked, so a client can check each body. A client whose host went without a word is
// found by the stream's keep-alive, its connection closed. SIGINT or SIGTERM stops it
// cleanly.
#include "awaitable.hpp"
#include "sample_server.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

// [serve]
asio::awaitable<void> serve(rdmacm::connection_request request, int n) {
    // Probed when idle for 5 s: a client's host that crashed ends the read below with an
    // error, not never.
    rdmacm::stream s(co_await asio::this_coro::executor, {.keep_alive = std::chrono::seconds(5)});
    sample::live live(s); // (closed if the server is stopped)
    std::size_t answered = 0;
    try {
        co_await s.async_accept(std::move(request), asio::use_awaitable);
        boost::beast::flat_buffer buffer;
        for (;;) {
            http::request<http::string_body> req;
            auto [ec, bytes] = co_await http::async_read(s, buffer, req, asio::as_tuple(asio::use_awaitable));
            if (ec == http::error::end_of_stream) break; // the client is done
            if (ec) throw boost::system::system_error(ec, "read");
            http::response<http::string_body> res(http::status::ok, req.version());
            res.set(http::field::content_type, "text/plain");
            res.keep_alive(req.keep_alive());
            res.body() = "hello over RDMA, you asked for " + std::string(req.target());
            res.prepare_payload();
            co_await http::async_write(s, res, asio::use_awaitable);
            ++answered;
            if (!req.keep_alive()) break;
        }
        co_await s.async_shutdown(asio::use_awaitable); // its end, once delivered
    } catch (const boost::system::system_error& e) {
        std::cout << "server: connection " << n << ": " << e.what() << std::endl;
    }
    std::cout << "server: connection " << n << " closed after " << answered << " requests" << std::endl;
}
// [serve]

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: http_server ADDRESS [PORT]\n";
        return 2;
    }
    return sample::run_server(argv[1], static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0), serve);
}
