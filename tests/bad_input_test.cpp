// Misuse gets a clear error (never UB, a crash, a hang or a leaked id), on the kernel CM.
#include "support/connection_pair.hpp"
#include "support/fixture.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

#include <sys/un.h>

#include <array>
#include <cstring>
#include <string_view>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {
// An endpoint whose sockaddr holds AF_UNIX: what a caller filling data() wrongly gets.
endpoint unix_endpoint() {
    endpoint ep;
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::memcpy(ep.data(), &un, sizeof(sockaddr));
    return ep;
}
} // namespace

BOOST_FIXTURE_TEST_CASE(unsupported_address_family, channel_fixture) {
    listener l(*channel);
    error_code ec;
    l.bind(unix_endpoint(), ec);
    BOOST_TEST(ec == make_error_code(errc::address_family_not_supported));
    BOOST_TEST(ec == boost::system::errc::address_family_not_supported);
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        auto [ec2] = co_await id.async_resolve_address(unix_endpoint(), 100ms, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec2 == make_error_code(errc::address_family_not_supported));
        // The id is still usable afterwards.
        auto [ec3] = co_await id.async_resolve_address(device_endpoint(1), 2000ms, asio::as_tuple(use_awaitable));
        BOOST_TEST(!ec3);
    }());
}

BOOST_FIXTURE_TEST_CASE(failed_calls_name_themselves, channel_fixture) {
    listener l(*channel);
    // Not an address of this machine.
    endpoint foreign(asio::ip::make_address("192.0.2.7"), 0);
    try {
        l.bind(foreign);
        BOOST_FAIL("bind to a foreign address succeeded");
    } catch (const boost::system::system_error& e) {
        BOOST_TEST((e.code().category() == boost::system::system_category()));
        BOOST_TEST(std::string_view(e.code().location().function_name()) == "rdma_bind_addr");
        BOOST_TEST(std::string_view(e.what()).find("rdma_bind_addr") != std::string_view::npos, e.what());
    }
}

BOOST_FIXTURE_TEST_CASE(listen_twice, channel_fixture) {
    auto l = make_listener(*channel);
    error_code ec;
    l.listen(16, ec);
    BOOST_TEST(ec == make_error_code(errc::already_listening));
    BOOST_TEST(l.is_open()); // still listening
}

BOOST_FIXTURE_TEST_CASE(overlapping_operations_of_one_kind, channel_fixture) {
    auto l = make_listener(*channel);
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        error_code first = errc::not_open;
        bool first_done = false;
        id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms, [&](error_code ec) {
            first = ec;
            first_done = true;
        });
        auto [second] = co_await id.async_resolve_address(device_endpoint(1), 2000ms, asio::as_tuple(use_awaitable));
        BOOST_TEST(second == make_error_code(errc::operation_in_progress));
        while (!first_done) co_await asio::post(ctx, use_awaitable);
        BOOST_TEST(!first); // the first one was not disturbed
    }());
}

BOOST_FIXTURE_TEST_CASE(closed_and_moved_from_objects, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        id.close();
        id.close(); // idempotent
        BOOST_TEST(!id.is_open());
        BOOST_TEST(id.native_handle() == nullptr);
        auto [ec] = co_await id.async_resolve_route(100ms, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == make_error_code(errc::not_open));
        error_code qp_ec;
        auto attr = rc_qp_attr();
        id.create_qp(attr, nullptr, qp_ec);
        BOOST_TEST(qp_ec == make_error_code(errc::not_open));

        cm_id a(*channel);
        cm_id b(std::move(a));
        BOOST_TEST(b.is_open());
        BOOST_TEST(!a.is_open()); // NOLINT(bugprone-use-after-move): that is the point
        auto [ec2, ev] = co_await a.async_next_event(asio::as_tuple(use_awaitable));
        BOOST_TEST(ec2 == make_error_code(errc::not_open));
        BOOST_TEST(ev.empty());
        // Closing what is closed, or nothing: completes, as a socket's close does.
        auto [closed_again] = co_await id.async_close(asio::as_tuple(use_awaitable));
        BOOST_TEST(!closed_again, closed_again.message());
        auto [closed_nothing] = co_await a.async_close(asio::as_tuple(use_awaitable));
        BOOST_TEST(!closed_nothing, closed_nothing.message());

        // An id on a closed or moved-from channel: refused, not a crash.
        event_channel closed(ctx), moved(ctx);
        closed.close();
        BOOST_TEST(!closed.is_open());
        event_channel taker(std::move(moved));
        auto refused = [](const boost::system::system_error& e) { return e.code() == errc::channel_closed; };
        BOOST_CHECK_EXCEPTION(cm_id{closed}, boost::system::system_error, refused);
        BOOST_CHECK_EXCEPTION(cm_id{moved}, boost::system::system_error, refused); // NOLINT(bugprone-use-after-move)
        BOOST_CHECK_EXCEPTION(listener{closed}, boost::system::system_error, refused);
    }());
}

// A move to no executor (an empty one, as a default-made any_io_executor is): refused with
// invalid_argument on the id's executor, both forms. Before: the channel form took the empty
// executor as its target (SIGSEGV at the move's end, rxe and siw), and a callback's
// initiation threw bad_executor (its default executor was the empty target). The id stays
// where it was, and moves afterwards.
BOOST_FIXTURE_TEST_CASE(a_move_to_no_executor_is_refused, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        event_channel other(ctx);
        auto [to_context] = co_await id.async_migrate(asio::any_io_executor{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(to_context == make_error_code(asio::error::invalid_argument), to_context.message());
        auto [to_channel] = co_await id.async_migrate(other, asio::any_io_executor{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(to_channel == make_error_code(asio::error::invalid_argument), to_channel.message());
        // A callback (no executor of its own) runs on the id's.
        std::optional<error_code> called;
        id.async_migrate(asio::any_io_executor{}, [&](error_code ec) { called = ec; });
        while (!called) co_await asio::post(ctx, use_awaitable);
        BOOST_TEST(*called == make_error_code(asio::error::invalid_argument), called->message());
        BOOST_TEST((id.get_executor() == asio::any_io_executor(ctx.get_executor())), "the id stayed");
        co_await id.async_migrate(other, use_awaitable);
        BOOST_TEST(id.is_open());
    }());
}

// The refusal runs on the executor the id has now (the fresh review of 2026-12-06: it was
// posted to the handle's first one, here a context nobody runs any more).
BOOST_FIXTURE_TEST_CASE(a_move_to_no_executor_is_refused_where_the_id_is_now, channel_fixture) {
    asio::io_context other_ctx;
    event_channel other(other_ctx);
    cm_id id(*channel);
    std::optional<error_code> moved;
    id.async_migrate(other, [&](error_code ec) { moved = ec; });
    BOOST_REQUIRE(run_until(
        other_ctx,
        [&] {
            ctx.poll(); // the old channel's reader
            return moved.has_value();
        },
        10s));
    BOOST_REQUIRE(!*moved);
    std::optional<error_code> refused;
    bool on_the_new_context = false;
    id.async_migrate(asio::any_io_executor{}, [&](error_code ec) {
        on_the_new_context = other_ctx.get_executor().running_in_this_thread();
        refused = ec;
    });
    BOOST_REQUIRE(run_until(
        other_ctx, [&] { return refused.has_value(); }, 10s));
    BOOST_TEST(*refused == make_error_code(asio::error::invalid_argument), refused->message());
    BOOST_TEST(on_the_new_context);
}

// A server restarting on its port: close() returns before librdmacm has destroyed the
// listener (on the library's destroyer thread), so a bind made at once could find the port
// still taken (EADDRINUSE: this loop with close() had its first rebind refused in each of
// three runs, rxe and siw). async_close completes once the id is destroyed: the port is
// free then, each time.
BOOST_FIXTURE_TEST_CASE(a_listener_s_port_is_free_once_async_close_completes, channel_fixture) {
    std::optional<listener> l(make_listener(*channel));
    const auto port = l->local_endpoint().port();
    constexpr int rounds = 50;
    int rebound = 0;
    run(ctx, [&]() -> awaitable<void> {
        for (int i = 0; i < rounds; ++i) {
            auto [ec] = co_await l->async_close(asio::as_tuple(use_awaitable));
            BOOST_TEST(!ec, ec.message());
            l.emplace(*channel);
            error_code bound;
            l->bind(device_endpoint(port), bound);
            BOOST_TEST(!bound, "round " << i << ": " << bound.message());
            if (bound) co_return;
            l->listen();
            ++rebound;
        }
    }());
    BOOST_TEST(rebound == rounds);
}

// A queue pair needs an id bound to a device (resolved, bound to a device's address, or a
// request): before that, both ways of making one get errc::no_device (librdmacm itself
// would make completion queues on a null device), and the id goes on. A receive pool on a
// closed queue pair is refused, naming what was closed.
BOOST_FIXTURE_TEST_CASE(a_queue_pair_before_the_id_has_a_device, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        auto no_device = [](const boost::system::system_error& e) {
            BOOST_TEST(std::string_view(e.what()).find("queue_pair") != std::string_view::npos, e.what());
            return e.code() == errc::no_device;
        };
        BOOST_CHECK_EXCEPTION(queue_pair{id}, boost::system::system_error, no_device);
        error_code ec;
        auto attr = rc_qp_attr();
        id.create_qp(attr, nullptr, ec);
        BOOST_TEST(ec == make_error_code(errc::no_device), ec.message());
        BOOST_TEST(id.qp() == nullptr);

        co_await id.async_resolve_address(device_endpoint(1), 2000ms, use_awaitable); // now it has one
        queue_pair qp(id);
        BOOST_TEST(qp.is_open());
        qp.close();
        auto closed = [](const boost::system::system_error& e) {
            BOOST_TEST(std::string_view(e.what()).find("receive_pool") != std::string_view::npos, e.what());
            return e.code() == errc::not_open;
        };
        BOOST_CHECK_EXCEPTION(receive_pool(qp, 4, 64), boost::system::system_error, closed);
    }());
}

// A queue pair whose id was closed (the whole-core review of 2026-12-06, finding 1): the
// queue pair goes with the id, on the destroyer thread, while the user's queue_pair handle
// may still be open. Its native handle and protection domain are null from the close on, and
// what would register memory on them fails clearly. Before: pd() read the destroyed ibv_qp,
// and a receive_pool made on it registered memory through it (AddressSanitizer:
// heap-use-after-free, rxe and siw).
BOOST_FIXTURE_TEST_CASE(a_queue_pair_whose_id_is_closed_has_no_protection_domain, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        connection_pair p;
        co_await connect_pair(l, *channel, p);
        co_await p.client->async_close(use_awaitable); // the id, and its queue pair, destroyed
        BOOST_TEST(p.client_qp->is_open());            // (the handle: closing it is the user's to do)
        BOOST_TEST(p.client_qp->native_handle() == nullptr);
        BOOST_TEST(p.client_qp->pd() == nullptr);
        auto not_open = [](const boost::system::system_error& e) { return e.code() == errc::not_open; };
        BOOST_CHECK_EXCEPTION(receive_pool(*p.client_qp, 4, 64), boost::system::system_error, not_open);
        std::array<std::byte, 64> buffer{};
        auto no_domain = [](const boost::system::system_error& e) {
            BOOST_TEST(std::string_view(e.what()).find("memory_region") != std::string_view::npos, e.what());
            return e.code() == asio::error::invalid_argument;
        };
        BOOST_CHECK_EXCEPTION(memory_region(p.client_qp->pd(), buffer), boost::system::system_error, no_domain);
        p.server->close();
    }());
}

// Review D6: a connect on an id never resolved. librdmacm's rdma_connect reads the device's
// limits off the id and crashed (SIGSEGV, rxe and siw); refused before the call now, in
// synchronous mode too. The
// id stays usable: resolved, it connects as any other (refused here: nobody listens there).
BOOST_FIXTURE_TEST_CASE(a_connect_before_the_id_has_a_device, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        auto [ec, ev] = co_await id.async_connect(conn_params{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == make_error_code(errc::no_device), ec.message());
        auto [ec2, ev2] = co_await id.async_connect(conn_params{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec2 == make_error_code(errc::no_device), "refused once, refused again: " << ec2.message());
        co_await id.async_resolve_address(device_endpoint(1), 2000ms, use_awaitable);
        co_await id.async_resolve_route(2000ms, use_awaitable);
        auto [ec3, ev3] = co_await id.async_connect(conn_params{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec3 != make_error_code(errc::no_device), "resolved, it has one");
        // The blocking connect of synchronous mode is refused alike.
        cm_id blocking(*channel);
        co_await blocking.async_enter_synchronous_mode(use_awaitable);
        error_code ec4;
        blocking.connect(conn_params{}, ec4);
        BOOST_TEST(ec4 == make_error_code(errc::no_device), ec4.message());
    }());
}

// `id` resolved to `l`'s port, with a queue pair: what a connect's parameters are checked on.
static awaitable<void> ready_to_connect(cm_id& id, listener& l) {
    co_await id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms, use_awaitable);
    co_await id.async_resolve_route(2000ms, use_awaitable);
    auto attr = rc_qp_attr();
    id.create_qp(attr);
}

BOOST_FIXTURE_TEST_CASE(oversized_private_data, channel_fixture) {
    auto l = make_listener(*channel);
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        co_await ready_to_connect(id, l);
        std::array<std::byte, 300> big{};
        conn_params p;
        p.private_data = big;
        auto [ec, ev] = co_await id.async_connect(p, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == make_error_code(errc::private_data_too_long));
        // Within librdmacm's limit: IB's REQ carries 56 bytes, so the kernel refuses it (the
        // call is named); iWARP's MPA carries it, and the connect goes on.
        std::array<std::byte, 255> large{};
        p.private_data = large;
        auto [ec2, ev2] = co_await id.async_connect(p, asio::as_tuple(use_awaitable));
        BOOST_TEST_MESSAGE("255 bytes of private data: " << (ec2 ? ec2.what() : std::string("accepted")));
        if (ec2.category() == boost::system::system_category())
            BOOST_TEST(std::string_view(ec2.location().function_name()) == "rdma_connect");
    }());
}

// An ACK time-out the verbs' 5 bits cannot hold is refused, named, before anything is sent
// (one they hold is set on the id: stream_test's keep-alive case, and the two-host crash
// test, whose writer with a short one learns of the crash sooner).
BOOST_FIXTURE_TEST_CASE(an_ack_timeout_out_of_range, channel_fixture) {
    auto l = make_listener(*channel);
    run(ctx, [&]() -> awaitable<void> {
        cm_id id(*channel);
        co_await ready_to_connect(id, l);
        auto [ec, ev] = co_await id.async_connect(conn_params{.ack_timeout = 32}, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == boost::system::errc::invalid_argument, ec.message());
        BOOST_TEST(std::string_view(ec.location().function_name()) == "conn_params::ack_timeout");
    }());
}

// The composed connect refuses private data librdmacm cannot carry, as the id's own connect
// does (before, it dropped it and connected without): from a post, before any step (no
// address resolved), both overloads.
BOOST_FIXTURE_TEST_CASE(the_composed_connect_refuses_oversized_private_data, channel_fixture) {
    auto l = make_listener(*channel);
    std::array<std::byte, 256> big{};
    connect_options o;
    o.params.private_data = big;
    const endpoint server = device_endpoint(l.local_endpoint().port());
    cm_id raw(*channel), with_data_path(*channel);
    std::optional<error_code> a, b;
    async_connect(raw, server, o, [&](error_code ec, cm_event) { a = ec; });
    async_connect(with_data_path, server, o, data_path_options{},
                  [&](error_code ec, cm_event, queue_pair qp, receive_pool pool) {
                      b = ec;
                      BOOST_TEST(!qp.is_open());
                      BOOST_TEST(!pool.is_open());
                  });
    BOOST_TEST((!a && !b), "completed inside the initiating call");
    BOOST_REQUIRE(run_until(
        ctx, [&] { return a && b; }, 10s));
    BOOST_TEST(*a == make_error_code(errc::private_data_too_long), a->message());
    BOOST_TEST(*b == make_error_code(errc::private_data_too_long), b->message());
    BOOST_TEST(!raw.native_handle()->verbs, "an address was resolved first");
    BOOST_TEST(!with_data_path.native_handle()->verbs, "an address was resolved first");
}
