// send_bench ADDRESS [ITERATIONS] [SIZE] [WINDOW] [events|busy]: queue_pair send/receive measured the
// way rdma-core's perftest measures it, for tools/bench to print next to ib_send_lat and
// ib_send_bw run in the same VM run:
//   latency  — ping-pong of SIZE-byte messages; one-way latency = round trip / 2 (what
//              ib_send_lat reports as t_typical), median and p99;
//   msg rate — SIZE-byte messages streamed, up to 2*WINDOW in flight, the receiver
//              returning a credit every WINDOW messages (iWARP has no RNR retry).
// Completions go straight to callbacks, as perftest polls straight from its loop; `events`
// (the default) sleeps on the completion channel as `ib_send_lat -e` does, `busy` polls
// (queue_pair_options::poll_for = busy_polling) as perftest does by default.
// Server and client each run their own io_context on a thread of their own. Prints one
// line: "latency_us <p50> <p99> msg_rate_mps <rate>", then each run's deterministic costs
// (bench/costs.hpp; both threads, per round trip and per message streamed).
#include "costs.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

enum : unsigned char { ping = 'P', data = 'D' };

// Named after the mode (main): each mode's costs are rows of their own.
std::optional<bench::costs::phase> round_trip_cost, streamed_cost;

struct settings {
    int iterations;
    std::size_t size;
    std::uint32_t window;
    std::chrono::nanoseconds poll_for;
};

// One end's queue pair and registered buffers: `slots` receive slots and a send buffer.
// Receives complete straight into callbacks (no queue between), the way an application
// that wants its latency would write them.
struct end {
    rdmacm::queue_pair qp;
    std::size_t size;
    std::vector<std::byte> buffer;
    rdmacm::memory_region mr;

    end(rdmacm::cm_id& id, std::uint32_t slots, const settings& s)
        : qp(id, {.max_send_wr = 2 * slots, .max_recv_wr = slots, .poll_for = s.poll_for}), size(s.size),
          buffer((slots + 1) * s.size), mr(qp.pd(), buffer) {}
    std::span<std::byte> slot(std::size_t i) { return std::span(buffer).subspan(i * size, size); }
    std::span<std::byte> out() { return std::span(buffer).last(size); }
    // Posts a receive into slot `i`; `on_message(i)` runs when it completes.
    template <typename F>
    void receive(std::size_t i, F on_message) {
        qp.async_receive(mr, slot(i), [this, i, on_message](rdmacm::error_code ec, std::size_t) {
            if (!ec) on_message(i); // else the connection went: the run is over
        });
    }
    void send() {
        qp.async_send(mr, out(), [](rdmacm::error_code ec, std::size_t) {
            if (ec && ec != boost::asio::error::operation_aborted) throw boost::system::system_error(ec, "send");
        });
    }
};

// Echoes pings; answers every `window` data messages with a credit.
awaitable<void> server(rdmacm::listener& l, settings s) {
    auto req = co_await l.async_get_request(use_awaitable);
    rdmacm::cm_id id = std::move(req.id);
    end e(id, 2 * s.window, s);
    std::uint64_t data_messages = 0;
    std::function<void(std::size_t)> on_message = [&](std::size_t i) {
        auto kind = static_cast<unsigned char>(e.slot(i)[0]);
        e.receive(i, on_message);
        if (kind == ping || ++data_messages % s.window == 0) e.send();
    };
    for (std::size_t i = 0; i < 2 * s.window; ++i) e.receive(i, on_message); // before the accept
    co_await id.async_accept({}, use_awaitable);
    // Until the client disconnects.
    while ((co_await id.async_next_event(use_awaitable)).type() != RDMA_CM_EVENT_DISCONNECTED) {}
    co_await id.async_disconnect(asio::as_tuple(use_awaitable));
}

struct result {
    double p50_us, p99_us, rate;
};

awaitable<result> client(rdmacm::endpoint server, settings s) {
    auto ex = co_await asio::this_coro::executor;
    rdmacm::event_channel channel(ex);
    rdmacm::cm_id id(channel);
    co_await id.async_resolve_address(server, 2s, use_awaitable);
    co_await id.async_resolve_route(2s, use_awaitable);
    end e(id, 2 * s.window, s);
    // Completions drive the runs; the coroutine waits for each run's end on a timer.
    asio::steady_timer done(ex, clock_type::time_point::max());
    std::function<void(std::size_t)> on_message;
    for (std::size_t i = 0; i < 2 * s.window; ++i) e.receive(i, [&](std::size_t j) { on_message(j); });
    co_await id.async_connect({}, use_awaitable);

    // Latency: one message out, its echo back, the next one out.
    std::vector<double> half_rtt;
    auto start = clock_type::now();
    on_message = [&](std::size_t i) {
        half_rtt.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / 2);
        e.receive(i, [&](std::size_t j) { on_message(j); });
        if (half_rtt.size() == static_cast<std::size_t>(s.iterations)) return void(done.cancel());
        start = clock_type::now();
        e.send();
    };
    e.out()[0] = std::byte{ping};
    round_trip_cost->begin();
    e.send();
    co_await done.async_wait(asio::as_tuple(use_awaitable));
    round_trip_cost->end(static_cast<std::uint64_t>(s.iterations));
    std::sort(half_rtt.begin(), half_rtt.end());

    // Message rate: as many in flight as the server has receives posted.
    e.out()[0] = std::byte{data};
    const std::uint64_t total = static_cast<std::uint64_t>(s.iterations) * s.window;
    std::uint64_t sent = 0, credited = 0;
    std::int64_t credits = 2 * s.window;
    auto pump = [&] {
        for (; credits > 0 && sent < total; --credits, ++sent) e.send();
    };
    on_message = [&](std::size_t i) {
        e.receive(i, [&](std::size_t j) { on_message(j); });
        credits += s.window;
        credited += s.window;
        if (credited >= total) return void(done.cancel());
        pump();
    };
    start = clock_type::now();
    streamed_cost->begin();
    pump();
    co_await done.async_wait(asio::as_tuple(use_awaitable));
    streamed_cost->end(total);
    double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    co_await id.async_disconnect(use_awaitable);
    co_return result{half_rtt[half_rtt.size() / 2], half_rtt[half_rtt.size() * 99 / 100],
                     static_cast<double>(total) / seconds};
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: send_bench ADDRESS [ITERATIONS] [SIZE] [WINDOW] [events|busy]\n");
        return 2;
    }
    const std::string_view mode = argc > 5 ? argv[5] : "events";
    settings s{argc > 2 ? std::atoi(argv[2]) : 1000, argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 64,
               argc > 4 ? static_cast<std::uint32_t>(std::atoi(argv[4])) : 32,
               mode == "busy" ? rdmacm::busy_polling : std::chrono::nanoseconds::zero()};
    if (s.iterations < 1 || s.size < 1 || s.window < 1 || (mode != "events" && mode != "busy")) {
        std::fprintf(stderr, "send_bench: ITERATIONS, SIZE and WINDOW must be positive, the mode events or busy\n");
        return 2;
    }
    const auto address = asio::ip::make_address(argv[1]);
    const std::string suffix = mode == "busy" ? "_polled" : "";
    round_trip_cost.emplace("round_trip" + suffix);
    streamed_cost.emplace("streamed" + suffix);
    bench::costs::start(); // before the server's thread
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
        round_trip_cost->print();
        streamed_cost->print();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "send_bench: %s\n", e.what());
        return 1;
    }
}
