// The shard pool against the kernel CM: placement over shards (1,000 connections on rxe),
// live rebalancing under traffic with every message accounted for, a listener closed with
// requests pending, a stop in the middle of traffic, the pool's refusals, and exceptions
// escaping handlers and coroutines on its shards.
//
// The clients run on the test thread's io_context; the server is a shard_pool serving a
// listener whose channel is on that io_context too (accept here, serve on the shards).
#include "support/fixture.hpp"

#include "echo.hpp" // the samples' echo service and client

#include <boost/asio/io_context.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cerrno>
#include <numeric>
#include <string>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

std::size_t total(const std::vector<std::size_t>& counts) {
    return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

placement_policy all_on(std::size_t shard) {
    return [shard](std::span<const std::size_t>, const connection_request&) { return shard; };
}

// The server side of echo traffic: per connection, the messages received (each echoed) and
// the shard whose thread received the last one.
struct echo_service {
    struct per_connection {
        std::atomic<std::uint64_t> received{0};
        std::atomic<std::size_t> last_shard{~std::size_t{0}};
        std::atomic<std::size_t> shard_now{~std::size_t{0}};
        std::atomic<bool> established{false};
    };
    std::array<per_connection, 64> by_key; // keys start at 1
    std::atomic<int> ended{0};

    auto handler(shard_pool& pool) {
        return [this, &pool](pooled_connection c) -> awaitable<void> {
            auto& mine = by_key.at(c.key());
            c.set_load(static_cast<double>(c.key()));
            try {
                co_await sample::echo(
                    c.id(), [&] { mine.established = true; },
                    [&] {
                        mine.received++;
                        mine.last_shard = pool.running_shard().value_or(~std::size_t{0});
                        mine.shard_now = c.shard();
                    });
            } catch (const boost::system::system_error&) {
                // closed by the pool's stop
            }
            ++ended;
        };
    }
    // For failure messages: per connection seen, established or not and echoes so far.
    std::string describe() const {
        std::string s = "server connections (established/received):";
        for (std::size_t k = 1; k < by_key.size(); ++k)
            if (by_key[k].received != 0 || by_key[k].established)
                s += ' ' + std::to_string(k) + ':' + (by_key[k].established ? 'E' : '-') + '/' +
                     std::to_string(by_key[k].received);
        return s + ", " + std::to_string(ended) + " ended";
    }
    std::uint64_t received() const {
        std::uint64_t n = 0;
        for (const auto& c : by_key) n += c.received;
        return n;
    }
};

// Echo clients on the test thread: numbered messages, one at a time, every echo checked
// byte for byte (sample::echo_peer), until told to stop.
struct echo_clients {
    std::vector<std::uint64_t> round_trips;
    std::size_t connected = 0, finished = 0, failed = 0;
    std::string first_error; // what ended the first client that failed
    bool stop = false;

    echo_clients(asio::io_context& ctx, event_channel& ch, const endpoint& server, std::size_t n) : round_trips(n) {
        for (std::size_t i = 0; i < n; ++i)
            asio::co_spawn(ctx, run(ch, server, i), [this](const std::exception_ptr& e) {
                ++finished;
                if (e && failed++ == 0) first_error = what(e);
            });
    }
    awaitable<void> run(event_channel& ch, endpoint server, std::size_t i) {
        auto peer = co_await sample::echo_peer::connect(ch, server, 64);
        ++connected;
        while (!stop) co_await peer->round_trip(++round_trips[i]);
        co_await peer->disconnect();
    }
    std::uint64_t min() const { return *std::min_element(round_trips.begin(), round_trips.end()); }
    std::uint64_t sum() const { return std::accumulate(round_trips.begin(), round_trips.end(), std::uint64_t{0}); }
    // Runs `ctx` until every client has made `more` round trips from now; says why not.
    boost::test_tools::predicate_result advance(asio::io_context& ctx, std::uint64_t more, const echo_service& server) {
        auto goal = min() + more;
        if (run_until(
                ctx, [&] { return min() >= goal || finished != 0; }, 60s) &&
            finished == 0)
            return true;
        boost::test_tools::predicate_result r(false);
        r.message() << "round trips per client:";
        for (auto n : round_trips) r.message() << ' ' << n;
        r.message() << " (goal " << goal << "); " << finished << " ended, " << failed << " failed: " << first_error
                    << "; " << server.describe();
        return r;
    }
};

// Accepts on `l` for `pool`; the serve operation's result lands in `served`. The listener
// is closed and that result awaited when the returned object goes (before `served` and the
// listener, declared before it): the handler never outlives what it writes to.
struct serving {
    asio::io_context& ctx;
    listener& l;
    std::optional<error_code>& served;
    ~serving() {
        l.close();
        BOOST_TEST(run_until(
                       ctx, [&] { return served.has_value(); }, 30s),
                   "serving never ended");
    }
};
[[nodiscard]] serving serve(asio::io_context& ctx, shard_pool& pool, listener& l, echo_service& service,
                            std::optional<error_code>& served) {
    pool.async_serve(l, service.handler(pool), [&](error_code ec) { served = ec; });
    return {ctx, l, served};
}

} // namespace

BOOST_FIXTURE_TEST_CASE(connections_are_placed_over_the_shards_and_served_there, channel_fixture) {
    const int connections = is_siw() ? siw_connection_limit : at_volume(1000);
    constexpr std::size_t shards = 4;
    shared_cq cq;
    std::atomic<int> server_established{0}, on_wrong_thread{0};
    std::optional<error_code> served;
    {
        auto l = make_listener(*channel);
        shard_pool pool(shards); // round robin
        pool.async_serve(
            l,
            [&](pooled_connection c) -> awaitable<void> {
                // The coroutine starts on the connection's shard.
                if (pool.running_shard() != c.shard()) ++on_wrong_thread;
                auto attr = cq.attr(c.id().native_handle()->verbs);
                c.id().create_qp(attr);
                co_await c.id().async_accept(conn_params{}, use_awaitable);
                ++server_established;
                // Served until the peer goes (or the pool stops).
                co_await c.id().async_next_event(asio::as_tuple(use_awaitable));
            },
            [&](error_code ec) { served = ec; });

        std::vector<cm_id> clients;
        clients.reserve(connections);
        int client_established = 0;
        run(
            ctx,
            [&]() -> awaitable<void> {
                auto connect = [&](cm_id& id) -> awaitable<void> {
                    co_await id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 5000ms,
                                                      use_awaitable);
                    co_await id.async_resolve_route(5000ms, use_awaitable);
                    auto attr = cq.attr(id.native_handle()->verbs);
                    id.create_qp(attr);
                    co_await id.async_connect(conn_params{}, use_awaitable);
                    ++client_established;
                };
                for (int started = 0; client_established < connections;) {
                    while (started < connections && started - client_established < 50) { // 50 in flight
                        clients.emplace_back(*channel);
                        asio::co_spawn(ctx, connect(clients.back()), [](const std::exception_ptr& e) {
                            if (e) std::rethrow_exception(e);
                        });
                        ++started;
                    }
                    co_await asio::post(ctx, use_awaitable);
                }
            }(),
            240s);
        BOOST_REQUIRE(run_until(
            ctx, [&] { return server_established == connections; }, 60s));
        auto counts = pool.connection_counts();
        BOOST_TEST_MESSAGE("connections per shard: " << counts[0] << " " << counts[1] << " " << counts[2] << " "
                                                     << counts[3]);
        for (auto n : counts) BOOST_TEST((n == connections / shards || n == connections / shards + 1));
        BOOST_TEST(total(counts) == std::size_t(connections));
        BOOST_TEST(on_wrong_thread == 0);

        // The clients go: each server coroutine ends on its DISCONNECTED, its connection
        // leaves the pool.
        clients.clear();
        BOOST_TEST(run_until(
            ctx, [&] { return total(pool.connection_counts()) == 0; }, 120s));
        pool.stop();
        BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
        BOOST_TEST(*served == asio::error::operation_aborted);
    }
    channel.reset();
    ctx.run_for(60s); // every id destroyed: the context runs out of work
    BOOST_TEST(ctx.stopped());
    cq.destroy();
}

BOOST_FIXTURE_TEST_CASE(least_connections_fills_the_emptiest_shard, channel_fixture) {
    echo_service service;
    std::optional<error_code> served;
    auto l = make_listener(*channel);
    shard_pool pool(3, least_connections());
    auto serving = serve(ctx, pool, l, service, served);
    const auto server = device_endpoint(l.local_endpoint().port());

    std::vector<std::unique_ptr<sample::echo_peer>> peers(4);
    auto connect = [&](std::size_t i) {
        auto before = total(pool.connection_counts());
        run(ctx, [&]() -> awaitable<void> { peers[i] = co_await sample::echo_peer::connect(*channel, server, 64); }());
        BOOST_REQUIRE(run_until(ctx, [&] { return total(pool.connection_counts()) == before + 1; }));
    };
    for (std::size_t i = 0; i < 3; ++i) connect(i);
    BOOST_TEST(pool.connection_counts() == (std::vector<std::size_t>{1, 1, 1}), boost::test_tools::per_element());
    // The second connection (on shard 1) goes; the next one takes its place.
    run(ctx, peers[1]->disconnect());
    peers[1].reset();
    BOOST_REQUIRE(run_until(ctx, [&] { return total(pool.connection_counts()) == 2; }));
    connect(3);
    BOOST_TEST(pool.connection_counts() == (std::vector<std::size_t>{1, 1, 1}), boost::test_tools::per_element());
    peers.clear();
    BOOST_TEST(run_until(ctx, [&] { return service.ended == 4; }));
}

// The policy is the user's code: it runs with no lock of the pool held, so it may ask the
// pool (before, under the pool's mutex, this test's thread deadlocked in it).
BOOST_FIXTURE_TEST_CASE(a_placement_policy_may_call_into_the_pool, channel_fixture) {
    echo_service service;
    std::optional<error_code> served;
    auto l = make_listener(*channel);
    shard_pool* asked = nullptr;
    std::optional<std::vector<std::size_t>> seen;
    shard_pool pool(2, [&](std::span<const std::size_t>, const connection_request&) {
        seen = asked->connection_counts();
        return std::size_t{1};
    });
    asked = &pool;
    auto serving = serve(ctx, pool, l, service, served);
    std::unique_ptr<sample::echo_peer> peer;
    run(ctx, [&]() -> awaitable<void> {
        peer = co_await sample::echo_peer::connect(*channel, device_endpoint(l.local_endpoint().port()), 64);
    }());
    BOOST_REQUIRE(seen.has_value());
    BOOST_TEST(*seen == (std::vector<std::size_t>{0, 0}), boost::test_tools::per_element());
    BOOST_TEST(run_until(ctx, [&] { return pool.connection_counts() == std::vector<std::size_t>{0, 1}; }));
    run(ctx, peer->disconnect());
    BOOST_TEST(run_until(ctx, [&] { return service.ended == 1; }));
}

BOOST_FIXTURE_TEST_CASE(rebalancing_under_traffic_loses_no_message, channel_fixture) {
    constexpr std::size_t n = 8, shards = 4;
    echo_service service;
    std::optional<error_code> served;
    auto l = make_listener(*channel);
    shard_pool pool(shards, all_on(0));
    auto serving = serve(ctx, pool, l, service, served);
    echo_clients clients(ctx, *channel, device_endpoint(l.local_endpoint().port()), n);
    BOOST_REQUIRE(run_until(ctx, [&] { return clients.connected == n; }));
    BOOST_REQUIRE(clients.advance(ctx, 50, service));
    BOOST_TEST(pool.connection_counts() == (std::vector<std::size_t>{n, 0, 0, 0}), boost::test_tools::per_element());

    auto rebalance = [&](rebalance_plan plan) {
        std::optional<rebalance_report> report;
        pool.async_rebalance(std::move(plan), asio::bind_executor(ctx, [&](error_code ec, rebalance_report r) {
                                 BOOST_TEST(!ec, ec.message());
                                 report = std::move(r);
                             }));
        BOOST_REQUIRE(run_until(ctx, [&] { return report.has_value(); }));
        BOOST_TEST(report->failed.empty());
        BOOST_TEST(report->after == pool.connection_counts(), boost::test_tools::per_element());
        BOOST_REQUIRE(clients.advance(ctx, 50, service)); // traffic goes on after the moves
        return *report;
    };
    // By count: 8,0,0,0 -> 2,2,2,2, six connections moved while carrying traffic.
    auto by_count = rebalance(even_count());
    BOOST_TEST(by_count.moved.size() == 6u);
    BOOST_TEST(by_count.after == (std::vector<std::size_t>{2, 2, 2, 2}), boost::test_tools::per_element());

    // By load (each connection reports its key as its load): 2,2,2,2 connections carrying
    // 3,13,11,9 (even_count moved the newest first) -> loads closer together.
    auto spread = [&] {
        std::vector<double> loads(shards);
        for (const auto& c : pool.snapshot()) loads[c.shard] += c.load;
        return *std::max_element(loads.begin(), loads.end()) - *std::min_element(loads.begin(), loads.end());
    };
    auto spread_before = spread();
    BOOST_TEST(spread_before == 10.0);
    auto by_load = rebalance(even_load());
    BOOST_TEST(!by_load.moved.empty());
    BOOST_TEST(spread() < spread_before);

    // By key: everything to shard 3, at once; a second move of a moving connection waits
    // for the first and is made after it.
    auto now = pool.snapshot();
    auto elsewhere = std::find_if(now.begin(), now.end(), [](const auto& c) { return c.shard != 3; });
    BOOST_REQUIRE(elsewhere != now.end());
    std::vector<std::optional<error_code>> moved(n + 1);
    for (std::uint64_t key = 1; key <= n; ++key)
        pool.async_move(key, 3, asio::bind_executor(ctx, [&, key](error_code ec) { moved[key] = ec; }));
    std::optional<error_code> again;
    pool.async_move(elsewhere->key, 2, asio::bind_executor(ctx, [&](error_code ec) { again = ec; }));
    BOOST_REQUIRE(run_until(ctx, [&] {
        return again && std::all_of(moved.begin() + 1, moved.end(), [](const auto& m) { return m.has_value(); });
    }));
    for (std::uint64_t key = 1; key <= n; ++key) BOOST_TEST(!*moved[key], moved[key]->message());
    // Made after the first (at once if the shard threads had finished it): the connection
    // is on shard 2.
    BOOST_TEST(!*again, again->message());
    BOOST_TEST(pool.connection_counts()[3] == n - 1);
    BOOST_TEST(pool.connection_counts()[2] == 1u);
    BOOST_REQUIRE(clients.advance(ctx, 50, service));

    clients.stop = true;
    BOOST_REQUIRE(run_until(
        ctx, [&] { return clients.finished == n; }, 60s));
    BOOST_TEST(clients.failed == 0u);
    BOOST_REQUIRE(run_until(
        ctx, [&] { return service.ended == int(n); }, 60s));
    // Every message the clients sent was received once (a duplicate or a loss would have
    // broken a client's check of the next echo, or hung it), by the shard the connection
    // was on.
    BOOST_TEST(service.received() == clients.sum());
    for (std::uint64_t key = 1; key <= n; ++key)
        BOOST_TEST(service.by_key[key].last_shard == service.by_key[key].shard_now, "connection " << key);
}

BOOST_FIXTURE_TEST_CASE(stopping_with_requests_pending_rejects_them, channel_fixture) {
    // The listener's channel is read on `ctx`, but its handlers run on a context nobody runs
    // until the pool has stopped. So the library reads every request while the pool serves
    // the listener, and none gets further: the first completes the pool's accept, whose
    // handler (which would place it) waits; the others queue in the listener, no accept in
    // progress. stop() closes the listener: the queued requests are rejected; the accepted
    // one is refused when its handler runs (the pool has stopped), and rejected.
    asio::io_context handler_ctx;
    std::optional<event_channel> listen_channel(std::in_place, ctx);
    listener l(handler_ctx.get_executor(), *listen_channel);
    l.bind(device_endpoint());
    l.listen();
    echo_service service;
    std::optional<error_code> served;
    shard_pool pool(2);
    auto serving = serve(ctx, pool, l, service, served);

    constexpr int n = 4;
    std::vector<cm_id> clients;
    clients.reserve(n); // the connect operations refer to them
    std::vector<std::optional<std::pair<error_code, cm_event>>> connected(n);
    for (int i = 0; i < n; ++i) {
        clients.emplace_back(*channel);
        async_connect(clients.back(), device_endpoint(l.local_endpoint().port()), with_qp(),
                      [&, i](error_code ec, cm_event ev) { connected[i].emplace(ec, ev); });
    }
    // Every CONNECT_REQUEST read by the library (the listener's channel carries nothing else
    // until a request is accepted), none placed, no client answered.
    BOOST_REQUIRE(run_until(ctx, [&] { return listen_channel->events_read() == std::uint64_t(n); }));
    run_until(
        ctx, [] { return false; }, 300ms);
    BOOST_REQUIRE(listen_channel->events_read() == std::uint64_t(n));
    BOOST_REQUIRE(total(pool.connection_counts()) == 0u);
    BOOST_REQUIRE(std::none_of(connected.begin(), connected.end(), [](const auto& c) { return c.has_value(); }));

    pool.stop(); // closes the listener: its requests are rejected
    listen_channel.reset();
    // The accept's handler runs now: its request is refused, then accepting ends.
    BOOST_TEST(run_until(ctx, [&] {
        handler_ctx.poll();
        return served.has_value();
    }));
    // (The accept after the one that completed finds the listener closed: not_open, where
    // shard_pool.hpp promises operation_aborted.)
    BOOST_TEST((*served == asio::error::operation_aborted || *served == errc::not_open), served->message());
    BOOST_TEST(run_until(ctx, [&] {
        return std::all_of(connected.begin(), connected.end(), [](const auto& c) { return c.has_value(); });
    }));
    // Rejected, never established: on rxe by the IB CM's REJ, reason consumer-defined
    // (rdma_reject without private data); on siw by an MPA reply with the reject bit, which
    // the client's siw reports as -ECONNRESET (its CM: REJECTED).
    const int reject_status = is_siw() ? -ECONNRESET : 28; // IB_CM_REJ_CONSUMER_DEFINED
    for (const auto& c : connected) {
        if (!c) continue;
        const auto& [ec, ev] = *c;
        BOOST_TEST((ec == errc::rejected), ec.message() << " (status " << ev.status() << ")");
        BOOST_TEST((ev.type() == RDMA_CM_EVENT_REJECTED));
        BOOST_TEST(ev.status() == reject_status);
    }
    BOOST_TEST(service.ended == 0);
    BOOST_TEST(total(pool.connection_counts()) == 0u);
    // Every request's id destroyed: the handlers' context runs out of work.
    BOOST_TEST(run_until(
        ctx,
        [&] {
            handler_ctx.poll();
            return handler_ctx.stopped();
        },
        10s));
}

BOOST_FIXTURE_TEST_CASE(stopping_in_the_middle_of_traffic_ends_every_connection, channel_fixture) {
    constexpr std::size_t n = 6;
    echo_service service;
    std::optional<error_code> served;
    auto l = make_listener(*channel);
    shard_pool pool(3);
    auto serving = serve(ctx, pool, l, service, served);
    echo_clients clients(ctx, *channel, device_endpoint(l.local_endpoint().port()), n);
    BOOST_REQUIRE(run_until(ctx, [&] { return clients.connected == n; }));
    BOOST_REQUIRE(clients.advance(ctx, 30, service));

    // Stopped from another thread while the clients keep sending from this one.
    auto stopped = std::async(std::launch::async, [&] {
        auto start = std::chrono::steady_clock::now();
        pool.stop();
        return std::chrono::steady_clock::now() - start;
    });
    BOOST_REQUIRE(run_until(
        ctx, [&] { return stopped.wait_for(0s) == std::future_status::ready; }, 30s));
    auto took = stopped.get();
    BOOST_TEST_MESSAGE("stop took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
    // Every server coroutine ended (its operations aborted), the shard threads joined.
    BOOST_TEST(service.ended == int(n));
    BOOST_TEST(total(pool.connection_counts()) == 0u);
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
    // The clients see their connection break (flushed, disconnected): none hangs.
    BOOST_TEST(run_until(
        ctx, [&] { return clients.finished == n; }, 60s));
    BOOST_TEST(clients.failed == n);
}

BOOST_FIXTURE_TEST_CASE(refusals_are_clear_errors, channel_fixture) {
    BOOST_CHECK_EXCEPTION(shard_pool(0), boost::system::system_error,
                          [](const auto& e) { return e.code() == errc::no_such_shard; });

    echo_service service;
    std::optional<error_code> served;
    auto l = make_listener(*channel);
    // A placement naming a shard that does not exist: the request is rejected.
    shard_pool pool(2, all_on(7));
    auto serving = serve(ctx, pool, l, service, served);
    cm_id client(*channel);
    std::optional<error_code> connected;
    async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(),
                  [&](error_code ec, cm_event) { connected = ec; });
    BOOST_REQUIRE(run_until(ctx, [&] { return connected.has_value(); }));
    BOOST_TEST((*connected == errc::rejected), connected->message());

    std::optional<error_code> moved, missing;
    pool.async_move(1, 9, asio::bind_executor(ctx, [&](error_code ec) { moved = ec; }));
    pool.async_move(12345, 0, asio::bind_executor(ctx, [&](error_code ec) { missing = ec; }));
    BOOST_REQUIRE(run_until(ctx, [&] { return moved && missing; }));
    BOOST_TEST((*moved == errc::not_open)); // no connection 1: refused before the shard is looked at
    BOOST_TEST((*missing == errc::not_open));

    pool.stop();
    std::optional<error_code> after_stop;
    std::optional<rebalance_report> report;
    // The shards' contexts have stopped: the handlers run on their own executor. (Nothing
    // holds on to `ctx` after they ran: a hop that did crashed the next test once in a few
    // runs on a loaded machine, releasing work on this test's `ctx` gone by then.) Asked
    // from a handler running on `ctx`, where a handler dispatched inline would run at once.
    asio::post(ctx, [&] {
        pool.async_move(1, 0, asio::bind_executor(ctx, [&](error_code ec) { after_stop = ec; }));
        pool.async_rebalance(even_count(), asio::bind_executor(ctx, [&](error_code ec, rebalance_report r) {
                                 BOOST_TEST((ec == errc::pool_stopped));
                                 report = std::move(r);
                             }));
        BOOST_TEST((!after_stop && !report), "a handler ran inside its initiating call");
    });
    BOOST_REQUIRE(run_until(ctx, [&] { return after_stop && report; }));
    BOOST_TEST((*after_stop == errc::pool_stopped));
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
}

BOOST_FIXTURE_TEST_CASE(exceptions_on_a_shard_reach_the_pool_handler, channel_fixture) {
    struct caught {
        std::size_t shard;
        std::string what;
        bool on_its_thread;
    };
    std::mutex m;
    std::vector<caught> exceptions;
    std::optional<shard_pool> pool;
    pool.emplace(2, all_on(1), [&](std::size_t shard, std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            std::lock_guard lock(m);
            exceptions.push_back({shard, x.what(), pool->running_shard() == shard});
        }
    });
    auto count = [&] {
        std::lock_guard lock(m);
        return exceptions.size();
    };
    // A plain handler on shard 0 throws: reported, and the shard serves what comes next.
    std::atomic<bool> after = false;
    asio::post(pool->get_executor(0), [] { throw std::runtime_error("from a handler"); });
    asio::post(pool->get_executor(0), [&] { after = true; });
    BOOST_REQUIRE(run_until(
        ctx, [&] { return after && count() == 1; }, 10s));

    // A served connection's coroutine throws: its connection ends (never accepted, so the
    // client is rejected), and the exception reaches the handler from its shard.
    auto l = make_listener(*channel);
    std::optional<error_code> served;
    pool->async_serve(
        l, [](pooled_connection) -> awaitable<void> { throw std::runtime_error("from a coroutine"); },
        [&](error_code ec) { served = ec; });
    cm_id client(*channel);
    std::optional<error_code> connected;
    async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(),
                  [&](error_code ec, cm_event) { connected = ec; });
    BOOST_REQUIRE(run_until(ctx, [&] { return connected && count() == 2; }));
    BOOST_TEST(*connected, "the client was not refused");
    pool->stop();
    BOOST_TEST(run_until(ctx, [&] { return served.has_value(); }));
    BOOST_TEST(exceptions[0].shard == 0u);
    BOOST_TEST(exceptions[0].what == "from a handler");
    BOOST_TEST(exceptions[0].on_its_thread);
    BOOST_TEST(exceptions[1].shard == 1u);
    BOOST_TEST(exceptions[1].what == "from a coroutine");
    BOOST_TEST(exceptions[1].on_its_thread);
}
