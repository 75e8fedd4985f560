#pragma once
/// @file
/// Beast's hooks for `rdmacm::basic_stream` (found by argument-dependent lookup): a WebSocket
/// over RDMA closes with `async_teardown`, and `beast::close_socket` closes the stream.
/// Include it where Beast's WebSocket is used over a stream (HTTP needs nothing of it).
#include "rdmacm/stream.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/role.hpp>

#include <array>
#include <memory>

namespace rdmacm {

namespace detail {

// Beast's teardown of a TCP socket, over a stream: the server ends its data, then reads to
// the client's end; the client reads to the server's end, then ends its own (and waits for
// it to be delivered: a close right after would flush it). Then the stream is closed. The
// peer's end, seen as eof, is success.
template <typename Executor>
struct teardown_op {
    basic_stream<Executor>& stream;
    boost::beast::role_type role;
    // What the peer still sends, dropped: on the heap, where the read's buffer stays put
    // while this operation moves from handler to handler.
    std::unique_ptr<std::array<std::byte, 512>> discard = std::make_unique<std::array<std::byte, 512>>();
    enum class step : std::uint8_t { start, reading, ending, done } at = step::start;

    template <typename Self>
    void operator()(Self& self, error_code ec = {}, std::size_t = 0) {
        const bool server = role == boost::beast::role_type::server;
        switch (at) {
        case step::start:
            if (server) return end(self);
            return read(self);
        case step::reading:
            if (!ec) return read(self);
            if (ec != boost::asio::error::eof) return finish(self, ec);
            if (server) return finish(self, {});
            return end(self);
        case step::ending:
            if (ec) return finish(self, ec);
            if (server) return read(self);
            return finish(self, {});
        case step::done: break;
        }
    }
    template <typename Self>
    void read(Self& self) {
        at = step::reading;
        stream.async_read_some(boost::asio::buffer(*discard), std::move(self));
    }
    template <typename Self>
    void end(Self& self) {
        at = step::ending;
        stream.async_shutdown(std::move(self));
    }
    template <typename Self>
    void finish(Self& self, error_code ec) {
        at = step::done;
        stream.close();
        self.complete(ec);
    }
};

} // namespace detail

/// Closes the stream (Beast's `close_socket`, e.g. on a WebSocket time-out).
template <typename Executor>
void beast_close_socket(basic_stream<Executor>& s) {
    s.close();
}

/// Beast's WebSocket teardown over a stream, as over TCP: an orderly end both ways, then the
/// stream closed. Completes with `void(error_code)`.
template <typename Executor, typename TeardownHandler>
void async_teardown(boost::beast::role_type role, basic_stream<Executor>& s, TeardownHandler&& handler) {
    boost::asio::async_compose<TeardownHandler, void(error_code)>(detail::teardown_op<Executor>{s, role}, handler,
                                                                  s.get_executor());
}

/// The synchronous teardown Beast's blocking calls ask for: not supported (the stream's
/// operations are asynchronous only): `operation_not_supported`.
template <typename Executor>
void teardown(boost::beast::role_type, basic_stream<Executor>& s, error_code& ec) {
    s.close();
    ec = boost::asio::error::operation_not_supported;
}

} // namespace rdmacm
