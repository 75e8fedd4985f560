// Connection setup and teardown through the library, against the kernel CM on the test
// device: co_await, every completion-token style, private data both ways, rejection,
// where handlers run.
#include "support/fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <string_view>
#include <thread>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string_view text(std::span<const std::byte> b, std::size_t n) {
    return {reinterpret_cast<const char*>(b.data()), std::min(n, b.size())};
}

connect_options client_options(std::string_view private_data = {}) {
    connect_options o;
    o.params.private_data = bytes(private_data);
    o.qp = rc_qp_attr();
    return o;
}

// Accepts one request on `l`, checking its private data, answering with `reply`; the
// connection goes to `out` if given.
awaitable<void> accept_one(listener& l, std::string_view expect, std::string_view reply,
                           std::optional<cm_id>* out = nullptr) {
    auto req = co_await l.async_get_request(use_awaitable);
    // May run on another thread (the use_future case): checked thread-safely.
    RDMACM_TEST_MT(req.event.type() == RDMA_CM_EVENT_CONNECT_REQUEST);
    RDMACM_TEST_MT(text(req.event.private_data(), expect.size()) == expect);
    auto attr = rc_qp_attr();
    req.id.create_qp(attr);
    conn_params p;
    p.private_data = bytes(reply);
    co_await req.id.async_accept(p, use_awaitable);
    if (out) out->emplace(std::move(req.id));
}

} // namespace

BOOST_FIXTURE_TEST_CASE(co_await_connect_exchange_private_data_disconnect, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        auto port = l.local_endpoint().port();
        BOOST_TEST(port != 0);
        cm_id client(*channel);
        std::optional<cm_id> server;
        auto server_side =
            asio::co_spawn(ctx, accept_one(l, "hello server", "hello client", &server), asio::use_future);

        auto established =
            co_await async_connect(client, device_endpoint(port), client_options("hello server"), use_awaitable);
        BOOST_TEST(established.type() == RDMA_CM_EVENT_ESTABLISHED);
        BOOST_TEST(text(established.private_data(), 12) == "hello client");
        BOOST_TEST(client.qp() != nullptr);
        BOOST_TEST(client.remote_endpoint() == device_endpoint(port));

        // The future is ready once the server side has run to completion on this thread.
        asio::steady_timer t(ctx);
        while (server_side.wait_for(0s) != std::future_status::ready) {
            t.expires_after(1ms);
            co_await t.async_wait(use_awaitable);
        }
        server_side.get();

        // Client disconnects; the server sees DISCONNECTED as an unsolicited event and
        // disconnects too (which completes at once); then the client's completes.
        auto client_done = asio::co_spawn(ctx, client.async_disconnect(use_awaitable), asio::use_future);
        auto ev = co_await server->async_next_event(use_awaitable);
        BOOST_TEST(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
        co_await server->async_disconnect(use_awaitable);
        while (client_done.wait_for(0s) != std::future_status::ready) {
            t.expires_after(1ms);
            co_await t.async_wait(use_awaitable);
        }
        client_done.get();
    }());
}

BOOST_FIXTURE_TEST_CASE(every_completion_token_style, channel_fixture) {
    auto l = make_listener(*channel);
    auto port = l.local_endpoint().port();
    asio::co_spawn(
        ctx,
        [&]() -> awaitable<void> {
            for (int i = 0; i < 4; ++i) co_await accept_one(l, "", "");
        },
        asio::detached);
    auto remote = device_endpoint(port);
    const auto timeout = 2000ms;

    // Callback: never inline, on the id's executor.
    {
        cm_id id(*channel);
        bool returned = false, called = false;
        id.async_resolve_address(remote, timeout, [&](error_code ec) {
            BOOST_TEST(returned); // not inside the initiating call
            BOOST_TEST(!ec);
            called = true;
        });
        returned = true;
        BOOST_TEST(run_until(ctx, [&] { return called; }));
    }
    // deferred: nothing starts until the deferred operation is launched.
    {
        cm_id id(*channel);
        auto op = id.async_resolve_address(remote, timeout, asio::deferred);
        run_until(
            ctx, [] { return false; }, 50ms);
        BOOST_TEST(id.local_endpoint() == endpoint{}); // not resolved yet
        error_code result = errc::not_open;
        bool called = false;
        std::move(op)([&](error_code ec) {
            result = ec;
            called = true;
        });
        BOOST_TEST(run_until(ctx, [&] { return called; }));
        BOOST_TEST(!result);
    }
    // use_future, with the io_context on another thread.
    {
        cm_id id(*channel);
        auto guard = asio::make_work_guard(ctx);
        std::thread runner([&] { ctx.run_for(30s); });
        auto f1 = id.async_resolve_address(remote, timeout, asio::use_future);
        BOOST_REQUIRE(f1.wait_for(10s) == std::future_status::ready);
        f1.get();
        auto f2 = id.async_resolve_route(timeout, asio::use_future);
        BOOST_REQUIRE(f2.wait_for(10s) == std::future_status::ready);
        f2.get();
        auto attr = rc_qp_attr();
        id.create_qp(attr);
        auto f3 = id.async_connect(conn_params{}, asio::use_future);
        BOOST_REQUIRE(f3.wait_for(30s) == std::future_status::ready);
        BOOST_TEST(f3.get().type() == RDMA_CM_EVENT_ESTABLISHED);
        guard.reset();
        id.close();
        ctx.stop();
        runner.join();
        ctx.restart();
    }
    // as_tuple + use_awaitable, error first.
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        auto [ec] = co_await id.async_resolve_address(remote, timeout, asio::as_tuple(use_awaitable));
        BOOST_TEST(!ec);
        auto [ec2] = co_await id.async_resolve_route(timeout, asio::as_tuple(use_awaitable));
        BOOST_TEST(!ec2);
    }());
}

BOOST_FIXTURE_TEST_CASE(handlers_run_on_the_ids_strand, channel_fixture) {
    auto strand = asio::make_strand(ctx);
    auto l = make_listener(*channel);
    cm_id id(strand, *channel);
    BOOST_TEST((id.get_executor() == asio::any_io_executor(strand)));
    std::atomic<bool> on_strand = false, called = false;
    id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms, [&](error_code ec) {
        RDMACM_TEST_MT(!ec);
        on_strand = strand.running_in_this_thread();
        called = true;
    });
    // Several threads run the context: the handler must still be on the id's strand.
    std::thread t1([&] { ctx.run_for(10s); });
    std::thread t2([&] { ctx.run_for(10s); });
    for (int i = 0; i < 1000 && !called; ++i) std::this_thread::sleep_for(10ms);
    ctx.stop();
    t1.join();
    t2.join();
    report_thread_checks();
    BOOST_TEST(called);
    BOOST_TEST(on_strand);
}

BOOST_FIXTURE_TEST_CASE(reject_carries_private_data_to_the_client, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        asio::co_spawn(
            ctx,
            [&]() -> awaitable<void> {
                auto req = co_await l.async_get_request(use_awaitable);
                req.id.reject(bytes("go away"));
            },
            asio::detached);
        cm_id client(*channel);
        auto [ec, ev] = co_await async_connect(client, device_endpoint(l.local_endpoint().port()), client_options(),
                                               asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == make_error_code(errc::rejected), ec.message());
        BOOST_TEST(ec == boost::system::errc::connection_refused);
        BOOST_TEST(ev.type() == RDMA_CM_EVENT_REJECTED);
        BOOST_TEST(ev.status() != 0); // the raw reject reason is kept
        BOOST_TEST(text(ev.private_data(), 7) == "go away");
    }());
}

BOOST_FIXTURE_TEST_CASE(port_without_listener_fails_the_connect, channel_fixture) {
    // A port that was free, and is again: the listener is destroyed (on the library's
    // thread) before the connect goes out — its own context runs out of work only then.
    // (Connecting while it still listened in the kernel failed the check once on siw.)
    unsigned short port;
    {
        asio::io_context listen_ctx;
        {
            event_channel listen_channel(listen_ctx);
            auto l = make_listener(listen_channel);
            port = l.local_endpoint().port();
        }
        listen_ctx.run_for(30s);
        BOOST_REQUIRE(listen_ctx.stopped());
    }
    run(ctx, [&]() -> awaitable<void> {
        cm_id client(*channel);
        auto [ec, ev] =
            co_await async_connect(client, device_endpoint(port), client_options(), asio::as_tuple(use_awaitable));
        BOOST_TEST_MESSAGE("no listener: " << ec.what() << (ev.empty() ? "" : std::string(" ") + to_string(ev.type())));
        // IB: the peer's CM rejects (REJECTED, reason 8: invalid service id); iWARP: the TCP
        // connect is refused and rdma_connect itself fails with ECONNREFUSED.
        BOOST_TEST((ec == boost::system::errc::connection_refused || ec == make_error_code(errc::unreachable) ||
                    ec == make_error_code(errc::connect_error)),
                   ec.message());
    }());
}

BOOST_FIXTURE_TEST_CASE(unroutable_address_fails_resolution, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        cm_id client(*channel);
        // TEST-NET-1: the guest has no route to it (and no network at all).
        endpoint nowhere(asio::ip::make_address("192.0.2.1"), 7471);
        auto [ec] = co_await client.async_resolve_address(nowhere, 500ms, asio::as_tuple(use_awaitable));
        BOOST_TEST_MESSAGE("unroutable: " << ec.what());
        BOOST_TEST((ec == make_error_code(errc::address_error) ||
                    (ec.category() == boost::system::system_category() &&
                     ec.location().function_name() == std::string_view("rdma_resolve_addr"))));
    }());
}

BOOST_FIXTURE_TEST_CASE(ipv6_connects_too, channel_fixture) {
    const auto& dev = test_device();
    // A device without IPv6 fails here rather than passing untested: the test bed's VM gives
    // every device one (tools/rdma-vm/guest-job), so its absence means the setup is broken.
    BOOST_REQUIRE_MESSAGE(!dev.ipv6.empty(), "device " << dev.name << " has no global IPv6 address (RDMACM_ADDR6_"
                                                       << dev.name << " unset): this test needs one");
    run(ctx, [&]() -> awaitable<void> {
        listener l(*channel);
        l.bind(endpoint(asio::ip::make_address(dev.ipv6), 0));
        l.listen();
        endpoint remote(asio::ip::make_address(dev.ipv6), l.local_endpoint().port());
        asio::co_spawn(ctx, accept_one(l, "v6", ""), asio::detached);
        cm_id client(*channel);
        auto ev = co_await async_connect(client, remote, client_options("v6"), use_awaitable);
        BOOST_TEST(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
        BOOST_TEST(client.local_endpoint().address().is_v6());
    }());
}
