// Many connections through one event channel (one fd), set up concurrently, against the
// kernel CM: every connection established on both sides, every event routed.
//
// 1,000 connections on rxe. siw (Debian 6.1) refuses QPs beyond a few dozen per process
// (rdma_create_qp: ENOSPC; raw librdmacm hits it at 27 client+server pairs, rdma-core's
// cmtime only passes 200 with client and server in two processes), so there the
// connection count is what siw allows, and 1,000 ids resolve through one channel instead.
#include "support/fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <sys/resource.h>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr int many = at_volume(1000);
constexpr int in_flight = 50;

} // namespace

BOOST_AUTO_TEST_CASE(thousand_connections_through_one_channel) {
    const int connections = is_siw() ? siw_connection_limit : many;
    asio::io_context ctx;
    shared_cq cq;
    int server_established = 0, client_established = 0;
    std::uint64_t events = 0;
    {
        event_channel channel(ctx);
        auto l = make_listener(channel);
        std::vector<cm_id> server_ids, client_ids;
        server_ids.reserve(connections);
        client_ids.reserve(connections);

        asio::co_spawn(
            ctx,
            [&]() -> awaitable<void> {
                for (int i = 0; i < connections; ++i) {
                    auto req = co_await l.async_get_request(use_awaitable);
                    auto attr = cq.attr(req.id.native_handle()->verbs);
                    req.id.create_qp(attr);
                    server_ids.push_back(std::move(req.id));
                    server_ids.back().async_accept(conn_params{}, [&](error_code ec, cm_event) {
                        BOOST_TEST(!ec, ec.message());
                        if (!ec) ++server_established;
                    });
                }
            },
            asio::detached);

        auto client = [&](cm_id& id) -> awaitable<void> {
            co_await id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 5000ms, use_awaitable);
            co_await id.async_resolve_route(5000ms, use_awaitable);
            auto attr = cq.attr(id.native_handle()->verbs);
            id.create_qp(attr);
            co_await id.async_connect(conn_params{}, use_awaitable);
            ++client_established;
        };
        run(
            ctx,
            [&]() -> awaitable<void> {
                int started = 0;
                while (client_established < connections) {
                    // Keep `in_flight` connects going.
                    while (started < connections && started - client_established < in_flight) {
                        client_ids.emplace_back(channel);
                        asio::co_spawn(ctx, client(client_ids.back()), [](std::exception_ptr e) {
                            if (e) std::rethrow_exception(e);
                        });
                        ++started;
                    }
                    co_await asio::post(ctx, use_awaitable);
                }
                while (server_established < connections) co_await asio::post(ctx, use_awaitable);
            }(),
            240s);
        events = channel.events_read();
    }
    BOOST_TEST_MESSAGE("established: " << client_established << " client, " << server_established << " server");
    BOOST_TEST(client_established == connections);
    BOOST_TEST(server_established == connections);
    // At least: per client ADDR_RESOLVED, ROUTE_RESOLVED, ESTABLISHED; per server side
    // CONNECT_REQUEST, ESTABLISHED.
    BOOST_TEST(events >= 5u * connections);
    // Everything is destroyed (off this thread); then the context runs out of work.
    ctx.run_for(60s);
    BOOST_TEST(ctx.stopped());
    cq.destroy();
}

BOOST_AUTO_TEST_CASE(thousand_ids_resolve_through_one_channel) {
    asio::io_context ctx;
    {
        event_channel channel(ctx);
        auto l = make_listener(channel);
        std::vector<cm_id> ids;
        ids.reserve(many);
        int resolved = 0;
        for (int i = 0; i < many; ++i) {
            ids.emplace_back(channel);
            asio::co_spawn(
                ctx,
                [&, &id = ids.back()]() -> awaitable<void> {
                    co_await id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 5000ms,
                                                      use_awaitable);
                    co_await id.async_resolve_route(5000ms, use_awaitable);
                    ++resolved;
                },
                [](std::exception_ptr e) {
                    if (e) std::rethrow_exception(e);
                });
        }
        BOOST_TEST(run_until(
            ctx, [&] { return resolved == many; }, 120s));
        BOOST_TEST(channel.events_read() == 2u * many);
    }
    ctx.run_for(60s);
    BOOST_TEST(ctx.stopped());
}
