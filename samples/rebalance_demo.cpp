// rebalance_demo ADDRESS [CONNECTIONS] [SHARDS]: live connections moved between threads
// while they carry traffic.
//
// A server sharded over SHARDS threads (default 4) whose placement puts every connection on
// shard 0: the load piles up on one thread. CONNECTIONS clients (default 8, on the main
// thread) each send numbered messages, one at a time, checking every echo byte for byte.
// While they send, the pool rebalances: connections move, live, to the other shards — their
// CM ids, queue pairs and serving coroutines. Printed: connections per shard before and
// after, the messages each shard's thread echoed before and after, and the tally: every
// message sent was echoed back, in order, none lost. Exit status 1 otherwise.
#include "echo.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <iostream>
#include <numeric>

namespace asio = boost::asio;
using asio::awaitable;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t messages_per_phase = 300; // per connection, before and after the move

std::string per_shard(const std::vector<std::uint64_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "  " : "") + std::to_string(i) + ": " + std::to_string(v[i]);
    return s;
}

template <typename Container>
std::vector<std::uint64_t> values(const Container& c) {
    return {c.begin(), c.end()};
}

struct tally {
    std::vector<std::atomic<std::uint64_t>> echoed_by_shard; // by the server, per shard thread
    std::vector<std::uint64_t> round_trips;                  // by the clients, per connection
    std::size_t connected = 0, finished = 0;
    std::atomic<std::size_t> accepted{0}; // by the server
    bool stop_sending = false;

    tally(std::size_t shards, std::size_t connections) : echoed_by_shard(shards), round_trips(connections) {}
    std::uint64_t min_round_trips() const { return *std::min_element(round_trips.begin(), round_trips.end()); }
    // What a stall shows: each connection's round trips so far, each shard's echoes.
    std::string describe(const sample::awaitable_shard_pool& pool) const {
        return "round trips per connection: " + per_shard(round_trips) +
               "; connections per shard: " + per_shard(values(pool.connection_counts())) +
               "; echoed per shard: " + per_shard(echoed()) + "; " + std::to_string(connected) +
               " clients connected, " + std::to_string(accepted.load()) + " accepted by the server, " +
               std::to_string(finished) + " finished";
    }
    std::vector<std::uint64_t> echoed() const {
        std::vector<std::uint64_t> v;
        for (const auto& e : echoed_by_shard) v.push_back(e.load());
        return v;
    }
};

awaitable<void> client(rdmacm::event_channel& channel, rdmacm::endpoint server, tally& t, std::size_t i) {
    auto peer = co_await sample::echo_peer::connect(channel, server, 64);
    ++t.connected;
    while (!t.stop_sending) co_await peer->round_trip(t.round_trips[i]++ + 1);
    co_await peer->disconnect();
    ++t.finished;
}

// Polls `ready` every few milliseconds, for at most a minute; a stall says where each
// connection is.
template <typename Ready>
awaitable<void> wait_until(const sample::awaitable_shard_pool& pool, const tally& t, const char* what, Ready ready) {
    sample::awaitable_timer timer(co_await asio::this_coro::executor);
    for (auto deadline = std::chrono::steady_clock::now() + 60s; !ready();) {
        if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error(std::string("timed out waiting for ") + what + ": " + t.describe(pool));
        timer.expires_after(5ms);
        co_await timer.async_wait();
    }
}

awaitable<int> conduct(sample::awaitable_shard_pool& pool, tally& t) {
    co_await wait_until(pool, t, "every connection's first messages", [&] {
        return t.connected == t.round_trips.size() && t.min_round_trips() >= messages_per_phase;
    });
    std::cout << "connections per shard before: " << per_shard(values(pool.connection_counts())) << std::endl;
    auto echoed_before = t.echoed();
    std::cout << "messages echoed per shard so far: " << per_shard(echoed_before) << std::endl;

    auto start = std::chrono::steady_clock::now();
    auto report = co_await pool.async_rebalance(rdmacm::even_count()); // a token-less pool (awaitable.hpp)
    auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << "rebalanced while the clients kept sending: " << report.moved.size() << " connections moved in "
              << took << " ms, " << report.failed.size() << " failed" << std::endl;
    for (const auto& m : report.moved)
        std::cout << "  connection " << m.key << ": shard " << m.from << " -> " << m.to << std::endl;
    std::cout << "connections per shard after:  " << per_shard(values(report.after)) << std::endl;

    auto goal = t.min_round_trips() + messages_per_phase;
    auto echoed_at_move = t.echoed();
    co_await wait_until(pool, t, "the messages after the move", [&] { return t.min_round_trips() >= goal; });
    t.stop_sending = true;
    co_await wait_until(pool, t, "the clients to disconnect", [&] { return t.finished == t.round_trips.size(); });
    // The server's coroutines end when their peer has gone (their receives flushed).
    co_await wait_until(pool, t, "the server's connections to end", [&] {
        auto counts = pool.connection_counts();
        return std::accumulate(counts.begin(), counts.end(), std::size_t{0}) == 0;
    });

    auto echoed_after = t.echoed();
    std::vector<std::uint64_t> since(echoed_after.size());
    for (std::size_t i = 0; i < since.size(); ++i) since[i] = echoed_after[i] - echoed_at_move[i];
    std::cout << "messages echoed per shard after the move: " << per_shard(since) << std::endl;
    auto sent = std::accumulate(t.round_trips.begin(), t.round_trips.end(), std::uint64_t{0});
    auto echoed = std::accumulate(echoed_after.begin(), echoed_after.end(), std::uint64_t{0});
    bool spread = std::count_if(since.begin(), since.end(), [](auto n) { return n > 0; }) ==
                  static_cast<std::ptrdiff_t>(std::min(since.size(), t.round_trips.size()));
    std::cout << "clients: " << sent << " messages sent, every echo received in order and checked byte for byte; "
              << "server: " << echoed << " echoed; lost: " << (sent - std::min(sent, echoed)) << std::endl;
    co_return echoed == sent&& report.failed.empty() && spread ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argc > 4) {
        std::cerr << "usage: rebalance_demo ADDRESS [CONNECTIONS] [SHARDS]\n";
        return 2;
    }
    const int connections = argc > 2 ? std::stoi(argv[2]) : 8;
    const int shards = argc > 3 ? std::stoi(argv[3]) : 4;
    if (connections < 1 || shards < 1) {
        std::cerr << "rebalance_demo: CONNECTIONS and SHARDS must be positive\n";
        return 2;
    }
    try {
        asio::io_context ctx; // the clients and the server's listener
        auto channel = std::make_unique<rdmacm::event_channel>(ctx);
        rdmacm::listener l(*channel);
        l.bind({asio::ip::make_address(argv[1]), 0});
        l.listen(1024);
        // Everything onto shard 0: the imbalance the rebalancer will fix.
        sample::awaitable_shard_pool pool(
            static_cast<std::size_t>(shards),
            [](std::span<const std::size_t>, const rdmacm::connection_request&) { return 0; });
        tally t(static_cast<std::size_t>(shards), static_cast<std::size_t>(connections));
        std::cout << connections << " connections to a server on " << shards
                  << " shards, all placed on shard 0; each client sends numbered messages and checks every echo"
                  << std::endl;
        pool.async_serve(
            l,
            [&](rdmacm::pooled_connection c) -> awaitable<void> {
                co_await sample::echo(
                    c.id(), [&] { ++t.accepted; }, [&] { ++t.echoed_by_shard[pool.running_shard().value()]; });
            },
            asio::detached);
        for (int i = 0; i < connections; ++i)
            asio::co_spawn(ctx, client(*channel, l.local_endpoint(), t, static_cast<std::size_t>(i)),
                           [&, i](const std::exception_ptr& e) {
                               if (!e) return;
                               std::cerr << "rebalance_demo: client " << i << " failed; " << t.describe(pool)
                                         << std::endl;
                               std::rethrow_exception(e);
                           });
        int status = 1;
        asio::co_spawn(ctx, conduct(pool, t), [&](const std::exception_ptr& e, int s) {
            if (e) std::rethrow_exception(e);
            status = s;
            l.close();
            channel.reset(); // its last id gone, ctx runs out of work
        });
        ctx.run_for(120s);
        if (!ctx.stopped()) throw std::runtime_error("timed out");
        pool.stop();
        std::cout << (status == 0 ? "rebalance demo: OK" : "rebalance demo: FAILED") << std::endl;
        return status;
    } catch (const std::exception& e) {
        std::cerr << "rebalance_demo: " << e.what() << std::endl;
        return 1;
    }
}
