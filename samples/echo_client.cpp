// echo_client ADDRESS PORT [COUNT] [SIZE]: sends COUNT messages of SIZE bytes to an echo
// server, one at a time (SIZE at least 8), checks each echo, and prints the round-trip latency — a
// ping-pong over send/receive, written with co_await. It gives up once no echo came for 30 s
// (a stall), however long a loaded machine takes for all of them.
#include "echo.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>

namespace asio = boost::asio;
using asio::awaitable;
using namespace std::chrono_literals;

namespace {

constexpr auto stall_limit = 30s;

// `echoes`: counted as they come (what the stall watch looks at).
awaitable<void> run(rdmacm::endpoint server, int count, std::size_t size, int& echoes) {
    rdmacm::event_channel channel(co_await asio::this_coro::executor);
    auto peer = co_await sample::echo_peer::connect(channel, server, size);
    std::cout << "client: connected to " << peer->id().remote_endpoint() << std::endl;
    std::vector<double> rtt_us;
    for (int i = 0; i < count; ++i) {
        auto start = std::chrono::steady_clock::now();
        co_await peer->round_trip(static_cast<std::uint64_t>(i));
        ++echoes;
        rtt_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(rtt_us.begin(), rtt_us.end());
    std::cout << "client: " << count << " echoes of " << size << " bytes, all correct; round trip p50 "
              << rtt_us[rtt_us.size() / 2] << " us, p99 " << rtt_us[rtt_us.size() * 99 / 100] << " us" << std::endl;
    if (peer->nudges() != 0)
        std::cout << "client: the first message was nudged " << peer->nudges()
                  << " time(s): siw's first-message race (see echo.hpp)" << std::endl;
    co_await peer->disconnect();
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
    if (count < 1 || size < 8) {
        std::cerr << "echo_client: COUNT must be positive, SIZE at least 8\n";
        return 2;
    }
    try {
        asio::io_context ctx;
        rdmacm::endpoint server{asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::stoi(argv[2]))};
        int echoes = 0;
        asio::co_spawn(ctx, run(server, count, size, echoes), [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
        for (int before = echoes; !ctx.stopped(); before = echoes) {
            ctx.run_for(stall_limit);
            if (!ctx.stopped() && echoes == before)
                throw std::runtime_error("timed out: no echo for " + std::to_string(stall_limit.count()) + " s, " +
                                         std::to_string(echoes) + " so far");
        }
    } catch (const std::exception& e) {
        std::cerr << "client: " << e.what() << std::endl;
        return 1;
    }
}
