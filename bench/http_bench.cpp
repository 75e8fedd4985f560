// http_bench server|client ADDRESS PORT REQUESTS [tcp]
// Beast's HTTP/1.1 over an rdmacm::stream, measured against the same Beast code over Asio's
// own TCP socket (`tcp`, no delay, on the device's address) for bench/stream_compare.sh to
// print side by side: the client makes REQUESTS keep-alive GET requests one after another
// on one connection, each answered with a 100-byte body it checks, and prints the requests
// per second (and microseconds per request). The server answers until the client ends its
// data, then ends its own. Run the server first, then the client with the same REQUESTS.
#include "connected.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::use_awaitable;

namespace {

const std::string body(100, 'b');

template <typename Stream>
asio::awaitable<void> serve(Stream& s) {
    boost::beast::flat_buffer buffer;
    for (;;) {
        http::request<http::empty_body> req;
        auto [ec, n] = co_await http::async_read(s, buffer, req, asio::as_tuple(use_awaitable));
        if (ec == http::error::end_of_stream) break;
        if (ec) throw boost::system::system_error(ec, "server: read");
        http::response<http::string_body> res(http::status::ok, req.version(), body);
        res.keep_alive(true);
        res.prepare_payload();
        co_await http::async_write(s, res, use_awaitable);
    }
    bench::end_data(s);
}

template <typename Stream>
asio::awaitable<void> requests(Stream& s, std::size_t count) {
    boost::beast::flat_buffer buffer;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < count; ++i) {
        http::request<http::empty_body> req(http::verb::get, "/", 11);
        req.set(http::field::host, "bench");
        co_await http::async_write(s, req, use_awaitable);
        http::response<http::string_body> res;
        co_await http::async_read(s, buffer, res, use_awaitable);
        if (res.body() != body) throw std::runtime_error("client: response " + std::to_string(i) + ": wrong body");
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("http %zu time_s %.3f requests_per_s %.1f usec_per_request %.2f\n", count, sec,
                static_cast<double>(count) / sec, sec * 1e6 / static_cast<double>(count));
    std::fflush(stdout);
    bench::end_data(s);
    http::response<http::string_body> none;
    auto [ec, n] = co_await http::async_read(s, buffer, none, asio::as_tuple(use_awaitable));
    if (ec != http::error::end_of_stream) throw boost::system::system_error(ec, "client: the server's end");
}

} // namespace

int main(int argc, char** argv) {
    const bool over_tcp = argc == 6 && std::string(argv[5]) == "tcp";
    if ((argc != 5 && !over_tcp) || (std::string(argv[1]) != "server" && std::string(argv[1]) != "client")) {
        std::cerr << "usage: http_bench server|client ADDRESS PORT REQUESTS [tcp]\n";
        return 2;
    }
    const bool client = std::string(argv[1]) == "client";
    const std::size_t count = std::stoul(argv[4]);
    return bench::run_connected({"http_bench",
                                 client,
                                 asio::ip::make_address(argv[2]),
                                 static_cast<unsigned short>(std::stoi(argv[3])),
                                 over_tcp,
                                 {}},
                                [&](auto& s) { return client ? requests(s, count) : serve(s); });
}
