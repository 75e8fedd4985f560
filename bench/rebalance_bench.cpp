// rebalance_bench ADDRESS [CONNECTIONS] [ROUNDS]: the time a shard_pool takes to rebalance
// CONNECTIONS (default 10,000) idle, established connections piled on one of two shards
// (half of them move) and to pile them back, and its cost per moved connection next to a
// raw rdma_migrate_id loop over as many idle ids, in ROUNDS (default 5) rounds of one run.
// Each connection has a minimal queue pair on one shared CQ (RoCE's CM wants a QP; no
// completion channel, so nothing of the data path moves): the cost measured is the CM id's
// move and the pool's bookkeeping.
#include "costs.hpp"
#include "rounds.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// Minimal RC queue pair attributes on one CQ for every QP, created by the first caller.
ibv_qp_init_attr shared_cq_attr(ibv_context* verbs) {
    static std::once_flag once;
    static ibv_cq* cq = nullptr;
    std::call_once(once, [&] { cq = ibv_create_cq(verbs, 4096, nullptr, nullptr, 0); });
    if (!cq) throw std::runtime_error("ibv_create_cq");
    auto attr = rdmacm::rc_qp_init_attr(1);
    attr.send_cq = attr.recv_cq = cq;
    return attr;
}

double ms_since(clock_type::time_point t) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

template <typename Predicate>
void run_until(asio::io_context& ctx, Predicate done, std::chrono::seconds limit) {
    for (auto deadline = clock_type::now() + limit; !done();) {
        if (clock_type::now() > deadline) throw std::runtime_error("timed out");
        ctx.run_one_for(10ms);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        std::fprintf(stderr, "usage: rebalance_bench ADDRESS [CONNECTIONS] [ROUNDS]\n");
        return 2;
    }
    bench::costs::start();
    const int connections = argc > 2 ? std::atoi(argv[2]) : 10000;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    asio::io_context ctx; // the listener and the clients
    {
        rdmacm::event_channel channel(ctx), other(ctx);
        rdmacm::listener l(channel);
        l.bind({asio::ip::make_address(argv[1]), 0});
        l.listen(1024);
        // Accepted on the server side: a connection counts once its ESTABLISHED was read and
        // its coroutine goes on to wait; placed (connection_counts) is earlier. The rebalance
        // is timed once every connection is idle, not while the setup's last events come in.
        std::atomic<int> accepted = 0;
        rdmacm::shard_pool pool(2, [](std::span<const std::size_t>, const rdmacm::connection_request&) { return 0; });
        pool.async_serve(
            l,
            [&accepted](rdmacm::pooled_connection c) -> asio::awaitable<void> {
                auto attr = shared_cq_attr(c.id().native_handle()->verbs);
                c.id().create_qp(attr);
                co_await c.id().async_accept({}, asio::use_awaitable);
                ++accepted;
                co_await c.id().async_next_event(asio::as_tuple(asio::use_awaitable)); // until closed
            },
            asio::detached);

        std::vector<rdmacm::cm_id> clients;
        clients.reserve(static_cast<std::size_t>(connections));
        int established = 0, started = 0;
        const rdmacm::endpoint server{asio::ip::make_address(argv[1]), l.local_endpoint().port()};
        auto connect = [&](rdmacm::cm_id& c) -> asio::awaitable<void> {
            co_await c.async_resolve_address(server, 5000ms, asio::use_awaitable);
            co_await c.async_resolve_route(5000ms, asio::use_awaitable);
            auto attr = shared_cq_attr(c.native_handle()->verbs);
            c.create_qp(attr);
            co_await c.async_connect({}, asio::use_awaitable);
            ++established;
        };
        auto t_setup = clock_type::now();
        while (established < connections) {
            while (started < connections && started - established < 100) { // 100 connects in flight
                asio::co_spawn(ctx, connect(clients.emplace_back(channel)), [](const std::exception_ptr& e) {
                    if (e) std::rethrow_exception(e);
                });
                ++started;
            }
            ctx.run_one_for(10ms);
        }
        run_until(
            ctx, [&] { return accepted == connections && pool.connection_counts()[0] == std::size_t(connections); },
            120s);
        std::printf("%d connections set up in %.0f ms, all on shard 0\n", connections, ms_since(t_setup));

        // Rounds, each both sides one after the other (bench/rounds.hpp): ours spreads the
        // connections over both shards and piles them back on shard 0, two rebalances; raw
        // moves as many idle ids to another channel and back. A round before them is not
        // counted: its times carry the emulator's first translation of the code both run,
        // its instructions the first growth of the pool's and the allocator's memory.
        const rdmacm::rebalance_plan pile_on_0 = [](std::span<const rdmacm::connection_load> all, std::size_t) {
            std::vector<rdmacm::planned_move> moves;
            for (const auto& c : all)
                if (c.shard != 0) moves.push_back({c.key, c.shard, 0});
            return moves;
        };
        bench::costs::phase our_cost("rebalance"), raw_cost("raw");
        bench::round_figures ratio, ours_us, raw_us; // time per moved connection
        std::size_t moved = 0;
        for (int r = -1; r < rounds; ++r) {
            const bool counted = r >= 0;
            auto t0 = clock_type::now();
            if (counted) our_cost.begin();
            auto spread = pool.async_rebalance(rdmacm::even_count(), asio::use_future).get();
            auto piled = pool.async_rebalance(pile_on_0, asio::use_future).get();
            const double ours_ms = ms_since(t0);
            if (!spread.failed.empty() || !piled.failed.empty()) throw std::runtime_error("some moves failed");
            moved = spread.moved.size();
            if (piled.moved.size() != moved || piled.after[0] != std::size_t(connections))
                throw std::runtime_error("the connections did not all come back to shard 0");
            if (counted) our_cost.end(2 * moved);

            t0 = clock_type::now();
            if (counted) raw_cost.begin();
            for (auto* target : {&other, &channel})
                for (std::size_t i = 0; i < moved; ++i)
                    if (rdma_migrate_id(clients[i].native_handle(), target->native_handle()) != 0)
                        throw std::runtime_error("rdma_migrate_id");
            if (counted) raw_cost.end(2 * moved);
            const double raw_ms = ms_since(t0);
            if (!counted) continue;

            const auto per_move = [&](double ms) { return ms * 1000 / static_cast<double>(2 * moved); };
            ours_us.add(per_move(ours_ms));
            raw_us.add(per_move(raw_ms));
            ratio.add(ours_ms / raw_ms);
        }

        std::printf("rebalance of %d idle connections over 2 shards: %zu moved there and back, %d rounds\n",
                    connections, moved, rounds);
        std::printf("  per moved connection: ours %.1f us, raw rdma_migrate_id %.1f us (medians); ours/raw ",
                    ours_us.median(), raw_us.median());
        ratio.print();
        std::printf("\n");
        raw_cost.print();
        our_cost.print();
        pool.stop();
    }
    ctx.run_for(120s); // every id destroyed
    return ctx.stopped() ? 0 : 1;
}
