// A channel per execution context (issue 39): ids and listeners made with a context or an
// executor and no channel of their own share that context's event channel — one fd per
// context — which goes with the last of them; `async_migrate(ex)` moves an id to the
// channel of ex's context; and, as with Asio's sockets, run() returns when no operation
// waits, ids open or not. On the kernel's RDMA CM.
#include "support/fixture.hpp"
#include "support/open_fds.hpp"

#include <boost/asio/strand.hpp>

#include <chrono>
#include <string>
#include <thread>

#include <poll.h>
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
    BOOST_REQUIRE(runs_out_of_work(ctx)); // the first channel's reader stopping (its aborted wait counted)
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

// run() returns when no operation waits, as with Asio's sockets (issue 39, item 4): a
// context's own channel and completion channels keep it running only while an operation of
// one of its ids or queue pairs waits (src/common/fd_reader.hpp). What comes meanwhile stays
// in the kernel's queues and is read once an operation starts again.
namespace {

// A connection between two contexts' channels, each end with its queue pair and a receive
// pool (made before the accept, as the samples teach), then every operation done.
struct idle_connection {
    asio::io_context server_ctx, client_ctx;
    listener l{server_ctx};
    std::optional<cm_id> server;
    std::optional<queue_pair> server_qp;
    std::optional<receive_pool> server_inbox;
    cm_id client{client_ctx};
    std::optional<queue_pair> client_qp;
    std::optional<receive_pool> client_inbox;

    idle_connection() {
        l.bind(device_endpoint());
        l.listen();
        bool accepted = false;
        asio::co_spawn(
            server_ctx,
            [this]() -> asio::awaitable<void> {
                auto req = co_await l.async_get_request(asio::use_awaitable);
                server.emplace(std::move(req.id));
                server_qp.emplace(*server, queue_pair_options{});
                server_inbox.emplace(*server_qp, 4, 64);
                co_await server->async_accept(conn_params{}, asio::use_awaitable);
            },
            [&](const std::exception_ptr& e) {
                BOOST_TEST(!e, (e ? what(e) : ""));
                accepted = true;
            });
        std::optional<error_code> connected;
        async_connect(client, device_endpoint(l.local_endpoint().port()),
                      data_path_options{.receives = {.depth = 4, .message_size = 64}},
                      [&](error_code ec, cm_event, queue_pair qp, receive_pool pool) {
                          connected = ec;
                          client_qp.emplace(std::move(qp));
                          client_inbox.emplace(std::move(pool));
                      });
        BOOST_REQUIRE(run_both(
            server_ctx, client_ctx, [&] { return accepted && connected; }, 30s));
        BOOST_REQUIRE_MESSAGE(!*connected, connected->message());
    }
};

// The bound of a run() that should return at once: it fails only when run() would wait.
constexpr auto idle_bound = 5s;

} // namespace

BOOST_AUTO_TEST_CASE(run_returns_while_a_connection_and_its_listener_are_idle) {
    idle_connection c;
    // Open: two connected ids, a listener, two queue pairs with receives posted.
    BOOST_TEST(runs_out_of_work(c.server_ctx, idle_bound), "the server's run() waits with no operation pending");
    BOOST_TEST(runs_out_of_work(c.client_ctx, idle_bound), "the client's run() waits with no operation pending");

    // And again after an operation: the context goes idle once it is done.
    std::optional<error_code> asked;
    c.client.async_resolve_route(2s, [&](error_code ec) { asked = ec; }); // (refused: connected)
    BOOST_REQUIRE(run_until(
        c.client_ctx, [&] { return asked.has_value(); }, idle_bound));
    BOOST_TEST(runs_out_of_work(c.client_ctx, idle_bound));
}

BOOST_AUTO_TEST_CASE(what_comes_while_a_context_is_idle_is_read_once_an_operation_starts) {
    idle_connection c;
    BOOST_REQUIRE(runs_out_of_work(c.client_ctx, idle_bound));

    // A message from the server waits in the client's queues, unread: nothing is pending there.
    std::string text = "while you were idle";
    memory_region mr(c.server_qp->pd(), std::as_writable_bytes(std::span(text)));
    std::optional<error_code> sent;
    c.server_qp->async_send(mr, std::as_bytes(std::span(text)), [&](error_code ec, std::size_t) { sent = ec; });
    BOOST_REQUIRE(run_until(c.server_ctx, [&] { return sent.has_value(); }));
    BOOST_REQUIRE_MESSAGE(!*sent, sent->message());
    BOOST_TEST(runs_out_of_work(c.client_ctx, idle_bound), "a message nobody asked for kept the client running");

    // Moved to another context meanwhile, idle there too; the message moves with it.
    asio::io_context third;
    std::optional<error_code> moved;
    c.client.async_migrate(third.get_executor(), [&](error_code ec) { moved = ec; });
    BOOST_REQUIRE(run_both(c.client_ctx, third, [&] { return moved.has_value(); }));
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    BOOST_TEST(runs_out_of_work(c.client_ctx, idle_bound), "the context the client left waits");
    BOOST_TEST(runs_out_of_work(third, idle_bound), "the context the client moved to waits, idle");

    // Asked for, it is read.
    std::optional<std::string> got;
    c.client_inbox->async_receive([&](error_code ec, received_message m) {
        BOOST_TEST(!ec, ec.message());
        got.emplace(reinterpret_cast<const char*>(m.data().data()), m.size());
    });
    BOOST_REQUIRE(run_until(
        third, [&] { return got.has_value(); }, 30s));
    BOOST_TEST(*got == text);
    BOOST_TEST(runs_out_of_work(third, idle_bound));

    // The server disconnects: the client's DISCONNECTED waits in the kernel until asked for.
    // (On IB the server's own DISCONNECTED waits for the client's answer, semantics T5.)
    std::optional<error_code> disconnected;
    c.server->async_disconnect([&](error_code ec) { disconnected = ec; });
    pollfd queued{c.client.native_handle()->channel->fd, POLLIN, 0};
    for (auto until = std::chrono::steady_clock::now() + 10s;
         ::poll(&queued, 1, 0) == 0 && std::chrono::steady_clock::now() < until;)
        c.server_ctx.run_one_for(10ms);
    BOOST_REQUIRE_MESSAGE(::poll(&queued, 1, 0) == 1, "the server's disconnect reached no client");
    BOOST_TEST(runs_out_of_work(third, idle_bound), "an event nobody asked for kept the client running");
    std::optional<cm_event> gone;
    c.client.async_next_event([&](error_code ec, cm_event ev) {
        BOOST_TEST(!ec, ec.message());
        gone = ev;
    });
    BOOST_REQUIRE(run_until(
        third, [&] { return gone.has_value(); }, 30s));
    BOOST_TEST(gone->type() == RDMA_CM_EVENT_DISCONNECTED);
    // Its receives flushed: the next one says the connection is gone.
    std::optional<error_code> after;
    c.client_inbox->async_receive([&](error_code ec, received_message) { after = ec; });
    BOOST_REQUIRE(run_until(
        third, [&] { return after.has_value(); }, 30s));
    BOOST_TEST((*after == condition::connection_lost), after->message());
    BOOST_TEST(runs_out_of_work(third, idle_bound));

    // The client's answer ends the server's disconnect (IB: its DREP).
    std::optional<error_code> answered;
    c.client.async_disconnect([&](error_code ec) { answered = ec; });
    BOOST_REQUIRE(run_both(
        c.server_ctx, third, [&] { return answered && disconnected; }, 30s));
    BOOST_TEST(!*disconnected, disconnected->message());
    BOOST_TEST(runs_out_of_work(c.server_ctx, idle_bound));
    BOOST_TEST(runs_out_of_work(third, idle_bound));
}

// An operation waiting on an id keeps the context it moved to running, and that one only:
// the channel there holds no work of its own, so nothing else would.
BOOST_AUTO_TEST_CASE(a_moved_id_s_waiting_operation_keeps_its_new_context_running) {
    asio::io_context from, to;
    cm_id id(from);
    std::optional<error_code> waited;
    id.async_next_event([&](error_code ec, cm_event) { waited = ec; }); // (nothing comes)
    std::optional<error_code> moved;
    id.async_migrate(to.get_executor(), [&](error_code ec) { moved = ec; });
    BOOST_REQUIRE(run_both(from, to, [&] { return moved.has_value(); }));
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    BOOST_TEST(runs_out_of_work(from, idle_bound), "the context the id left waits for its operation");
    to.run_for(100ms);
    BOOST_TEST(!to.stopped(), "run() returned while the moved id's operation waits");
    to.restart();
    id.cancel();
    BOOST_REQUIRE(run_until(to, [&] { return waited.has_value(); }));
    BOOST_TEST((*waited == asio::error::operation_aborted));
    BOOST_TEST(runs_out_of_work(to, idle_bound));
}

// The channel goes with its last id, its fd closed, however idle the context: the reader's
// wait, aborted as it stops, is counted until its handler (which holds the reader) has run.
// (The destroyer thread lets go of the ids' owners when it is done: run() may return before
// that, so the check runs the context again until then, bounded.)
BOOST_AUTO_TEST_CASE(a_context_s_channel_is_closed_after_its_last_id_once_the_context_runs) {
    asio::io_context ctx;
    const auto fds_before = open_fds();
    auto channels_opened = [&] { return fds_opened_since(fds_before).find("rdma_cm") != std::string::npos; };
    {
        cm_id a(ctx), b(ctx);
        BOOST_TEST(channels_opened(), "the context's channel is an fd: " << fds_opened_since(fds_before));
    }
    for (auto until = std::chrono::steady_clock::now() + 10s;
         channels_opened() && std::chrono::steady_clock::now() < until;) {
        BOOST_TEST(runs_out_of_work(ctx, idle_bound));
        std::this_thread::sleep_for(10ms);
    }
    BOOST_TEST(!channels_opened(), "left open: " << fds_opened_since(fds_before));
}

// A channel of the user's own keeps today's promise: its context runs while it is open.
BOOST_AUTO_TEST_CASE(a_user_s_event_channel_keeps_its_context_running_while_open) {
    asio::io_context ctx;
    std::optional<event_channel> channel(std::in_place, ctx);
    ctx.run_for(100ms);
    BOOST_TEST(!ctx.stopped(), "run() returned while the user's channel was open");
    channel.reset();
    BOOST_TEST(runs_out_of_work(ctx));
}
