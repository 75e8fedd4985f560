// echo_client ADDRESS PORT [COUNT] [SIZE]: sends COUNT messages of SIZE bytes to an echo
// server, one at a time, checks each echo, and prints the round-trip latency — a
// ping-pong over send/receive, written with co_await.
#include "receive_queue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;

namespace {

awaitable<void> run(rdmacm::endpoint server, int count, std::size_t size) {
    rdmacm::event_channel channel(co_await asio::this_coro::executor);
    rdmacm::cm_id id(channel);
    co_await id.async_resolve_address(server, 2s, use_awaitable);
    co_await id.async_resolve_route(2s, use_awaitable);
    rdmacm::queue_pair qp(id, {.max_send_wr = 4, .max_recv_wr = 4});
    receive_queue echoes(qp, 4, size); // posted before the first message can come back
    std::vector<std::byte> out(size);
    rdmacm::memory_region out_mr(qp.pd(), out);
    co_await id.async_connect({}, use_awaitable);
    std::cout << "client: connected to " << id.remote_endpoint() << std::endl;

    std::vector<double> rtt_us;
    for (int i = 0; i < count; ++i) {
        for (std::size_t b = 0; b < size; ++b) out[b] = std::byte(static_cast<unsigned char>(i + b));
        auto start = std::chrono::steady_clock::now();
        co_await qp.async_send(out_mr, out, use_awaitable);
        auto [ec, length, slot] = co_await echoes.async_next(asio::as_tuple(use_awaitable));
        rtt_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
        if (ec) throw boost::system::system_error(ec, "receive");
        if (length != size || std::memcmp(echoes.slot(slot).data(), out.data(), size) != 0)
            throw std::runtime_error("echo " + std::to_string(i) + " differs from what was sent");
        echoes.post(slot);
    }
    std::sort(rtt_us.begin(), rtt_us.end());
    std::cout << "client: " << count << " echoes of " << size << " bytes, all correct; round trip p50 "
              << rtt_us[rtt_us.size() / 2] << " us, p99 " << rtt_us[rtt_us.size() * 99 / 100] << " us" << std::endl;
    co_await id.async_disconnect(use_awaitable);
    std::cout << "client: disconnected" << std::endl;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 5) {
        std::cerr << "usage: echo_client ADDRESS PORT [COUNT] [SIZE]\n";
        return 2;
    }
    const int count = argc > 3 ? std::stoi(argv[3]) : 1000;
    const std::size_t size = argc > 4 ? std::stoul(argv[4]) : 64;
    if (count < 1 || size < 1) {
        std::cerr << "echo_client: COUNT and SIZE must be positive\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        rdmacm::endpoint server{asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2]))};
        asio::co_spawn(ctx, run(server, count, size), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
        ctx.run_for(60s);
        if (!ctx.stopped()) throw std::runtime_error("timed out");
    } catch (const std::exception& e) {
        std::cerr << "client: " << e.what() << std::endl;
        return 1;
    }
}
