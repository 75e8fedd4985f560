// A channel per execution context (issue 39): ids and listeners made with a context or an
// executor and no channel of their own share that context's event channel — one fd per
// context — which goes with the last of them, so that run() returns; `async_migrate(ex)`
// moves an id to the channel of ex's context. On the kernel's RDMA CM.
#include "support/fixture.hpp"

#include <boost/asio/strand.hpp>

#include <chrono>
#include <optional>

using namespace rdmacm;
using namespace rdmacm::test;

namespace {

rdma_event_channel* channel_of(const cm_id& id) { return id.native_handle()->channel; }

} // namespace

BOOST_AUTO_TEST_CASE(ids_made_on_a_context_share_its_channel) {
    asio::io_context ctx, other;
    {
        cm_id a(ctx), b(ctx);
        listener l(ctx);
        cm_id on_strand(asio::make_strand(ctx), RDMA_PS_TCP); // handlers on a strand of it
        cm_id elsewhere(other);
        BOOST_TEST(channel_of(a) != nullptr);
        BOOST_TEST(channel_of(a) == channel_of(b));
        BOOST_TEST(channel_of(a) == l.native_handle()->channel);
        BOOST_TEST(channel_of(a) == channel_of(on_strand));
        BOOST_TEST(channel_of(a) != channel_of(elsewhere));
        BOOST_TEST((on_strand.get_executor() != asio::any_io_executor(ctx.get_executor())));
        cm_id on_executor(ctx.get_executor());
        BOOST_TEST(channel_of(a) == channel_of(on_executor));
    }
    // The channels go with their last ids: neither context is held running.
    BOOST_TEST(runs_out_of_work(ctx), "the context's channel outlived its ids");
    BOOST_TEST(runs_out_of_work(other));
}

BOOST_AUTO_TEST_CASE(a_connection_between_two_contexts_channels) {
    asio::io_context server_ctx, client_ctx;
    {
        listener l(server_ctx);
        l.bind(device_endpoint());
        l.listen();
        std::optional<cm_id> server;
        bool accepted = false;
        asio::co_spawn(server_ctx, accept_into(l, server), [&](const std::exception_ptr& e) {
            BOOST_TEST(!e, (e ? what(e) : ""));
            accepted = true;
        });
        cm_id client(client_ctx);
        std::optional<error_code> connected;
        async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(),
                      [&](error_code ec, cm_event) { connected = ec; });
        BOOST_REQUIRE(run_both(
            server_ctx, client_ctx, [&] { return accepted && connected; }, 30s));
        BOOST_TEST(!*connected, connected->message());
        BOOST_REQUIRE(server.has_value());
        BOOST_TEST(channel_of(*server) == l.native_handle()->channel); // (a request's id: its listener's)
        BOOST_TEST(channel_of(*server) != channel_of(client));

        // The server disconnects; the client sees it on its context's channel.
        server->async_disconnect([](error_code) {});
        std::optional<error_code> gone;
        client.async_next_event([&](error_code ec, cm_event ev) {
            gone = ec;
            if (!ec) BOOST_TEST(ev.type() == RDMA_CM_EVENT_DISCONNECTED);
        });
        BOOST_REQUIRE(run_both(
            server_ctx, client_ctx, [&] { return gone.has_value(); }, 30s));
        BOOST_TEST(!*gone, gone->message());
    }
    BOOST_TEST(runs_out_of_work(server_ctx));
    BOOST_TEST(runs_out_of_work(client_ctx));
}

BOOST_AUTO_TEST_CASE(a_context_whose_ids_are_gone_makes_a_new_channel_for_the_next) {
    asio::io_context ctx;
    { cm_id first(ctx); }
    BOOST_REQUIRE(runs_out_of_work(ctx)); // the first channel's reader stopped
    cm_id next(ctx);
    std::optional<error_code> resolved;
    next.async_resolve_address(device_endpoint(), 2s, [&](error_code ec) { resolved = ec; });
    BOOST_REQUIRE(run_until(ctx, [&] { return resolved.has_value(); }));
    BOOST_TEST(!*resolved, resolved->message()); // its event was read: the channel works
    next.close();
    BOOST_TEST(runs_out_of_work(ctx));
}

BOOST_AUTO_TEST_CASE(async_migrate_to_an_executor_moves_the_id_to_that_context_s_channel) {
    asio::io_context from, to;
    {
        cm_id id(from);
        cm_id there(to);
        std::optional<error_code> moved;
        id.async_migrate(to.get_executor(), [&](error_code ec) { moved = ec; });
        BOOST_REQUIRE(run_both(from, to, [&] { return moved.has_value(); })); // (its handler runs on `to`)
        BOOST_TEST(!*moved, moved->message());
        BOOST_TEST(channel_of(id) == channel_of(there));
        BOOST_TEST((id.get_executor() == asio::any_io_executor(to.get_executor())));

        // Its events now come by way of `to` alone.
        std::optional<error_code> resolved;
        id.async_resolve_address(device_endpoint(), 2s, [&](error_code ec) { resolved = ec; });
        BOOST_REQUIRE(run_until(to, [&] { return resolved.has_value(); }));
        BOOST_TEST(!*resolved, resolved->message());

        // A closed id is refused, never crashed on.
        cm_id closed(from);
        closed.close();
        std::optional<error_code> refused;
        closed.async_migrate(to.get_executor(), [&](error_code ec) { refused = ec; });
        BOOST_REQUIRE(run_until(from, [&] { return refused.has_value(); }));
        BOOST_TEST((*refused == errc::not_open));
    }
    BOOST_TEST(runs_out_of_work(from), "the id's old context kept work after it moved and went");
    BOOST_TEST(runs_out_of_work(to));
}
