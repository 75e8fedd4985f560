#pragma once
// The samples' echo service on one connection request's id: a queue pair with receives
// posted, accept, send every message straight back until the peer disconnects (its receives
// are then flushed), disconnect. Runs on the calling coroutine's executor. It takes errors
// as values (as_tuple), so names its tokens; the client, echo_peer, co_awaits without
// (awaitable.hpp).
//
// A one-byte message is a nudge (see echo_peer::round_trip): dropped, never echoed.
#include "awaitable.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>

namespace sample {

constexpr std::size_t echo_depth = 64, echo_message_size = 4096;
constexpr std::size_t nudge_length = 1; // messages are at least 8 bytes

// Returns how many messages were echoed; `on_established` is called once connected,
// `on_message` for each message received, before it is sent back. (Counting what came in,
// not what went out: a send the peer got may still complete with an error here when the
// peer disconnects straight after, its acknowledgement overtaken by the teardown.)
template <typename OnEstablished, typename OnMessage = void (*)()>
boost::asio::awaitable<std::size_t> echo(
    rdmacm::cm_id& conn, OnEstablished on_established, OnMessage on_message = [] {}) {
    namespace asio = boost::asio;
    rdmacm::queue_pair qp(conn, {.max_send_wr = echo_depth, .max_recv_wr = echo_depth});
    rdmacm::receive_pool received(qp, echo_depth, echo_message_size);
    co_await conn.async_accept({}, asio::use_awaitable); // receives posted before
    on_established();
    std::size_t echoed = 0;
    for (;;) {
        // (A message gives its buffer back to the pool when it goes, at the end of the loop.)
        auto [ec, message] = co_await received.async_receive(asio::as_tuple(asio::use_awaitable));
        if (ec) break;                                // flushed: the peer has gone
        if (message.size() == nudge_length) continue; // dropped
        on_message();
        ++echoed;
        auto [send_failed, bytes] =
            co_await qp.async_send(received.region(), message.data(), asio::as_tuple(asio::use_awaitable));
        if (send_failed) break; // the connection broke, or its owner closed it
    }
    // Closed by its owner meanwhile (a pool that stops): nothing is left to disconnect.
    auto [disconnected] = co_await conn.async_disconnect(asio::as_tuple(asio::use_awaitable));
    if (disconnected && disconnected != rdmacm::errc::not_open)
        throw boost::system::system_error(disconnected, "disconnect");
    co_return echoed;
}

// A client of the echo service: numbered messages of `size` bytes (at least 8), one at a
// time, each echo checked byte for byte.
class echo_peer {
public:
    static boost::asio::awaitable<std::unique_ptr<echo_peer>>
    connect(rdmacm::event_channel& channel, const rdmacm::endpoint& server, std::size_t size) {
        namespace asio = boost::asio;
        using namespace std::chrono_literals;
        awaitable_id id(channel);
        // Resolve, route, queue pair, receives posted, connect: one operation.
        auto [established, qp, echoes] = co_await rdmacm::async_connect(
            id, server, {.resolve_timeout = 2s},
            {.qp = {.max_send_wr = 4, .max_recv_wr = 4}, .receives = {.depth = 4, .message_size = size}});
        co_return std::unique_ptr<echo_peer>(new echo_peer(std::move(id), std::move(qp), std::move(echoes), size));
    }

    awaitable_id& id() { return id_; }

    // Sends message `n`, waits for its echo; throws if it differs or the connection broke.
    //
    // siw's first-message race (Linux 6.1 siw_cm.c: the server's siw sends its MPA reply
    // before it hands the socket to the queue pair): a first message arriving in between
    // stays unread in the server's TCP receive queue until more data comes. So until the
    // first echo has come, a client that waited a second for it sends a nudge — one byte,
    // which the server drops — and siw reads what was stuck. InfiniBand and RoCE have no
    // such race: there the nudge waits 10 s, longer than a loaded machine delays an echo
    // (a 1 s wait nudged 2 of 91 sessions on rxe with two VMs and a CPU hog on 2 cores), so
    // one sent there means a message was stuck.
    boost::asio::awaitable<void> round_trip(std::uint64_t n) {
        namespace asio = boost::asio;
        using namespace boost::asio::experimental::awaitable_operators;
        std::memcpy(out_.data(), &n, sizeof n);
        for (std::size_t b = sizeof n; b < out_.size(); ++b) out_[b] = std::byte(static_cast<unsigned char>(n + b));
        co_await qp_.async_send(out_mr_, out_);
        rdmacm::error_code ec;
        rdmacm::received_message echo;
        for (asio::steady_timer timer(co_await asio::this_coro::executor);;) {
            if (echoed_) {
                std::tie(ec, echo) = co_await echoes_.async_receive(asio::as_tuple(asio::use_awaitable));
                break;
            }
            // A receive from the pool that times out loses nothing: the echo waits for the next.
            timer.expires_after(nudge_after_);
            auto first = co_await (echoes_.async_receive(asio::as_tuple(asio::use_awaitable)) ||
                                   timer.async_wait(asio::as_tuple(asio::use_awaitable)));
            if (first.index() == 0) {
                std::tie(ec, echo) = std::get<0>(std::move(first));
                echoed_ = true;
                break;
            }
            if (++nudges_ > max_nudges) throw std::runtime_error("no echo of the first message, nudged in vain");
            co_await qp_.async_send(out_mr_, std::span(out_).first(nudge_length));
        }
        if (ec) throw boost::system::system_error(ec, "receive");
        if (echo.size() != out_.size() || std::memcmp(echo.data().data(), out_.data(), out_.size()) != 0)
            throw std::runtime_error("echo of message " + std::to_string(n) + " differs from what was sent");
    }

    boost::asio::awaitable<void> disconnect() { co_await id_.async_disconnect(); }

    // Nudges sent so far (round_trip): siw's race struck.
    int nudges() const noexcept { return nudges_; }

private:
    echo_peer(awaitable_id id, awaitable_queue_pair qp, awaitable_receive_pool echoes, std::size_t size)
        : id_(std::move(id)), qp_(std::move(qp)), echoes_(std::move(echoes)), out_(size), out_mr_(qp_.pd(), out_),
          nudge_after_(id_.native_handle()->verbs->device->transport_type == IBV_TRANSPORT_IWARP
                           ? std::chrono::seconds(1)
                           : std::chrono::seconds(10)) {}

    awaitable_id id_;
    awaitable_queue_pair qp_;
    awaitable_receive_pool echoes_;
    std::vector<std::byte> out_;
    rdmacm::memory_region out_mr_;
    std::chrono::seconds nudge_after_;
    bool echoed_ = false;
    int nudges_ = 0;
    // The server keeps echo_depth receives posted: the message and the nudges must fit.
    static constexpr int max_nudges = 30;
};

} // namespace sample
