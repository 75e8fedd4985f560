// Live migration of ids between io_contexts and strands, on the kernel CM: handlers follow
// the id to the new thread, events queued in the kernel or already read move with it
// exactly once and in order, and every refusal is a clear error.
#include "support/fixture.hpp"
#include "support/threads.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <boost/asio/steady_timer.hpp>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

using thread_id = std::thread::id;

// Runs `start(callback)` and waits for the callback, returning the thread it ran on and
// its error.
template <typename Start>
std::pair<thread_id, error_code> on_which_thread(Start start) {
    std::promise<std::pair<thread_id, error_code>> p;
    auto f = p.get_future();
    start([&p](error_code ec, auto&&...) { p.set_value({std::this_thread::get_id(), ec}); });
    BOOST_REQUIRE_MESSAGE(ready_within(f), "the handler never ran");
    return f.get();
}

// Waits for the next event of `id`, returning its thread and type.
std::pair<thread_id, rdma_cm_event_type> next_event_thread(cm_id& id) {
    std::promise<std::pair<thread_id, rdma_cm_event_type>> p;
    auto f = p.get_future();
    id.async_next_event([&p](error_code ec, cm_event ev) {
        RDMACM_TEST_MT(!ec, ec.message());
        p.set_value({std::this_thread::get_id(), ev.type()});
    });
    BOOST_REQUIRE_MESSAGE(ready_within(f), "no event");
    return f.get();
}

} // namespace

BOOST_AUTO_TEST_CASE(established_connection_moves_to_another_context) {
    context_threads t(3); // 0: server, 1: A, 2: B
    {
        event_channel server_ch(t[0]), a(t[1]), b(t[2]);
        auto l = make_listener(server_ch);
        std::optional<cm_id> server;
        auto accepted = asio::co_spawn(t[0], accept_into(l, server), asio::use_future);
        cm_id client(a);
        auto [connect_thread, connect_ec] = on_which_thread(
            [&](auto cb) { async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), cb); });
        BOOST_TEST(!connect_ec);
        BOOST_TEST((connect_thread == t.thread(1)));
        BOOST_REQUIRE(ready_within(accepted));

        auto [migrate_thread, migrate_ec] = on_which_thread([&](auto cb) { client.async_migrate(b, cb); });
        BOOST_TEST(!migrate_ec, migrate_ec.message());
        BOOST_TEST((migrate_thread == t.thread(2)));
        BOOST_TEST((client.get_executor() == b.get_executor()));
        const auto a_events = a.events_read();

        // The connection carries on: the peer's disconnect reaches the id on B.
        server->async_disconnect(asio::detached);
        auto [event_thread, type] = next_event_thread(client);
        BOOST_TEST(type == RDMA_CM_EVENT_DISCONNECTED);
        BOOST_TEST((event_thread == t.thread(2)));
        auto [disconnect_thread, disconnect_ec] = on_which_thread([&](auto cb) { client.async_disconnect(cb); });
        BOOST_TEST(!disconnect_ec);
        BOOST_TEST((disconnect_thread == t.thread(2)));
        BOOST_TEST(a.events_read() == a_events); // nothing of it came through A any more
    }
    t.stop(); // every context runs out of work: nothing of ours is left
}

BOOST_AUTO_TEST_CASE(queued_and_read_events_move_exactly_once) {
    context_threads t(2); // 0: server, 1: B; A is run by hand
    asio::io_context ctx_a;
    {
        event_channel server_ch(t[0]), a(ctx_a), b(t[1]);
        auto l = make_listener(server_ch);
        std::optional<cm_id> server;
        cm_id client(a);
        // The peer disconnects while A is not running: DISCONNECTED waits in A's kernel queue.
        connect_and_queue_peer_disconnect(ctx_a, a, client, l, t[0], server);
        const auto before = a.events_read() + b.events_read();

        std::atomic<bool> migrated = false;
        client.async_migrate(b, [&](error_code ec) {
            RDMACM_TEST_MT(!ec, ec.message());
            migrated = true;
        });
        // A runs the migration (and its reader, if it gets there first: then the event is
        // read on A and held for B). Either way B delivers it, once.
        BOOST_REQUIRE(run_until(ctx_a, [&] { return migrated.load(); }));
        auto [thread, type] = next_event_thread(client);
        BOOST_TEST(type == RDMA_CM_EVENT_DISCONNECTED);
        BOOST_TEST((thread == t.thread(1)));
        BOOST_TEST_MESSAGE("DISCONNECTED read by "
                           << (a.events_read() + b.events_read() == before + 1 && b.events_read() > 0
                                   ? "B (moved in the kernel)"
                                   : "A (held)"));
        BOOST_TEST(a.events_read() + b.events_read() == before + 1); // read once, by one of them

        // An event read on A and queued for next_event moves too.
        std::atomic<bool> back = false;
        client.async_migrate(a, [&](error_code ec) {
            RDMACM_TEST_MT(!ec);
            back = true;
        });
        BOOST_REQUIRE(run_until(ctx_a, [&] { return back.load(); }));
        bool done = false;
        client.async_disconnect([&](error_code ec) {
            RDMACM_TEST_MT(!ec);
            done = true; // the peer disconnected first: completes at once
        });
        BOOST_TEST(run_until(ctx_a, [&] { return done; }));
    }
    ctx_a.run_for(30s);
    BOOST_TEST(ctx_a.stopped());
    t.stop();
}

BOOST_AUTO_TEST_CASE(connection_request_moves_before_accept) {
    context_threads t(2); // 0: listener, 1: the shard
    {
        event_channel listen_ch(t[0]), shard(t[1]);
        auto l = make_listener(listen_ch);
        std::promise<thread_id> established;
        auto est = established.get_future();
        std::optional<cm_id> conn;
        l.async_get_request([&](error_code ec, connection_request req) {
            RDMACM_TEST_MT(!ec);
            conn.emplace(std::move(req.id));
            conn->async_migrate(shard, [&](error_code mec) {
                RDMACM_TEST_MT(!mec, mec.message());
                auto attr = rc_qp_attr();
                conn->create_qp(attr);
                conn->async_accept(conn_params{}, [&](error_code aec, cm_event) {
                    RDMACM_TEST_MT(!aec, aec.message());
                    established.set_value(std::this_thread::get_id());
                });
            });
        });
        cm_id client(listen_ch);
        auto f = asio::co_spawn(
            t[0], async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), use_awaitable),
            asio::use_future);
        BOOST_REQUIRE(ready_within(est));
        BOOST_TEST((est.get() == t.thread(1)));
        BOOST_REQUIRE(ready_within(f));
        BOOST_TEST(f.get().type() == RDMA_CM_EVENT_ESTABLISHED);
    }
    t.stop();
}

// Accepted, not yet established: the ESTABLISHED may be queued in the kernel, read and
// held, or still to come — it completes the accept once, on the shard's thread.
BOOST_AUTO_TEST_CASE(accepted_id_moves_before_established) {
    context_threads t(2); // 0: listener, 1: the shard
    for (int round = 0; round < 8; ++round) {
        event_channel listen_ch(t[0]), shard(t[1]);
        auto l = make_listener(listen_ch);
        std::promise<std::pair<thread_id, error_code>> accepted;
        std::promise<error_code> migrated;
        std::optional<cm_id> conn;
        l.async_get_request([&](error_code ec, connection_request req) {
            RDMACM_TEST_MT(!ec);
            conn.emplace(std::move(req.id));
            auto attr = rc_qp_attr();
            conn->create_qp(attr);
            conn->async_accept(conn_params{}, [&](error_code aec, cm_event ev) {
                RDMACM_TEST_MT(aec || ev.type() == RDMA_CM_EVENT_ESTABLISHED);
                accepted.set_value({std::this_thread::get_id(), aec});
            });
            conn->async_migrate(shard, [&](error_code mec) { migrated.set_value(mec); });
        });
        cm_id client(listen_ch);
        auto f = asio::co_spawn(
            t[0], async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), use_awaitable),
            asio::use_future);
        auto a = accepted.get_future();
        auto m = migrated.get_future();
        BOOST_REQUIRE(ready_within(m));
        BOOST_TEST(!m.get());
        BOOST_REQUIRE(ready_within(a));
        auto [thread, ec] = a.get();
        BOOST_TEST(!ec, ec.message());
        BOOST_TEST((thread == t.thread(1)));
        BOOST_REQUIRE(ready_within(f));
        // Closed on the threads their handlers run on.
        std::promise<void> closed;
        asio::post(t[1], [&] {
            conn.reset();
            closed.set_value();
        });
        closed.get_future().wait();
    }
    t.stop();
}

BOOST_AUTO_TEST_CASE(between_strands_of_one_context) {
    asio::io_context ctx;
    auto s1 = asio::make_strand(ctx), s2 = asio::make_strand(ctx);
    std::atomic<int> wrong = 0, ran = 0;
    std::vector<std::thread> threads;
    {
        event_channel ch1(ctx), ch2(ctx);
        auto l = make_listener(ch1);
        cm_id id(s1, ch1);
        auto guard = asio::make_work_guard(ctx);
        for (int i = 0; i < 3; ++i) threads.emplace_back([&] { ctx.run_for(60s); });
        std::promise<void> done;
        auto f = done.get_future();
        id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms, [&](error_code ec) {
            RDMACM_TEST_MT(!ec);
            ++ran;
            if (!s1.running_in_this_thread()) ++wrong;
            id.async_migrate(ch2, s2, [&](error_code mec) {
                RDMACM_TEST_MT(!mec, mec.message());
                ++ran;
                if (!s2.running_in_this_thread()) ++wrong;
                id.async_resolve_route(2000ms, [&](error_code rec) {
                    RDMACM_TEST_MT(!rec);
                    ++ran;
                    if (!s2.running_in_this_thread()) ++wrong;
                    done.set_value();
                });
            });
        });
        BOOST_REQUIRE(ready_within(f));
        guard.reset();
    }
    for (auto& th : threads) th.join();
    report_thread_checks();
    BOOST_TEST(ran == 3);
    BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(ping_pong_between_four_contexts_while_connecting_and_disconnecting) {
    constexpr int clients = 4, hops = 24;
    context_threads t(5); // 0: server; 1..4: the clients' contexts
    std::atomic<int> connects = 0, bad_threads = 0, disconnects = 0, finished = 0;
    {
        event_channel server_ch(t[0]);
        std::vector<std::unique_ptr<event_channel>> chans;
        for (std::size_t i = 1; i < 5; ++i) chans.push_back(std::make_unique<event_channel>(t[i]));
        auto l = make_listener(server_ch);
        std::vector<std::optional<cm_id>> servers(clients);
        // Server: accept each, then disconnect it while the client is still hopping.
        auto server_done = asio::co_spawn(
            t[0],
            [&]() -> awaitable<void> {
                for (int i = 0; i < clients; ++i) {
                    co_await accept_into(l, servers[static_cast<std::size_t>(i)]);
                    asio::steady_timer wait(t[0], 20ms);
                    co_await wait.async_wait(use_awaitable);
                    servers[static_cast<std::size_t>(i)]->async_disconnect(asio::detached);
                }
            },
            asio::use_future);

        std::vector<std::unique_ptr<cm_id>> ids;
        std::vector<std::function<void(int)>> hop(clients);
        for (int c = 0; c < clients; ++c) {
            ids.push_back(std::make_unique<cm_id>(*chans[0]));
            cm_id& id = *ids.back();
            // The connect starts on context 1 and completes wherever the id is by then.
            async_connect(id, device_endpoint(l.local_endpoint().port()), with_qp(), [&](error_code ec, cm_event ev) {
                RDMACM_TEST_MT(!ec, ec.message());
                RDMACM_TEST_MT(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
                ++connects;
            });
            hop[static_cast<std::size_t>(c)] = [&, c](int n) {
                std::size_t to = static_cast<std::size_t>(n % 4);
                id.async_migrate(*chans[to], [&, c, n, to](error_code ec) {
                    RDMACM_TEST_MT(!ec, ec.message());
                    if (std::this_thread::get_id() != t.thread(to + 1)) ++bad_threads;
                    if (n < hops) return hop[static_cast<std::size_t>(c)](n + 1);
                    // Done hopping: exactly one DISCONNECTED, on the last context.
                    id.async_next_event([&, to](error_code nec, cm_event ev) {
                        RDMACM_TEST_MT(!nec);
                        if (ev.type() == RDMA_CM_EVENT_DISCONNECTED) ++disconnects;
                        if (std::this_thread::get_id() != t.thread(to + 1)) ++bad_threads;
                        id.async_disconnect([&](error_code) { ++finished; });
                    });
                });
            };
            hop[static_cast<std::size_t>(c)](1);
        }
        for (int i = 0; i < 3000 && finished < clients; ++i) std::this_thread::sleep_for(10ms);
        BOOST_REQUIRE(ready_within(server_done)); // before `servers` goes away
        BOOST_TEST(finished == clients);
        BOOST_TEST(connects == clients);
        BOOST_TEST(disconnects == clients);
        BOOST_TEST(bad_threads == 0);
        // No second DISCONNECTED (or anything else) is left for any id.
        std::atomic<int> extra = 0, aborted = 0;
        for (auto& id : ids)
            id->async_next_event([&](error_code ec, cm_event ev) {
                if (ec == asio::error::operation_aborted)
                    ++aborted;
                else if (ev.type() != RDMA_CM_EVENT_TIMEWAIT_EXIT) // IB's, after DISCONNECTED
                    ++extra;
            });
        std::this_thread::sleep_for(100ms);
        for (auto& id : ids) id->close();
        for (int i = 0; i < 500 && aborted + extra < clients; ++i) std::this_thread::sleep_for(10ms);
        BOOST_TEST(extra == 0);
    }
    t.stop();
}

BOOST_FIXTURE_TEST_CASE(refusals_are_clear_errors, channel_fixture) {
    event_channel other(ctx);
    // Two migrations of one id at once: the second is refused, the first goes through.
    cm_id id(*channel);
    error_code first = errc::not_open, second = errc::not_open;
    int done = 0;
    id.async_migrate(other, [&](error_code ec) { first = ec, ++done; });
    id.async_migrate(other, [&](error_code ec) { second = ec, ++done; });
    BOOST_TEST(run_until(ctx, [&] { return done == 2; }));
    BOOST_TEST(!first);
    BOOST_TEST(second == make_error_code(errc::operation_in_progress));

    // A listener migrates before listen, never after.
    listener l(*channel);
    l.bind(device_endpoint());
    error_code before = errc::not_open, after = errc::not_open;
    l.async_migrate(other, [&](error_code ec) { before = ec; });
    BOOST_TEST(run_until(ctx, [&] { return before != make_error_code(errc::not_open); }));
    BOOST_TEST(!before);
    l.listen();
    l.async_migrate(*channel, [&](error_code ec) { after = ec; });
    BOOST_TEST(run_until(ctx, [&] { return after != make_error_code(errc::not_open); }));
    BOOST_TEST(after == make_error_code(errc::listener_cannot_migrate));

    // To a channel that is gone.
    event_channel gone(ctx);
    event_channel moved(std::move(gone));
    error_code to_gone;
    id.async_migrate(gone, ctx.get_executor(), [&](error_code ec) { to_gone = ec; }); // NOLINT: moved-from on purpose
    BOOST_TEST(run_until(ctx, [&] { return bool(to_gone); }));
    BOOST_TEST(to_gone == make_error_code(errc::channel_closed));
}

BOOST_FIXTURE_TEST_CASE(migrate_racing_close_destroys_the_id, channel_fixture) {
    {
        event_channel other(ctx);
        auto l = make_listener(*channel);
        for (int i = 0; i < 20; ++i) {
            cm_id id(*channel);
            bool resolved = false;
            id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms,
                                     [&](error_code) { resolved = true; });
            BOOST_REQUIRE(run_until(ctx, [&] { return resolved; }));
            error_code result;
            bool done = false;
            id.async_migrate(other, [&](error_code ec) {
                result = ec;
                done = true;
            });
            id.close(); // while it moves
            BOOST_REQUIRE(run_until(ctx, [&] { return done; }));
            BOOST_TEST((!result || result == asio::error::operation_aborted), result.message());
        }
    }
    channel.reset();
    ctx.run_for(30s);
    BOOST_TEST(ctx.stopped()); // every id destroyed, both channels gone
}

BOOST_FIXTURE_TEST_CASE(failed_migrate_leaves_the_id_where_it_was, channel_fixture) {
    auto l = make_listener(*channel);
    event_channel broken(ctx);
    // Replace the target's fd by one that is not an RDMA CM channel: the kernel refuses.
    int fd = broken.native_handle()->fd;
    BOOST_REQUIRE(::close(fd) == 0);
    BOOST_REQUIRE(::open("/dev/null", O_RDONLY) == fd);
    cm_id id(*channel);
    error_code ec;
    bool done = false;
    id.async_migrate(broken, ctx.get_executor(), [&](error_code e) {
        ec = e;
        done = true;
    });
    BOOST_REQUIRE(run_until(ctx, [&] { return done; }));
    BOOST_TEST((ec.category() == boost::system::system_category()), ec.what());
    BOOST_TEST(std::string_view(ec.location().function_name()) == "rdma_migrate_id");
    // Still fully usable on its old channel.
    bool resolved = false;
    id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms, [&](error_code e) {
        BOOST_TEST(!e);
        resolved = true;
    });
    BOOST_TEST(run_until(ctx, [&] { return resolved; }));
}
