#pragma once
// What the stream tests share: both ends of a stream on one context's channel, and a fixture
// that fails a test leaving work behind.
#include "support/fixture.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace rdmacm::test {

// Small enough that every transfer runs out of credits many times over.
constexpr stream_options tight{.depth = 3, .ring_size = 1024, .send_depth = 2};

// A listener and both ends of a stream, on one context's channel or the client on another's.
struct stream_pair {
    asio::io_context& ctx;
    listener l{ctx};
    stream server, client;

    stream_pair(asio::io_context& on, stream_options server_options = {}, stream_options client_options = {})
        : stream_pair(on, on, server_options, client_options) {}
    // The client on a context of its own (the listener and the server on `server_on`).
    stream_pair(asio::io_context& server_on, asio::io_context& client_on, stream_options server_options,
                stream_options client_options)
        : ctx(server_on), server(server_on, server_options), client(client_on, client_options) {
        l.bind(device_endpoint());
        l.listen();
    }
    asio::awaitable<void> open() {
        using namespace asio::experimental::awaitable_operators;
        co_await (accept() && client.async_connect(device_endpoint(l.local_endpoint().port()), asio::use_awaitable));
    }
    asio::awaitable<void> accept() {
        auto request = co_await l.async_get_request(asio::use_awaitable);
        co_await server.async_accept(std::move(request), asio::use_awaitable);
    }
};

// Every operation done and every id gone, the context runs out of work.
struct stream_fixture {
    asio::io_context ctx;
    ~stream_fixture() {
        BOOST_TEST(runs_out_of_work(ctx),
                   "the test left work behind: its io_context still had some 30 s after it ended");
        report_thread_checks();
    }
};

} // namespace rdmacm::test
