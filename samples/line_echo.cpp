// line_echo ADDRESS [LINES]: a line protocol over RDMA with Asio's own composed operations —
// a server that answers each line with the line reversed, and a client that sends LINES
// lines (default 100) and checks each answer, both in this one process on one io_context.
// Each side reads with asio::async_read_until on a dynamic buffer, as over TCP: the
// rdmacm::stream is an Asio stream, so nothing else changes.
#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
using asio::use_awaitable;
using namespace boost::asio::experimental::awaitable_operators;

// [lines]
asio::awaitable<void> answer_lines(rdmacm::stream& s) {
    std::string in;
    for (;;) {
        auto [ec, n] =
            co_await asio::async_read_until(s, asio::dynamic_buffer(in), '\n', asio::as_tuple(use_awaitable));
        if (ec == asio::error::eof) break; // the client is done
        if (ec) throw boost::system::system_error(ec, "server read");
        std::string line = in.substr(0, n - 1);
        in.erase(0, n);
        std::reverse(line.begin(), line.end());
        co_await asio::async_write(s, asio::buffer(line + "\n"), use_awaitable);
    }
    co_await s.async_shutdown(use_awaitable);
}
// [lines]

asio::awaitable<int> ask_lines(rdmacm::stream& s, int lines) {
    std::string in;
    for (int i = 0; i < lines; ++i) {
        const std::string line = "line " + std::to_string(i) + " " + std::string(static_cast<std::size_t>(i % 50), '.');
        co_await asio::async_write(s, asio::buffer(line + "\n"), use_awaitable);
        const std::size_t n = co_await asio::async_read_until(s, asio::dynamic_buffer(in), '\n', use_awaitable);
        if (!std::equal(line.rbegin(), line.rend(), in.begin()) || n != line.size() + 1)
            throw std::runtime_error("line " + std::to_string(i) + ": unexpected answer");
        in.erase(0, n);
    }
    co_await s.async_shutdown(use_awaitable);
    co_return lines;
}

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: line_echo ADDRESS [LINES]\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        rdmacm::listener l(ctx);
        l.bind({asio::ip::make_address(argv[1]), 0});
        l.listen();
        const int lines = argc == 3 ? std::stoi(argv[2]) : 100;
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
                rdmacm::stream server(ctx), client(ctx);
                auto serve = [&]() -> asio::awaitable<void> {
                    co_await server.async_accept(co_await l.async_get_request(use_awaitable), use_awaitable);
                    co_await answer_lines(server);
                };
                auto ask = [&]() -> asio::awaitable<int> {
                    co_await client.async_connect(l.local_endpoint(), use_awaitable);
                    co_return co_await ask_lines(client, lines);
                };
                const int answered = co_await (serve() && ask());
                std::cout << "line_echo: " << answered << " lines answered over RDMA, all correct" << std::endl;
            },
            [](const std::exception_ptr& e) {
                if (e) std::rethrow_exception(e);
            });
        ctx.run();
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "line_echo: " << e.what() << std::endl;
        return 1;
    }
}
