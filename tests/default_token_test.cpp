// Asio's idiom for I/O objects, on the kernel CM: executor-typed objects (rebind_executor,
// as_default_on, converting moves) and default completion tokens — a connection made, used,
// moved and ended with token-less co_await, as an Asio user writes it first.
#include "support/fixture.hpp"

#include <boost/asio/strand.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstring>
#include <string_view>
#include <type_traits>

using namespace rdmacm;
using namespace rdmacm::test;
using namespace boost::asio::experimental::awaitable_operators;
using asio::awaitable;

namespace {

using awaitable_channel = asio::use_awaitable_t<>::as_default_on_t<event_channel>;
using awaitable_id = asio::use_awaitable_t<>::as_default_on_t<cm_id>;
using awaitable_listener = asio::use_awaitable_t<>::as_default_on_t<listener>;
using awaitable_queue_pair = asio::use_awaitable_t<>::as_default_on_t<queue_pair>;
using awaitable_pool = asio::use_awaitable_t<>::as_default_on_t<shard_pool>;
using default_executor = asio::use_awaitable_t<>::executor_with_default<asio::any_io_executor>;
using awaitable_timer_t = asio::use_awaitable_t<>::as_default_on_t<asio::steady_timer>;

static_assert(std::is_same_v<awaitable_channel, basic_event_channel<default_executor>>);
static_assert(std::is_same_v<awaitable_id, basic_cm_id<default_executor>>);
static_assert(std::is_same_v<awaitable_listener, basic_listener<default_executor>>);
static_assert(std::is_same_v<awaitable_queue_pair, basic_queue_pair<default_executor>>);
static_assert(std::is_same_v<awaitable_pool, basic_shard_pool<default_executor>>);
static_assert(std::is_same_v<asio::default_completion_token_t<awaitable_id::executor_type>, asio::use_awaitable_t<>>);
// A plain object converts into a typed one (a connection request's id, say), not back.
static_assert(std::is_convertible_v<cm_id&&, awaitable_id>);
static_assert(std::is_convertible_v<listener&&, awaitable_listener>);
static_assert(std::is_convertible_v<queue_pair&&, awaitable_queue_pair>);
static_assert(std::is_convertible_v<event_channel&&, awaitable_channel>);
// A pool owns its threads: made as it is used, never moved (so never used moved-from).
static_assert(!std::is_move_constructible_v<shard_pool> && !std::is_move_constructible_v<awaitable_pool>);

} // namespace

BOOST_FIXTURE_TEST_CASE(a_connection_made_used_moved_and_ended_without_tokens, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        awaitable_channel server_channel(ctx), other_channel(ctx);
        awaitable_listener l(server_channel);
        l.bind(device_endpoint());
        l.listen();

        std::optional<awaitable_id> server;
        std::optional<awaitable_queue_pair> server_qp, client_qp;
        awaitable_id client(*channel); // typed id on a plain channel
        auto accept = [&]() -> awaitable<void> {
            server.emplace((co_await l.async_get_request()).id);
            server_qp.emplace(*server);
            co_await server->async_accept({});
        };
        auto connect = [&]() -> awaitable<void> {
            co_await client.async_resolve_address(l.local_endpoint(), 2s);
            co_await client.async_resolve_route(2s);
            client_qp.emplace(client);
            co_await client.async_connect({});
        };
        co_await (accept() && connect());

        std::array<std::byte, 64> sbuf{}, cbuf{};
        // (Remote access on the read's sink too: iWARP hardware writes it as a remote write.)
        constexpr int rw_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        memory_region smr(server_qp->pd(), sbuf, rw_access), cmr(client_qp->pd(), cbuf, rw_access);
        // One message before the server's id moves to another channel, one after.
        for (std::string_view text : {"before the move", "after the move"}) {
            std::memcpy(cbuf.data(), text.data(), text.size());
            auto [got, sent] = co_await (server_qp->async_receive(smr, sbuf) &&
                                         client_qp->async_send(cmr, std::span(cbuf).first(text.size())));
            BOOST_TEST(sent == text.size());
            BOOST_TEST(std::string_view(reinterpret_cast<const char*>(sbuf.data()), got) == text);
            if (text == "before the move") co_await server->async_migrate(other_channel);
        }
        BOOST_TEST((server->get_executor() == other_channel.get_executor()));

        // One-sided: the client writes into the server's buffer and reads it back.
        std::memcpy(cbuf.data(), "written", 7);
        BOOST_TEST(co_await client_qp->async_rdma_write(cmr, std::span(cbuf).first(7), to_remote(smr, sbuf)) == 7u);
        cbuf = {};
        BOOST_TEST(co_await client_qp->async_rdma_read(cmr, std::span(cbuf).first(7), to_remote(smr, sbuf)) == 7u);
        BOOST_TEST(std::string_view(reinterpret_cast<const char*>(cbuf.data()), 7) == "written");

        // Through synchronous mode and back, then onto a strand of the server channel's
        // context named as the executor: the id's executor type stays, its value follows.
        co_await server->async_enter_synchronous_mode();
        co_await server->async_migrate(server_channel);
        auto strand = asio::make_strand(ctx);
        co_await server->async_migrate(other_channel, default_executor(strand));
        BOOST_TEST((server->get_executor() == default_executor(strand)));

        // On IB a disconnect completes once the peer disconnected too.
        auto server_side = [&]() -> awaitable<void> {
            auto ev = co_await server->async_next_event();
            BOOST_TEST(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
            co_await server->async_disconnect();
        };
        co_await (client.async_disconnect() && server_side());
    }());
}

BOOST_FIXTURE_TEST_CASE(the_composed_connect_without_a_token, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        awaitable_id client(*channel);
        std::optional<cm_id> server;
        auto ev = co_await (async_connect(client, l.local_endpoint(), with_qp()) && accept_into(l, server));
        BOOST_TEST(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
        BOOST_TEST(server->is_open());
    }());
}

// The composed connect that yields a queue pair and a receive pool: on a typed id, they are
// typed too, and the pool's receive takes no token either.
BOOST_FIXTURE_TEST_CASE(the_composed_connect_s_pool_without_a_token, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        awaitable_listener l(*channel);
        l.bind(device_endpoint());
        l.listen();
        awaitable_id client(*channel);
        auto client_side = [&]() -> awaitable<void> {
            auto [ev, qp, pool] =
                co_await async_connect(client, l.local_endpoint(), {.receives = {.depth = 4, .message_size = 64}});
            static_assert(std::is_same_v<decltype(qp), awaitable_queue_pair>);
            static_assert(std::is_same_v<decltype(pool), basic_receive_pool<default_executor>>);
            BOOST_TEST(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
            auto message = co_await pool.async_receive();
            BOOST_TEST(std::string_view(reinterpret_cast<const char*>(message.data().data()), message.size()) ==
                       "hello");
            co_await client.async_disconnect();
        };
        auto server_side = [&]() -> awaitable<void> {
            awaitable_id server = (co_await l.async_get_request()).id;
            awaitable_queue_pair qp(server);
            co_await server.async_accept({});
            std::array<std::byte, 5> hello{};
            std::memcpy(hello.data(), "hello", 5);
            memory_region mr(qp.pd(), hello);
            BOOST_TEST(co_await qp.async_send(mr, hello) == 5u);
            auto ev = co_await server.async_next_event(); // the client has the message
            BOOST_TEST(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
            co_await server.async_disconnect();
        };
        co_await (client_side() && server_side());
    }());
}

// A connect raced with a timer, as the README shows it: with as_tuple a failure is a result
// and ends the race at once with its error (`||` waits for the first *success*: with
// use_awaitable alone, a connect refused in milliseconds would look like a time-out). No
// listener is connection_refused on both transports (rxe: REJECTED; siw: rdma_connect's
// ECONNREFUSED).
BOOST_FIXTURE_TEST_CASE(a_refused_connect_ends_a_race_with_a_timer_at_once, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        awaitable_id id(*channel);
        asio::steady_timer timeout(ctx, 20s);
        auto started = std::chrono::steady_clock::now();
        auto r = co_await (async_connect(id, device_endpoint(1), with_qp(), asio::as_tuple(asio::use_awaitable)) ||
                           timeout.async_wait(asio::as_tuple(asio::use_awaitable)));
        auto took = std::chrono::steady_clock::now() - started;
        BOOST_REQUIRE(r.index() == 0u); // the connect, not the timer
        auto ec = std::get<0>(std::get<0>(r));
        BOOST_TEST(ec == boost::system::errc::connection_refused, ec.what());
        BOOST_TEST(took < 10s);
        BOOST_TEST_MESSAGE("refused after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                            << " ms: " << ec.what());
    }());
}

// A shard pool serves a listener made with as_default_on: async_serve's default token is
// the listener's (co_await without one). The operation holds the listening id, not the
// object: moving the listener while it serves changes nothing; closing it ends the serve
// with operation_aborted (thrown, as use_awaitable does).
BOOST_FIXTURE_TEST_CASE(a_pool_serves_an_awaitable_listener_without_a_token, channel_fixture) {
    std::atomic<int> served{0}; // (counted on the shard: outlives the pool)
    shard_pool pool(1);
    run(ctx, [&]() -> awaitable<void> {
        awaitable_listener first(*channel);
        first.bind(device_endpoint());
        first.listen();
        const auto port = first.local_endpoint().port();
        auto serving = [&]() -> awaitable<error_code> {
            try {
                co_await pool.async_serve(first, [&](pooled_connection c) -> awaitable<void> {
                    auto attr = rc_qp_init_attr();
                    c.id().create_qp(attr);
                    co_await c.id().async_accept(conn_params{}, asio::use_awaitable);
                    ++served;
                    co_await c.id().async_next_event(asio::as_tuple(asio::use_awaitable)); // until the peer goes
                });
            } catch (const boost::system::system_error& e) {
                co_return e.code();
            }
            co_return error_code{};
        };
        auto connecting = [&]() -> awaitable<void> {
            awaitable_id client(*channel);
            auto ev = co_await async_connect(client, device_endpoint(port), with_qp()); // (served: it began)
            BOOST_TEST(ev.type() == RDMA_CM_EVENT_ESTABLISHED);
            awaitable_listener moved(std::move(first)); // while the serve waits for the next request
            moved.close();
        };
        auto ended = co_await (serving() && connecting());
        BOOST_TEST((ended == asio::error::operation_aborted), ended.message());
    }());
    BOOST_TEST(run_until(
        ctx, [&] { return served == 1; }, 10s)); // (the server's ESTABLISHED may come after the client's)
}

// A pool of as_default_on's type: placements, moves and rebalances co_await without a
// token, and their errors are thrown; pool_stop_mode is one type for every pool type.
BOOST_FIXTURE_TEST_CASE(a_pool_places_moves_and_rebalances_without_tokens, channel_fixture) {
    awaitable_pool pool(2);
    static_assert(std::is_same_v<awaitable_pool::stop_mode, shard_pool::stop_mode>);
    BOOST_TEST((pool.get_executor(1) == asio::any_io_executor(pool.context(1).get_executor())));
    auto l = make_listener(*channel);
    cm_id client(*channel); // never accepted: rejected when its connection goes
    std::optional<error_code> connected;
    run(ctx, [&]() -> awaitable<void> {
        async_connect(client, l.local_endpoint(), with_qp(), [&](error_code ec, cm_event) { connected = ec; });
        std::optional<pooled_connection> placed(
            co_await pool.async_place(co_await l.async_get_request(asio::use_awaitable)));
        pooled_connection& c = *placed;
        const std::size_t first = c.shard(), other = 1 - first;
        co_await pool.async_move(c, other);
        BOOST_TEST(c.shard() == other);
        co_await pool.async_move(c.key(), first);
        BOOST_TEST(c.shard() == first);
        const planned_move back{c.key(), first, other};
        auto report = co_await pool.async_rebalance(
            [&](std::span<const connection_load>, std::size_t) { return std::vector<planned_move>{back}; });
        BOOST_TEST(c.shard() == other);
        BOOST_TEST((report.moved == std::vector<planned_move>{back}));
        try {
            co_await pool.async_move(c, 2);
            BOOST_FAIL("a move to a shard the pool does not have succeeded");
        } catch (const boost::system::system_error& e) {
            BOOST_TEST((e.code() == errc::no_such_shard), e.what());
        }
        placed.reset(); // the client's connect ends (the id must outlive its operation)
        for (awaitable_timer_t t(ctx); !connected;) {
            t.expires_after(10ms);
            co_await t.async_wait();
        }
    }());
    BOOST_TEST((connected && *connected == errc::rejected), connected.value_or(error_code{}).message());
    pool.stop(shard_pool::stop_mode::drain);
}
