// stream_bench server|client ADDRESS PORT SIZE COUNT [POLL_US [RING_SIZE [ACK_TIMEOUT]]]
// stream_bench server|client ADDRESS PORT SIZE COUNT tcp|nodelay|many|inplace
// rdmacm::stream measured the way rdma-core's rstream measures rsockets (and TCP, `rstream
// -T s`), for bench/stream_compare.sh to print beside them from the same run: after a
// 16-byte exchange, the client writes COUNT transfers of SIZE bytes, then reads COUNT back;
// the server reads them, then writes them back. Printed as rstream prints it: the time,
// Gb/s counting both directions, and microseconds per transfer (time / (2 COUNT)). Run the
// server first, then the client with the same SIZE and COUNT. POLL_US:
// stream_options::poll_for in microseconds (0, the default: event-driven; rsockets polls
// for a while before it sleeps); RING_SIZE: stream_options::ring_size; ACK_TIMEOUT:
// stream_options::ack_timeout (tests/pair/faults.sh: a writer's detection of a crashed
// peer follows it). `nodelay`: event-driven, each write sent at once
// (stream_options::no_delay; by default small writes made while a message is in flight
// wait for it, Nagle's rule). `many`: event-driven, with 16 messages in flight each way
// (`depth` and `send_depth`; the stream had 16 by default until 2026-12-07, 4 since).
// `inplace`: event-driven, each write made in the send ring (async_prepare_write, then
// commit_write) and each read taken where it arrived in the receive ring
// (async_read_in_place, then consume), their bytes left as they are, as ib_write_bw sends
// its buffer as it is and reads nothing: the stream without its copies (a program that makes
// its data in place, or parses it where it is, pays for that, not for a copy). `tcp`: the
// same code over Asio's own TCP socket (no delay), on the device's address: what Asio's
// operations cost, without RDMA.
#include "connected.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::use_awaitable;

namespace {

struct test {
    std::size_t size, count;
    bool client, in_place;
};

// A transfer's bytes, sent: copied from `data`, or made in the send ring (left as they are).
template <typename Stream>
asio::awaitable<void> send(Stream& s, std::span<const char> data, bool in_place) {
    if constexpr (requires { s.commit_write(0); }) {
        for (std::size_t left = data.size(); in_place && left > 0;) {
            const auto b = co_await s.async_prepare_write(left, use_awaitable);
            s.commit_write(b.size());
            left -= b.size();
        }
        if (in_place) co_return;
    }
    co_await asio::async_write(s, asio::buffer(data.data(), data.size()), use_awaitable);
}

// A transfer's bytes, received: copied into `data`, or read where they arrived in the
// receive ring (left as they are).
template <typename Stream>
asio::awaitable<void> receive(Stream& s, std::span<char> data, bool in_place) {
    if constexpr (requires { s.consume(0); }) {
        for (std::size_t left = data.size(); in_place && left > 0;) {
            const auto b = co_await s.async_read_in_place(left, use_awaitable);
            s.consume(b.size());
            left -= b.size();
        }
        if (in_place) co_return;
    }
    co_await asio::async_read(s, asio::buffer(data.data(), data.size()), use_awaitable);
}

// One pass of rstream's run_test: the client sends, then receives; the server the reverse.
template <typename Stream>
asio::awaitable<void> transfers(Stream& s, std::vector<char>& buf, std::size_t size, std::size_t count, bool send_first,
                                bool in_place) {
    for (int half = 0; half < 2; ++half)
        for (std::size_t t = 0; t < count; ++t) {
            if ((half == 0) == send_first)
                co_await send(s, std::span<const char>(buf.data(), size), in_place);
            else
                co_await receive(s, std::span<char>(buf.data(), size), in_place);
        }
}

template <typename Stream>
asio::awaitable<void> run(Stream& s, test t) {
    std::vector<char> buf(std::max<std::size_t>(t.size, 16), 'x');
    co_await transfers(s, buf, 16, 1, t.client, false); // (rstream's sync_test)
    const auto start = std::chrono::steady_clock::now();
    co_await transfers(s, buf, t.size, t.count, t.client, t.in_place);
    const double usec = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    const double bytes = 2.0 * static_cast<double>(t.size * t.count);
    std::printf("stream %zu %zu time_s %.3f gbps %.3f usec_per_xfer %.2f\n", t.size, t.count, usec / 1e6,
                bytes * 8 / (1000 * usec), usec / (2.0 * static_cast<double>(t.count)));
    std::fflush(stdout);
    // Each side ends its data, and reads the other's end.
    bench::end_data(s);
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(use_awaitable));
    if (ec != asio::error::eof) throw boost::system::system_error(ec, "the peer's end");
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 6 || argc > 9 || (std::string(argv[1]) != "server" && std::string(argv[1]) != "client")) {
        std::cerr << "usage: stream_bench server|client ADDRESS PORT SIZE COUNT [POLL_US [RING_SIZE "
                     "[ACK_TIMEOUT]] | tcp | nodelay | many | inplace]\n";
        return 2;
    }
    const std::string mode = argc >= 7 ? argv[6] : "0";
    const bool over_tcp = argc == 7 && mode == "tcp", no_delay = argc == 7 && mode == "nodelay",
               many = argc == 7 && mode == "many", in_place = argc == 7 && mode == "inplace";
    const test t{std::stoul(argv[4]), std::stoul(argv[5]), std::string(argv[1]) == "client", in_place};
    const bool named = over_tcp || no_delay || many || in_place;
    rdmacm::stream_options options{.no_delay = no_delay,
                                   .poll_for = std::chrono::microseconds(named ? 0 : std::stoi(mode))};
    if (many) options.depth = options.send_depth = 16;
    if (argc >= 8) options.ring_size = static_cast<std::uint32_t>(std::stoul(argv[7]));
    if (argc == 9) options.ack_timeout = static_cast<std::uint8_t>(std::stoul(argv[8]));
    return bench::run_connected({"stream_bench", t.client, asio::ip::make_address(argv[2]),
                                 static_cast<unsigned short>(std::stoi(argv[3])), over_tcp, options},
                                [&](auto& s) { return run(s, t); });
}
