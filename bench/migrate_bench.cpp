// migrate_bench ADDRESS [CONNECTIONS] [ROUNDS]: the cost of rdmacm's async_migrate on
// established, idle connections vs a raw rdma_migrate_id loop on the same ids, in one run.
//
// CONNECTIONS connections are set up through channel A (one io_context, this thread).
// Then, ROUNDS times, every id moves A -> B -> A, ten times over (a round of 20 moves is tens
// of microseconds raw: one preemption of the VM swamped its ratio): by raw rdma_migrate_id
// calls on the ids' native handles, and by async_migrate (the handler runs, the id's events
// and operations are re-attached), each started by the previous one's handler. Prints migrations/s and p50/p99 latency
// for both, and ours/raw; then each one's deterministic costs per migration (bench/costs.hpp).
#include "costs.hpp"
#include "rounds.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct stats {
    double rate = 0, p50_us = 0, p99_us = 0;
};

stats summarize(std::vector<double> us, double total_s) {
    std::sort(us.begin(), us.end());
    return {static_cast<double>(us.size()) / total_s, us[us.size() / 2], us[us.size() * 99 / 100]};
}

double us_since(clock_type::time_point t) {
    return std::chrono::duration<double, std::micro>(clock_type::now() - t).count();
}

template <typename Predicate>
void run_until(asio::io_context& ctx, Predicate done) {
    auto deadline = clock_type::now() + 60s;
    while (!done()) {
        if (clock_type::now() > deadline) throw std::runtime_error("timed out");
        ctx.run_one_for(10ms);
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: migrate_bench ADDRESS [CONNECTIONS] [ROUNDS]\n");
        return 2;
    }
    bench::costs::start();
    const int connections = argc > 2 ? std::atoi(argv[2]) : 10;
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 50;
    asio::io_context ctx;
    {
        rdmacm::event_channel a(ctx), b(ctx);
        rdmacm::listener l(a);
        l.bind({asio::ip::make_address(argv[1]), 0});
        l.listen();
        std::vector<rdmacm::cm_id> servers, clients;
        servers.reserve(static_cast<std::size_t>(connections));
        clients.reserve(static_cast<std::size_t>(connections));
        int established = 0;
        asio::co_spawn(
            ctx,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < connections; ++i) {
                    auto req = co_await l.async_get_request(asio::use_awaitable);
                    auto attr = rdmacm::rc_qp_init_attr();
                    req.id.create_qp(attr);
                    co_await req.id.async_accept({}, asio::use_awaitable);
                    servers.push_back(std::move(req.id));
                }
            },
            asio::detached);
        for (int i = 0; i < connections; ++i) {
            auto& c = clients.emplace_back(a);
            rdmacm::connect_options o;
            o.qp = rdmacm::rc_qp_init_attr();
            rdmacm::async_connect(c, {asio::ip::make_address(argv[1]), l.local_endpoint().port()}, o,
                                  [&](rdmacm::error_code ec, rdmacm::cm_event) {
                                      if (ec) throw std::runtime_error("connect: " + ec.message());
                                      ++established;
                                  });
        }
        run_until(ctx, [&] { return established == connections && servers.size() == clients.size(); });

        bench::costs::phase raw_cost("raw"), one_cost("one_at_a_time"), batch_cost("all_at_once");
        constexpr int cycles = 10; // A -> B -> A per id and round
        const auto per_round = clients.size() * 2 * cycles;
        std::vector<double> raw_us, one_us, batch_us;
        double raw_total = 0, one_total = 0, batch_total = 0;
        bench::round_figures one_ratio, batch_ratio; // time per migration, ours / raw
        for (int r = 0; r < rounds; ++r) {
            const double raw_before = raw_total, one_before = one_total, batch_before = batch_total;
            // Raw: the same ids, A -> B -> A, straight through librdmacm.
            auto t0 = clock_type::now();
            raw_cost.begin();
            for (int k = 0; k < cycles; ++k)
                for (auto& c : clients)
                    for (auto* ch : {b.native_handle(), a.native_handle()}) {
                        auto t = clock_type::now();
                        if (rdma_migrate_id(c.native_handle(), ch) != 0) throw std::runtime_error("rdma_migrate_id");
                        raw_us.push_back(us_since(t));
                    }
            raw_cost.end(per_round);
            raw_total += us_since(t0) / 1e6;

            // Ours, one at a time: A -> B -> A, each started by the previous one's handler.
            t0 = clock_type::now();
            std::size_t next = 0, done = 0;
            clock_type::time_point started;
            std::function<void()> migrate_next = [&] {
                if (next == per_round) return;
                auto& c = clients[(next / 2) % clients.size()];
                auto& ch = next % 2 == 0 ? b : a;
                ++next;
                started = clock_type::now();
                c.async_migrate(ch, [&](rdmacm::error_code ec) {
                    one_us.push_back(us_since(started));
                    if (ec) throw std::runtime_error("async_migrate: " + ec.message());
                    ++done;
                    migrate_next();
                });
            };
            one_cost.begin();
            migrate_next();
            run_until(ctx, [&] { return done == per_round; });
            one_cost.end(per_round);
            one_total += us_since(t0) / 1e6;

            // Ours, as a rebalancer does it: every id A -> B at once, then every id back.
            t0 = clock_type::now();
            batch_cost.begin();
            for (int k = 0; k < cycles * 2; ++k) {
                auto* ch = k % 2 == 0 ? &b : &a;
                done = 0;
                for (auto& c : clients) {
                    c.async_migrate(*ch, [&, t = clock_type::now()](rdmacm::error_code ec) {
                        batch_us.push_back(us_since(t));
                        if (ec) throw std::runtime_error("async_migrate: " + ec.message());
                        ++done;
                    });
                }
                run_until(ctx, [&] { return done == clients.size(); });
            }
            batch_cost.end(per_round);
            batch_total += us_since(t0) / 1e6;
            const double raw_round = raw_total - raw_before;
            one_ratio.add((one_total - one_before) / raw_round);
            batch_ratio.add((batch_total - batch_before) / raw_round);
        }
        auto raw = summarize(raw_us, raw_total), one = summarize(one_us, one_total),
             batch = summarize(batch_us, batch_total);
        std::printf("migrations of established idle ids: %d connections x %d rounds x %d x 2\n", connections, rounds,
                    cycles);
        std::printf("                                  migrations/s    p50 us    p99 us   cost/raw, per round\n");
        std::printf("  raw rdma_migrate_id loop      : %12.0f %9.1f %9.1f\n", raw.rate, raw.p50_us, raw.p99_us);
        std::printf("  async_migrate, one at a time  : %12.0f %9.1f %9.1f   ", one.rate, one.p50_us, one.p99_us);
        one_ratio.print();
        std::printf("\n  async_migrate, all ids at once: %12.0f %9.1f %9.1f   ", batch.rate, batch.p50_us,
                    batch.p99_us);
        batch_ratio.print();
        std::printf("\n  (cost/raw: time per migration, ours / raw, the rounds' median and spread; latency at once:"
                    " from start to handler)\n");
        for (auto* p : {&raw_cost, &one_cost, &batch_cost}) p->print();
    }
    ctx.run_for(30s);
}
