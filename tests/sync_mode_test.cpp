// Synchronous mode on the kernel CM: an id migrated to no channel makes blocking calls,
// never takes a stale event for a call's answer, and moves back to a channel with its
// events.
#include "support/fixture.hpp"
#include "support/open_fds.hpp"
#include "support/threads.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::use_awaitable;

namespace {

// Starts an operation with a handler that hands its arguments to a future.
template <typename... Args, typename Start>
std::future<std::tuple<Args...>> start_op(Start start) {
    auto p = std::make_shared<std::promise<std::tuple<Args...>>>();
    auto f = p->get_future();
    start([p](Args... a) { p->set_value({std::move(a)...}); });
    return f;
}

// The operation's results, once it has completed (bounded).
template <typename... Args, typename Start>
std::tuple<Args...> result_of(Start start) {
    auto f = start_op<Args...>(std::move(start));
    BOOST_REQUIRE_MESSAGE(ready_within(f), "the operation never completed");
    return f.get();
}

error_code migrate(cm_id& id, auto& target) {
    return std::get<0>(result_of<error_code>([&](auto h) { id.async_migrate(target, h); }));
}

error_code enter_synchronous_mode(cm_id& id) {
    return std::get<0>(result_of<error_code>([&](auto h) { id.async_enter_synchronous_mode(h); }));
}

std::tuple<error_code, cm_event> next_event(cm_id& id) {
    return result_of<error_code, cm_event>([&](auto h) { id.async_next_event(h); });
}

// Connects `id` (synchronous) to `l` with blocking calls.
// With the throwing overloads (a failure fails the test with its system_error).
void connect_blocking(cm_id& id, const listener& l) {
    id.resolve_address(device_endpoint(l.local_endpoint().port()), 2s);
    id.resolve_route(2s);
    auto attr = rc_qp_attr();
    id.create_qp(attr);
    auto ev = id.connect({});
    BOOST_TEST(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
}

} // namespace

BOOST_AUTO_TEST_CASE(synchronous_round_trip) {
    context_threads t(3); // 0: server, 1: A, 2: B
    {
        event_channel server_ch(t[0]), a(t[1]), b(t[2]);
        auto l = make_listener(server_ch);
        std::optional<cm_id> server;
        auto accepted = asio::co_spawn(t[0], accept_into(l, server), asio::use_future);

        cm_id client(a);
        error_code ec;
        client.resolve_route(1s, ec);
        BOOST_TEST((ec == errc::not_synchronous), ec.message());
        BOOST_CHECK_EXCEPTION(client.resolve_route(1s), boost::system::system_error,
                              [](const auto& e) { return e.code() == errc::not_synchronous; });
        BOOST_TEST(!enter_synchronous_mode(client));
        BOOST_TEST((std::get<0>(next_event(client)) == errc::synchronous_mode));

        connect_blocking(client, l);
        BOOST_REQUIRE(ready_within(accepted));
        client.next_event(50ms, ec); // nothing is queued
        BOOST_TEST((ec == asio::error::timed_out), ec.message());

        // Back to a channel, on B: the connection carries on there.
        BOOST_TEST(!migrate(client, b));
        std::promise<std::thread::id> disconnected;
        client.async_next_event([&](error_code e, cm_event ev) {
            RDMACM_TEST_MT(!e && ev.type() == RDMA_CM_EVENT_DISCONNECTED);
            disconnected.set_value(std::this_thread::get_id());
        });
        server->async_disconnect(asio::detached);
        auto df = disconnected.get_future();
        BOOST_REQUIRE(ready_within(df));
        BOOST_TEST((df.get() == t.thread(2)));
        auto [dec] = result_of<error_code>([&](auto h) { client.async_disconnect(h); });
        BOOST_TEST(!dec, dec.message());
    }
    t.stop(); // every context runs out of work: nothing of ours is left
}

BOOST_AUTO_TEST_CASE(refused_while_an_event_is_queued_or_expected) {
    context_threads t(2); // 0: server, 1: A
    {
        event_channel server_ch(t[0]), a(t[1]);
        auto l = make_listener(server_ch);
        std::optional<cm_id> server;
        auto accepted = asio::co_spawn(t[0], accept_into(l, server), asio::use_future);
        cm_id client(a);
        auto [cec, cev] = result_of<error_code, cm_event>(
            [&](auto h) { async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), h); });
        BOOST_REQUIRE_MESSAGE(!cec, cec.message());
        BOOST_REQUIRE(ready_within(accepted));

        // Expected: a next-event wait is outstanding.
        auto wait = start_op<error_code, cm_event>([&](auto h) { client.async_next_event(h); });
        BOOST_TEST((enter_synchronous_mode(client) == errc::event_pending));
        client.cancel();
        BOOST_TEST((std::get<0>(wait.get()) == asio::error::operation_aborted));

        // Queued: the peer's DISCONNECTED, read by A and kept for next_event.
        const auto read_before = a.events_read();
        server->async_disconnect(asio::detached);
        auto deadline = std::chrono::steady_clock::now() + 10s;
        while (a.events_read() == read_before && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(1ms);
        BOOST_REQUIRE(a.events_read() > read_before);
        BOOST_TEST((enter_synchronous_mode(client) == errc::event_pending));
        auto [nec, ev] = next_event(client);
        BOOST_TEST(!nec);
        BOOST_TEST(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
        BOOST_TEST(!enter_synchronous_mode(client));
        error_code ec;

        // Synchronous now; the peer disconnected already: disconnect returns at once.
        client.disconnect(ec);
        BOOST_TEST(!ec, ec.message());
    }
    t.stop();
}

BOOST_AUTO_TEST_CASE(an_event_in_the_kernel_queue_undoes_the_move) {
    context_threads t(1); // 0: server; A is run by hand
    asio::io_context ctx_a;
    {
        event_channel server_ch(t[0]), a(ctx_a);
        auto l = make_listener(server_ch);
        std::optional<cm_id> server;
        cm_id client(a);
        // The peer's DISCONNECTED waits in A's kernel queue (A does not run meanwhile).
        connect_and_queue_peer_disconnect(ctx_a, a, client, l, t[0], server);

        std::optional<error_code> migrated;
        client.async_enter_synchronous_mode([&](error_code ec) { migrated = ec; });
        BOOST_REQUIRE(run_until(ctx_a, [&] { return migrated.has_value(); }));
        BOOST_TEST((*migrated == errc::event_pending), migrated->message());
        // The event came back with the id, exactly once.
        std::optional<cm_event> ev;
        client.async_next_event([&](error_code ec, cm_event e) {
            BOOST_TEST(!ec);
            ev = e;
        });
        BOOST_REQUIRE(run_until(ctx_a, [&] { return ev.has_value(); }));
        BOOST_TEST(ev->type() == RDMA_CM_EVENT_DISCONNECTED);
        bool again = false;
        client.async_next_event([&](error_code ec, cm_event) { again = ec != asio::error::operation_aborted; });
        run_until(
            ctx_a, [] { return false; }, 200ms);
        client.cancel();
        run_until(
            ctx_a, [] { return false; }, 50ms);
        BOOST_TEST(!again);
    }
    t.stop();
    ctx_a.run_for(5s);
}

// `n` ids go to synchronous mode, resolve, and are closed.
void synchronous_ids(int n) {
    context_threads t(1);
    {
        event_channel a(t[0]);
        for (int i = 0; i < n; ++i) {
            cm_id id(a);
            BOOST_TEST(!enter_synchronous_mode(id));
            error_code ec;
            id.resolve_address(device_endpoint(1), 2s, ec);
            BOOST_TEST(!ec, ec.message());
        } // each destroyed with librdmacm's private channel, on the destroyer thread
    }
    t.stop();
}

BOOST_AUTO_TEST_CASE(close_in_synchronous_mode_leaks_nothing) {
    synchronous_ids(1); // librdmacm opens the device (and more) once per process and keeps it
    auto deadline = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    const auto fds_before = open_fds();
    synchronous_ids(20);
    deadline = std::chrono::steady_clock::now() + 10s;
    while (!fds_opened_since(fds_before).empty() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    const auto leaked = fds_opened_since(fds_before);
    BOOST_TEST(leaked.empty(), "still open: " << leaked);
}
