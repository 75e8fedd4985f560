// Churn against the kernel CM: for a bounded time, client sessions connect to a sharded echo
// server, exchange numbered messages (each echo checked byte for byte: a lost, duplicated or
// reordered message fails the session), and disconnect, again and again, while a rebalancer
// moves live connections between shards at random. Checked: every session completes, every
// message sent was echoed exactly once, every connection the pool placed ended, memory flat.
//
// RDMACM_CHURN_SECONDS sets the time (default 15; `./tools/test --long` runs longer).

#include "support/fixture.hpp"

#include "support/echo_server.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

std::chrono::seconds churn_time() {
    const char* s = std::getenv("RDMACM_CHURN_SECONDS");
    return std::chrono::seconds(s ? std::atoi(s) : 15);
}

// Resident set size in KiB (/proc/self/status VmRSS).
long rss_kib() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

} // namespace

BOOST_FIXTURE_TEST_CASE(connections_churn_and_move_with_every_message_accounted_for, channel_fixture) {
    // siw takes a few dozen QPs per process; destroyed ones free up only after teardown.
    const int concurrent = is_siw() ? 4 : 12, messages_per_session = 20;
    const auto duration = churn_time();
    echo_server_counts counted;
    auto& [placed, ended, received, served] = counted.totals;
    auto l = make_listener(*channel);
    shard_pool pool(3, least_connections());
    serve_echo(pool, l, ctx, counted);
    const auto server = device_endpoint(l.local_endpoint().port());

    std::uint64_t sessions = 0, failed = 0, sent = 0, moves = 0, move_failures = 0;
    int running = 0, moves_in_flight = 0;
    bool churning = true;
    std::string first_failure, first_move_failure;
    // Where each running session is (0 connecting, 1..n waiting for that echo, n+1
    // disconnecting) and its port once connected: a stuck session names its step, and the
    // server's side of it.
    struct where {
        int step = 0;
        unsigned short port = 0;
    };
    std::map<std::uint64_t, where> steps;
    std::uint64_t next_session = 0;
    // siw's race (README, "not ours": a client's first message, arriving while the server's
    // siw is still handing the socket to the queue pair, stays unread until more data comes)
    // leaves a session waiting for its first echo, the server having received nothing. Such
    // a session is ended after 5 s (the close may still bring its message to the server) and
    // counted apart; anything else stuck still fails.
    std::uint64_t siw_races = 0;
    auto session = [&](std::uint64_t me) -> awaitable<void> {
        std::shared_ptr<sample::echo_peer> peer = co_await sample::echo_peer::connect(*channel, server, 64);
        const auto port = peer->id().local_endpoint().port();
        steps[me].port = port;
        auto raced = std::make_shared<bool>(false);
        asio::steady_timer first_echo(ctx, 5s); // (its handler may run after the session ended)
        first_echo.async_wait([&counted, peer, port, raced](error_code ec) {
            if (ec || !is_siw() || counted.received_from(port) != 0) return;
            *raced = true;
            peer->id().close(); // the round trip fails
        });
        for (int i = 1; i <= messages_per_session; ++i) {
            steps[me].step = i;
            try {
                co_await peer->round_trip(static_cast<std::uint64_t>(i));
            } catch (const std::exception&) {
                if (!*raced) throw;
                ++siw_races;
                co_return;
            }
            first_echo.cancel();
            ++sent;
        }
        steps[me].step = messages_per_session + 1;
        co_await peer->disconnect();
    };
    auto start_session = [&](auto& self) -> void {
        ++running;
        const auto me = next_session++;
        steps[me] = {};
        asio::co_spawn(ctx, session(me), [&, self, me](const std::exception_ptr& e) {
            --running;
            steps.erase(me);
            ++sessions;
            if (e && failed++ == 0) first_failure = what(e);
            if (churning) self(self);
        });
    };
    // The rebalancer: a random live connection to a random shard, over and over.
    std::mt19937 random(42);
    asio::steady_timer tick(ctx);
    std::function<void()> move_one = [&] {
        if (!churning) return;
        auto all = pool.snapshot();
        if (!all.empty()) {
            auto key = all[random() % all.size()].key;
            ++moves_in_flight;
            pool.async_move(key, random() % pool.size(), asio::bind_executor(ctx, [&](error_code ec) {
                                --moves_in_flight;
                                // A connection may end before or while it moves (not_open,
                                // operation_aborted) or be moving already: not failures.
                                if (!ec) {
                                    ++moves;
                                } else if (ec != errc::not_open && ec != errc::operation_in_progress &&
                                           ec != asio::error::operation_aborted) {
                                    ++move_failures;
                                    if (first_move_failure.empty()) first_move_failure = ec.what();
                                }
                            }));
        }
        tick.expires_after(2ms);
        tick.async_wait([&](error_code) { move_one(); });
    };

    long rss_warm = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < concurrent; ++i) start_session(start_session);
    move_one();
    // Warm up (allocator pools, the destroyer thread), then measure memory until the end.
    run_until(
        ctx, [&] { return std::chrono::steady_clock::now() - t0 > duration / 3; }, duration);
    rss_warm = rss_kib();
    run_until(
        ctx, [&] { return std::chrono::steady_clock::now() - t0 > duration; }, duration + 5s);
    churning = false;
    auto stuck = [&] {
        std::string at =
            std::to_string(running) + " of " + std::to_string(next_session) + " session(s) stuck (step, port):";
        for (auto [id, w] : steps) at += " " + std::to_string(w.step) + ", " + std::to_string(w.port) + ";";
        return at + " (step 0 connecting, " + std::to_string(messages_per_session + 1) + " disconnecting); " +
               counted.describe() + " " + std::to_string(moves_in_flight) + " move(s) in flight";
    };
    BOOST_REQUIRE_MESSAGE(run_until(
                              ctx, [&] { return running == 0; }, 60s),
                          stuck() << "; first failure: " << first_failure);
    BOOST_REQUIRE(run_until(
        ctx, [&] { return ended == placed; }, 60s));
    long rss_end = rss_kib();

    BOOST_TEST_MESSAGE("churn " << duration.count() << " s: " << sessions << " connections, " << sent
                                << " messages echoed and checked, " << moves << " moves; RSS " << rss_warm << " -> "
                                << rss_end << " KiB; " << siw_races << " session(s) ended by siw's first-message race");
    BOOST_TEST(failed == 0u, first_failure);
    BOOST_TEST(move_failures == 0u, first_move_failure);
    BOOST_TEST(moves > 0u);
    BOOST_TEST(sessions >= std::uint64_t(concurrent));
    // Exactly once each; a raced session's first message may still reach the server as the
    // client closes (more data wakes siw's reader).
    BOOST_TEST(received >= sent);
    BOOST_TEST(received <= sent + siw_races);
    BOOST_TEST(placed == sessions);
    auto counts = pool.connection_counts();
    BOOST_TEST(std::accumulate(counts.begin(), counts.end(), std::size_t{0}) == 0u);
#ifndef __SANITIZE_ADDRESS__ // ASan's quarantine holds freed memory on purpose
    // Flat: what the last two thirds of the run added is small next to what one connection
    // costs times the connections made (a leak per connection would show).
    BOOST_TEST(rss_end - rss_warm < 8 * 1024, "RSS grew by " << rss_end - rss_warm << " KiB");
#endif
    pool.stop();
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
}
