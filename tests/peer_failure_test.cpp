// A peer process killed (SIGKILL) in the middle of traffic: the survivor — a sharded echo
// server — sees its operations complete with errors within a bounded time, its connections
// end and leave the pool. The peer is the echo_client sample, in a process of its own.
#include "support/fixture.hpp"

#include "support/echo_server.hpp"

#include <boost/asio/bind_executor.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <numeric>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;

BOOST_FIXTURE_TEST_CASE(a_killed_peer_ends_its_connections_within_seconds, channel_fixture) {
    constexpr int peers = 3;
    echo_server_counts counted;
    auto& [placed, ended, received, served] = counted.totals;
    auto l = make_listener(*channel);
    shard_pool pool(2);
    serve_echo(pool, l, ctx, counted);

    // Peers sending for far longer than the test lasts.
    // (Everything the child needs is made before fork: it only calls exec.)
    const auto address = test_device().ipv4, port = std::to_string(l.local_endpoint().port());
    std::vector<pid_t> children;
    for (int i = 0; i < peers; ++i) {
        pid_t child = ::fork();
        BOOST_REQUIRE(child >= 0);
        if (child == 0) {
            ::execl(RDMACM_SAMPLES_DIR "/echo_client", "echo_client", address.c_str(), port.c_str(), "100000000", "64",
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        children.push_back(child);
    }
    BOOST_REQUIRE(run_until(
        ctx, [&] { return placed == std::uint64_t(peers) && received >= 300; }, 60s));
    const auto killed = std::chrono::steady_clock::now();
    for (auto child : children) ::kill(child, SIGKILL);
    for (auto child : children) {
        int status = 0;
        BOOST_TEST(::waitpid(child, &status, 0) == child);
        BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    }
    // The kernel tears the peer's ids down: each connection here breaks (receives flushed),
    // its coroutine ends, the connection leaves the pool. Timed from the kill to the last
    // connection out of the pool, and printed in every run (the README's figure).
    auto in_pool = [&] {
        auto counts = pool.connection_counts();
        return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    };
    const bool gone = run_until(
        ctx, [&] { return ended == std::uint64_t(peers) && in_pool() == 0; }, 30s);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
    std::cout << "peer failure on " << test_device().name << ": the last connection of the killed peers left the pool "
              << took.count() << " ms after the kill (bound: 30 s)" << std::endl;
    BOOST_TEST(gone, ended << " of " << peers << " connections ended, " << in_pool() << " still in the pool after "
                           << took.count() << " ms");
    BOOST_TEST(took < 30s);
    pool.stop();
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
}
