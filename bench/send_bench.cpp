// send_bench ADDRESS [ITERATIONS] [SIZE] [WINDOW]: queue_pair send/receive measured the
// way rdma-core's perftest measures it, for tools/bench to print next to ib_send_lat and
// ib_send_bw run in the same VM run:
//   latency  — ping-pong of SIZE-byte messages; one-way latency = round trip / 2 (what
//              ib_send_lat reports as t_typical), median and p99;
//   msg rate — SIZE-byte messages streamed, up to 2*WINDOW in flight, the receiver
//              returning a credit every WINDOW messages (iWARP has no RNR retry).
// Server and client each run their own io_context on a thread of their own. Prints one
// line: "latency_us <p50> <p99> msg_rate_mps <rate>".
#include "receive_queue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

enum : unsigned char { ping = 'P', data = 'D' };

struct settings {
    int iterations;
    std::size_t size;
    std::uint32_t window;
};

// Echoes pings; answers every `window` data messages with a credit.
awaitable<void> server(rdmacm::listener& l, settings s) {
    auto req = co_await l.async_accept(use_awaitable);
    rdmacm::cm_id id = std::move(req.id);
    rdmacm::queue_pair qp(id, {.max_send_wr = 4 * s.window, .max_recv_wr = 2 * s.window});
    receive_queue received(qp, 2 * s.window, s.size);
    std::vector<std::byte> out(s.size);
    rdmacm::memory_region out_mr(qp.pd(), out);
    co_await id.async_accept({}, use_awaitable);
    std::uint64_t data_messages = 0;
    for (;;) {
        auto [ec, n, slot] = co_await received.async_next(asio::as_tuple(use_awaitable));
        if (ec) break; // the client has gone
        auto kind = static_cast<unsigned char>(received.slot(slot)[0]);
        received.post(slot);
        if (kind == ping || ++data_messages % s.window == 0)
            qp.async_send(out_mr, out, [](rdmacm::error_code, std::size_t) {});
    }
    co_await id.async_disconnect(asio::as_tuple(use_awaitable));
}

struct result {
    double p50_us, p99_us, rate;
};

awaitable<result> client(rdmacm::endpoint server, settings s) {
    rdmacm::event_channel channel(co_await asio::this_coro::executor);
    rdmacm::cm_id id(channel);
    co_await id.async_resolve_address(server, 2s, use_awaitable);
    co_await id.async_resolve_route(2s, use_awaitable);
    rdmacm::queue_pair qp(id, {.max_send_wr = 4 * s.window, .max_recv_wr = 2 * s.window});
    receive_queue received(qp, 2 * s.window, s.size);
    std::vector<std::byte> out(s.size);
    rdmacm::memory_region out_mr(qp.pd(), out);
    co_await id.async_connect({}, use_awaitable);
    auto ignore = [](rdmacm::error_code ec, std::size_t) {
        if (ec) throw boost::system::system_error(ec, "send");
    };

    // Latency: one message out, its echo back.
    out[0] = std::byte{ping};
    std::vector<double> half_rtt;
    for (int i = 0; i < s.iterations; ++i) {
        auto start = clock_type::now();
        qp.async_send(out_mr, out, ignore);
        auto [ec, n, slot] = co_await received.async_next(asio::as_tuple(use_awaitable));
        if (ec) throw boost::system::system_error(ec, "receive");
        half_rtt.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / 2);
        received.post(slot);
    }
    std::sort(half_rtt.begin(), half_rtt.end());

    // Message rate: as many in flight as the server has receives posted.
    out[0] = std::byte{data};
    const int total = s.iterations * static_cast<int>(s.window);
    int sent = 0, credited = 0;
    std::int64_t credits = 2 * s.window;
    auto start = clock_type::now();
    while (credited < total) {
        for (; credits > 0 && sent < total; --credits, ++sent) qp.async_send(out_mr, out, ignore);
        auto [ec, n, slot] = co_await received.async_next(asio::as_tuple(use_awaitable));
        if (ec) throw boost::system::system_error(ec, "receive");
        received.post(slot);
        credits += s.window;
        credited += static_cast<int>(s.window);
    }
    double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    co_await id.async_disconnect(use_awaitable);
    co_return result{half_rtt[half_rtt.size() / 2], half_rtt[half_rtt.size() * 99 / 100], total / seconds};
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: send_bench ADDRESS [ITERATIONS] [SIZE] [WINDOW]\n");
        return 2;
    }
    settings s{argc > 2 ? std::atoi(argv[2]) : 1000, argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 64,
               argc > 4 ? static_cast<std::uint32_t>(std::atoi(argv[4])) : 32};
    if (s.iterations < 1 || s.size < 1 || s.window < 1) {
        std::fprintf(stderr, "send_bench: ITERATIONS, SIZE and WINDOW must be positive\n");
        return 2;
    }
    const auto address = asio::ip::make_address(argv[1]);
    asio::io_context server_ctx, client_ctx;
    try {
        std::future<void> served;
        std::future<result> measured;
        {
            rdmacm::event_channel server_ch(server_ctx);
            rdmacm::listener l(server_ch);
            l.bind({address, 0});
            l.listen();
            served = asio::co_spawn(server_ctx, server(l, s), asio::use_future);
            measured = asio::co_spawn(client_ctx, client({address, l.local_endpoint().port()}, s), asio::use_future);
            std::thread server_thread([&] { server_ctx.run_for(120s); });
            client_ctx.run_for(120s);
            served.wait_for(30s); // the server sees the client go
            server_ctx.stop();
            server_thread.join();
            if (measured.wait_for(0s) != std::future_status::ready) throw std::runtime_error("timed out");
        }
        auto r = measured.get();
        std::printf("latency_us %.2f %.2f msg_rate_mps %.4f\n", r.p50_us, r.p99_us, r.rate / 1e6);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "send_bench: %s\n", e.what());
        return 1;
    }
}
