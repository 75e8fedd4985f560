// Churn against the kernel CM: for a bounded time, client sessions connect to a sharded echo
// server, exchange numbered messages (each echo checked byte for byte: a lost, duplicated or
// reordered message fails the session), and disconnect, again and again, while a rebalancer
// moves live connections between shards at random. Checked: every session completes, every
// message sent was echoed exactly once, every connection the pool placed ended, memory flat,
// and the totals (connections, messages, moves) reach floors; each run prints them.
//
// RDMACM_CHURN_SECONDS sets the time (default 15; `./tools/test --long` runs longer).

#include "support/fixture.hpp"

#include "support/echo_server.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <malloc.h>

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

// Heap in use in KiB: what malloc has handed out and not had back, over all its arenas.
long heap_kib() {
    const auto m = mallinfo2();
    return static_cast<long>((m.uordblks + m.hblkhd) / 1024);
}

// The least a run must do, per 15 s of churn: about a third of the fewest that 15 s runs made
// in the test bed's VM with a second VM running beside it on the host's 2 cores (rxe: 156
// connections, 427 moves between shards; siw: 101 and 860; under ASan, rxe: 50 and 115,
// siw: 63 and 617).
struct floors {
    std::uint64_t connections, messages, moves;
};
#ifdef __SANITIZE_ADDRESS__
constexpr floors floors_per_15s{12, 240, 35};
#else
constexpr floors floors_per_15s{35, 700, 140};
#endif

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
    int running = 0;
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
    // siw's first-message race (README) is met by the echo client's nudge (echo_peer), no
    // session is exempt: every one must end with all its messages echoed. Nudged sessions
    // are counted: none on rxe (the race is siw's; a nudge there, after 10 s without the
    // first echo, would hide a fault of ours, e.g. a completion queue not re-armed — and our
    // data path is the same code on both devices), few on siw: its rate grows with the host's load (measured with a CPU
    // hog and a second VM beside it: 2 of 150, 3 of 218, 24 of 3,334 sessions; 43f8b79's binary, before the polling
    // data path, alike), so the bound is 1 + 2 %.
    std::uint64_t nudged = 0;
    auto session = [&](std::uint64_t me) -> awaitable<void> {
        std::shared_ptr<sample::echo_peer> peer = co_await sample::echo_peer::connect(*channel, server, 64);
        steps[me].port = peer->id().local_endpoint().port();
        for (int i = 1; i <= messages_per_session; ++i) {
            steps[me].step = i;
            co_await peer->round_trip(static_cast<std::uint64_t>(i));
            if (i == 1 && peer->nudges() != 0) ++nudged;
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
    // The rebalancer: a random live connection to another shard, over and over. Only a
    // connection with no move of ours in flight is picked, so the snapshot says where it is;
    // the target differs from that (a move to the shard a connection is on completes at once
    // without moving), so every move that completes changed shard — checked against the
    // pool's snapshot when it completes.
    std::mt19937 random(42);
    asio::steady_timer tick(ctx);
    std::set<std::uint64_t> moving; // keys with a move of ours in flight
    std::uint64_t moves_asked = 0, moves_not_landed = 0;
    std::function<void()> move_one = [&] {
        if (!churning) return;
        auto all = pool.snapshot();
        std::erase_if(all, [&](const connection_load& c) { return moving.contains(c.key); });
        if (!all.empty()) {
            const auto c = all[random() % all.size()];
            const auto to = (c.shard + 1 + random() % (pool.size() - 1)) % pool.size();
            moving.insert(c.key);
            ++moves_asked;
            pool.async_move(c.key, to, asio::bind_executor(ctx, [&, key = c.key, to](error_code ec) {
                                moving.erase(key);
                                // A connection may end before or while it moves (not_open,
                                // operation_aborted) or be still being placed: not failures.
                                if (!ec) {
                                    ++moves;
                                    for (const auto& now : pool.snapshot())
                                        if (now.key == key && now.shard != to) ++moves_not_landed;
                                } else if (ec != errc::not_open && ec != errc::operation_in_progress &&
                                           ec != asio::error::operation_aborted) {
                                    ++move_failures;
                                    if (first_move_failure.empty()) first_move_failure = ec.what();
                                }
                            }));
        }
        tick.expires_after(2ms);
        tick.async_wait([&](error_code ec) {
            if (!ec) move_one(); // (cancelled: a new round of churn started it again)
        });
    };

    auto stuck = [&] {
        std::string at =
            std::to_string(running) + " of " + std::to_string(next_session) + " session(s) stuck (step, port):";
        for (auto [id, w] : steps) at += " " + std::to_string(w.step) + ", " + std::to_string(w.port) + ";";
        return at + " (step 0 connecting, " + std::to_string(messages_per_session + 1) + " disconnecting); " +
               counted.describe() + " " + std::to_string(moving.size()) + " move(s) in flight";
    };
    auto churn = [&] {
        churning = true;
        for (int i = 0; i < concurrent; ++i) start_session(start_session);
        move_one();
    };
    // Memory is compared between two quiet points: no session running, every connection the
    // pool placed ended, no move in flight, and a moment for the library's destroyer thread
    // (rxe maps each queue pair's and completion queue's ring into the process: RSS follows
    // the connections alive).
    auto quiet = [&] {
        churning = false;
        BOOST_REQUIRE_MESSAGE(run_until(
                                  ctx, [&] { return running == 0; }, 60s),
                              stuck() << "; first failure: " << first_failure);
        BOOST_REQUIRE(run_until(
            ctx, [&] { return ended == placed && moving.empty(); }, 60s));
        run_until(
            ctx, [] { return false; }, 500ms);
        return std::pair(rss_kib(), heap_kib());
    };

    // Warm up (allocator pools and arenas, the destroyer thread) for the first third.
    const auto t0 = std::chrono::steady_clock::now();
    churn();
    run_until(
        ctx, [&] { return std::chrono::steady_clock::now() - t0 > duration / 3; }, duration);
    const auto [rss_warm, heap_warm] = quiet();
    churn();
    run_until(
        ctx, [&] { return std::chrono::steady_clock::now() - t0 > duration; }, duration + 5s);
    const auto [rss_end, heap_end] = quiet();

    // Printed in every run (ctest's log; on the console with a failure): the README's figures
    // come from here.
    const auto at_least = [&](std::uint64_t per_15s) { return per_15s * duration.count() / 15; };
    const floors least{at_least(floors_per_15s.connections), at_least(floors_per_15s.messages),
                       at_least(floors_per_15s.moves)};
    std::cout << "churn on " << test_device().name << ", " << duration.count() << " s: " << sessions
              << " connections (floor " << least.connections << "), " << sent << " messages echoed and checked (floor "
              << least.messages << "), " << moves << " moves between shards (floor " << least.moves << "; "
              << moves_asked << " asked); after warm-up RSS " << rss_warm << " -> " << rss_end << " KiB ("
              << rss_end - rss_warm << ")"
#ifndef __SANITIZE_ADDRESS__
              << ", heap in use " << heap_warm << " -> " << heap_end << " KiB (" << heap_end - heap_warm << ")"
#endif
              << "; " << nudged << " session(s) nudged past siw's first-message race" << std::endl;
    BOOST_TEST(failed == 0u, first_failure);
    BOOST_TEST(move_failures == 0u, first_move_failure);
    BOOST_TEST(moves_not_landed == 0u, "moves that completed with the connection elsewhere");
    BOOST_TEST(sessions >= least.connections);
    BOOST_TEST(sent >= least.messages);
    BOOST_TEST(moves >= least.moves);
    BOOST_TEST(received == sent); // exactly once each
    BOOST_TEST(nudged <= (is_siw() ? 1 + sessions / 50 : 0), nudged << " of " << sessions << " sessions nudged");
    BOOST_TEST(placed == sessions);
    auto counts = pool.connection_counts();
    BOOST_TEST(std::accumulate(counts.begin(), counts.end(), std::size_t{0}) == 0u);
#ifndef __SANITIZE_ADDRESS__ // ASan's allocator is not malloc's, and its quarantine holds freed memory on purpose
    // Flat, from the end of warm-up to the end, both quiet. The heap in use is what a leak
    // grows (measured: +20 to +62 KiB, at 240 s as at 15 s; 256 KiB is about 1 KiB for each
    // connection made meanwhile in 15 s). RSS moves more, either way: glibc keeps freed memory
    // in its per-thread arenas (about 7 MiB of them free at a quiet point on rxe), and the
    // VM's file pages come and go (measured: -2.8 to +4.5 MiB).
    BOOST_TEST(heap_end - heap_warm < 256, "heap in use grew by " << heap_end - heap_warm << " KiB");
    BOOST_TEST(rss_end - rss_warm < 8 * 1024, "RSS grew by " << rss_end - rss_warm << " KiB");
#endif
    pool.stop();
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
}
