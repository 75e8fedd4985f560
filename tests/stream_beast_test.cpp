// Beast over rdmacm::stream on the kernel CM and a real (soft) device: HTTP requests and
// responses, and a WebSocket whose close runs the stream's teardown (rdmacm/beast.hpp) on
// both sides — every message echoed, both streams closed after, nothing left behind.
#include "support/stream_pair.hpp"

#include <rdmacm/beast.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <string>

using namespace rdmacm;
using namespace rdmacm::test;
using namespace boost::asio::experimental::awaitable_operators;
using asio::awaitable;
using asio::use_awaitable;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

BOOST_FIXTURE_TEST_CASE(http_requests_and_responses, stream_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        stream_pair p(ctx, tight, tight); // (a body of 3,000 bytes spans several messages)
        co_await p.open();
        const std::string body(3000, 'b');
        auto serve = [&]() -> awaitable<int> {
            beast::flat_buffer buffer;
            int answered = 0;
            for (;;) {
                http::request<http::string_body> req;
                auto [ec, n] = co_await http::async_read(p.server, buffer, req, asio::as_tuple(use_awaitable));
                if (ec == http::error::end_of_stream) break;
                if (ec) throw boost::system::system_error(ec);
                http::response<http::string_body> res(http::status::ok, 11);
                res.body() = std::string(req.target()) + body;
                res.prepare_payload();
                co_await http::async_write(p.server, res, use_awaitable);
                ++answered;
            }
            co_await p.server.async_shutdown(use_awaitable);
            co_return answered;
        };
        auto ask = [&]() -> awaitable<void> {
            beast::flat_buffer buffer;
            for (int i = 0; i < 20; ++i) {
                http::request<http::string_body> req(http::verb::post, "/" + std::to_string(i), 11);
                req.body() = body;
                req.prepare_payload();
                co_await http::async_write(p.client, req, use_awaitable);
                http::response<http::string_body> res;
                co_await http::async_read(p.client, buffer, res, use_awaitable);
                BOOST_TEST(res.body() == "/" + std::to_string(i) + body);
            }
            co_await p.client.async_shutdown(use_awaitable);
            http::response<http::string_body> none;
            auto [ec, n] = co_await http::async_read(p.client, buffer, none, asio::as_tuple(use_awaitable));
            BOOST_TEST((ec == http::error::end_of_stream), ec.message());
        };
        const int answered = co_await (serve() && ask());
        BOOST_TEST(answered == 20);
    }());
}

BOOST_FIXTURE_TEST_CASE(a_websocket_echoes_then_closes_both_streams, stream_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        stream_pair p(ctx);
        co_await p.open();
        websocket::stream<stream&> server(p.server), client(p.client);
        auto echo = [&]() -> awaitable<int> {
            co_await server.async_accept(use_awaitable);
            beast::flat_buffer buffer;
            int echoed = 0;
            for (;;) {
                auto [ec, n] = co_await server.async_read(buffer, asio::as_tuple(use_awaitable));
                if (ec == websocket::error::closed) break; // the client's close, answered
                if (ec) throw boost::system::system_error(ec);
                server.text(server.got_text());
                co_await server.async_write(buffer.data(), use_awaitable);
                buffer.consume(buffer.size());
                ++echoed;
            }
            co_return echoed;
        };
        auto talk = [&]() -> awaitable<void> {
            co_await client.async_handshake("rdma", "/", use_awaitable);
            beast::flat_buffer buffer;
            for (int i = 0; i < 10; ++i) {
                const std::string message = "message " + std::to_string(i) + std::string(i * 1000, '.');
                co_await client.async_write(asio::buffer(message), use_awaitable);
                co_await client.async_read(buffer, use_awaitable);
                BOOST_TEST(beast::buffers_to_string(buffer.data()) == message);
                buffer.consume(buffer.size());
            }
            co_await client.async_close(websocket::close_code::normal, use_awaitable); // (the teardown)
        };
        const int echoed = co_await (echo() && talk());
        BOOST_TEST(echoed == 10);
        // Beast's teardown ends each side's data, reads the other's end, closes the stream.
        BOOST_TEST(!p.server.is_open());
        BOOST_TEST(!p.client.is_open());
    }());
}
