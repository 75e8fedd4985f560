// Interleavings forced on purpose (issue 15's review findings): a wrapped librdmacm call is
// held at a gate (support/faults.cpp) while another thread does what races it, then let
// go. Each case failed on the design before (the commit that added it says how) and
// checks what the new design makes impossible.
#include "support/faults.hpp"
#include "support/fixture.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <future>
#include <thread>

using namespace rdmacm;
using namespace rdmacm::test;

namespace {

// An id whose address is resolved (no listener needed): the start of most cases.
void resolve_address(asio::io_context& ctx, cm_id& id) {
    std::optional<error_code> r;
    id.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { r = ec; });
    BOOST_REQUIRE(run_until(
        ctx, [&] { return r.has_value(); }, 10s));
    BOOST_REQUIRE_MESSAGE(!*r, r->message());
}

// Runs both contexts (on this thread) until `done()`, at most `limit`.
template <typename Predicate>
bool run_both(asio::io_context& a, asio::io_context& b, Predicate done,
              std::chrono::steady_clock::duration limit = 10s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        a.poll();
        b.run_one_for(5ms);
    }
    a.restart();
    b.restart();
    return done();
}

// `call`, made on thread S by `make`, is held at its gate while the id is closed on this
// thread: the id must not be destroyed under it, and must be once the call has returned.
template <typename Make>
void close_during(const char* call, Make make) {
    channel_fixture f;
    cm_id id(*f.channel);
    resolve_address(f.ctx, id);
    rdma_cm_id* raw = id.native_handle();
    faults::gate held(call, raw);
    std::thread s([&] { make(id); });
    BOOST_REQUIRE_MESSAGE(held.wait_entered(), call << " was never made");
    id.close();
    // Before: the destroyer destroyed the id at once, under the held call.
    BOOST_TEST(!faults::wait_calls("rdma_destroy_id", raw, 1, 500ms), "destroyed while " << call << " ran on it");
    held.release();
    s.join();
    BOOST_TEST(!held.destroyed_while_held());
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 10s), "never destroyed after " << call << " returned");
    run_until(
        f.ctx, [] { return false; }, 100ms); // what the call's end posted
}

} // namespace

// Finding 1: a librdmacm call of an operation (made outside the id's lock) racing close().
BOOST_AUTO_TEST_CASE(close_waits_for_an_operations_call) {
    close_during("rdma_resolve_route", [](cm_id& id) { id.async_resolve_route(2s, [](error_code) {}); });
}

// Finding 1: the same for the synchronous calls made under call_guard.
BOOST_AUTO_TEST_CASE(close_waits_for_a_guarded_call) {
    close_during("rdma_create_qp", [](cm_id& id) {
        auto attr = rc_qp_attr();
        error_code ec;
        id.create_qp(attr, nullptr, ec); // fails (EBADF, closed meanwhile) or not: no matter
    });
}

// Findings 7 and 16: a blocking next_event of synchronous mode on thread A, close() on
// another: the call returns (operation_aborted), the id is destroyed, and destroys of
// other ids are not held up behind it.
BOOST_AUTO_TEST_CASE(close_wakes_a_blocking_next_event) {
    channel_fixture f;
    cm_id id(*f.channel);
    std::optional<error_code> moved;
    id.async_migrate(synchronous, [&](error_code ec) { moved = ec; });
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return moved.has_value(); }, 10s));
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    rdma_cm_id* raw = id.native_handle();
    auto blocked = std::async(std::launch::async, [&] {
        error_code ec;
        id.next_event(-1ms, ec);
        return ec;
    });
    BOOST_REQUIRE(blocked.wait_for(300ms) == std::future_status::timeout); // waiting for an event
    id.close();
    if (blocked.wait_for(10s) != std::future_status::ready) {
        BOOST_ERROR("close() did not end a blocking next_event");
        std::quick_exit(1); // the thread never returns: nothing else can be checked
    }
    auto ec = blocked.get();
    BOOST_TEST((ec == asio::error::operation_aborted), ec.message());
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 10s));
    cm_id other(*f.channel);
    rdma_cm_id* other_raw = other.native_handle();
    other.close();
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", other_raw, 1, 10s), "destroys stalled");
}

// Finding 2b: a handler run by a channel's reader closes ids and waits for them to be
// destroyed (what shard_pool::stop() does with its listeners and connections, then joins):
// the destroys must not need that reader meanwhile.
BOOST_AUTO_TEST_CASE(destroying_never_waits_for_a_reader) {
    channel_fixture f;
    listener l(*f.channel);
    l.bind(device_endpoint());
    l.listen();
    cm_id x(*f.channel), other(*f.channel);
    rdma_cm_id* other_raw = other.native_handle();
    std::optional<bool> destroyed;
    x.async_resolve_address(device_endpoint(1), 2s, [&](error_code) {
        l.close();     // destroyed first: by the one destroyer thread
        other.close(); // then this one
        destroyed = faults::wait_calls("rdma_destroy_id", other_raw, 1, 5s);
    });
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return destroyed.has_value(); }, 20s));
    BOOST_TEST(*destroyed, "destroys stalled while a handler of the channel's reader waited for one");
}

// Finding 4: a handler that throws leaves its channel's reader reading: the exception
// leaves run() as Asio's do, and the other ids of the channel still get their events.
// On a strand (an io_context's executor catches what a handler it runs inline throws,
// a strand's does not): the reader runs inside the channel's strand, so the ids'
// handlers run inline in its read.
BOOST_AUTO_TEST_CASE(a_throwing_handler_leaves_the_reader_reading) {
    asio::io_context ctx;
    auto strand = asio::make_strand(ctx);
    event_channel channel(strand);
    cm_id a(channel), b(channel);
    bool thrown = false;
    a.async_resolve_address(device_endpoint(1), 2s,
                            [](error_code) { throw std::runtime_error("thrown by a handler"); });
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!thrown && std::chrono::steady_clock::now() < deadline) {
        try {
            ctx.run_one_for(10ms);
        } catch (const std::runtime_error&) {
            thrown = true;
        }
    }
    ctx.restart();
    BOOST_REQUIRE(thrown);
    std::optional<error_code> r;
    b.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { r = ec; });
    BOOST_TEST(run_until(
                   ctx, [&] { return r.has_value(); }, 10s),
               "the channel went deaf");
}

// Finding 5: an operation started while its id moves (deferred until the move ends) is
// cancelled when its slot says so, without waiting for the move.
BOOST_AUTO_TEST_CASE(an_operation_deferred_by_a_move_is_cancellable) {
    channel_fixture f;
    asio::io_context other_ctx;
    event_channel other(other_ctx);
    cm_id id(*f.channel);
    run_until(
        f.ctx, [] { return false; }, 100ms); // the channel's first read: the reader idle
    rdma_cm_id* raw = id.native_handle();
    faults::gate held("rdma_migrate_id", raw);
    std::optional<error_code> moved;
    std::thread m([&] { id.async_migrate(other, [&](error_code ec) { moved = ec; }); });
    BOOST_REQUIRE(held.wait_entered());
    asio::cancellation_signal cancel;
    std::optional<error_code> waited;
    id.async_next_event(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, cm_event) { waited = ec; }));
    cancel.emit(asio::cancellation_type::terminal);
    bool done = run_until(
                    f.ctx, [&] { return waited.has_value(); }, 3s) ||
                run_until(
                    other_ctx, [&] { return waited.has_value(); }, 100ms);
    held.release();
    m.join();
    BOOST_TEST(done, "a cancelled operation waited for the move");
    BOOST_TEST(run_both(f.ctx, other_ctx, [&] { return moved.has_value() && waited.has_value(); }));
    if (waited) BOOST_TEST((*waited == asio::error::operation_aborted), waited->message());
}

// Finding 9: the channel an id moves to loses its last other owner while the move is
// made: the id's events on it are still read.
BOOST_AUTO_TEST_CASE(a_move_keeps_its_target_channel_reading) {
    channel_fixture f;
    asio::io_context other_ctx;
    std::optional<event_channel> other(std::in_place, other_ctx);
    cm_id id(*f.channel);
    run_until(
        f.ctx, [] { return false; }, 100ms); // the channel's first read: the reader idle
    rdma_cm_id* raw = id.native_handle();
    faults::gate held("rdma_migrate_id", raw);
    std::optional<error_code> moved;
    std::thread m([&] { id.async_migrate(*other, [&](error_code ec) { moved = ec; }); });
    BOOST_REQUIRE(held.wait_entered());
    other.reset(); // its user lets go of the channel: the moving id still needs it
    held.release();
    m.join();
    BOOST_REQUIRE(run_both(f.ctx, other_ctx, [&] { return moved.has_value(); }));
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    std::optional<error_code> r;
    id.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { r = ec; });
    BOOST_TEST(run_both(f.ctx, other_ctx, [&] { return r.has_value(); }), "the moved id's events were never read");
}

// Finding 6: connection requests nobody accepts are bounded by listen's backlog; those
// beyond it are rejected (the peer learns at once) instead of queueing without limit.
BOOST_AUTO_TEST_CASE(the_backlog_bounds_unaccepted_requests) {
    channel_fixture f;
    listener l(*f.channel);
    l.bind(device_endpoint());
    l.listen(2);
    std::vector<std::unique_ptr<cm_id>> clients;
    std::vector<std::optional<error_code>> results(5);
    asio::cancellation_signal cancel;
    for (std::size_t i = 0; i < results.size(); ++i) {
        clients.push_back(std::make_unique<cm_id>(*f.channel));
        async_connect(*clients.back(), device_endpoint(l.local_endpoint().port()), with_qp(),
                      [&, i](error_code ec, cm_event) { results[i] = ec; });
    }
    auto refused = [&] { return std::count_if(results.begin(), results.end(), [](auto& r) { return r && *r; }); };
    BOOST_TEST(run_until(
                   f.ctx, [&] { return refused() == 3; }, 60s),
               "refused: " << refused() << " of 5, want 3");
    // The two kept wait for an accept; nothing more does.
    std::vector<connection_request> kept;
    for (int i = 0; i < 3; ++i) {
        std::optional<error_code> got;
        asio::steady_timer timeout(f.ctx, 1s);
        l.async_accept(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, connection_request r) {
            got = ec;
            if (!ec) kept.push_back(std::move(r));
        }));
        timeout.async_wait([&](error_code ec) {
            if (!ec) cancel.emit(asio::cancellation_type::terminal);
        });
        BOOST_REQUIRE(run_until(
            f.ctx, [&] { return got.has_value(); }, 10s));
        timeout.cancel();
    }
    BOOST_TEST(kept.size() == 2u);
}

// Finding 2a: the shipped sharded-server pattern. A request is placed inline in the
// listener's read (its id's migration to the shard goes on by way of the accepting
// context), and a stop() already queued on that context runs first: it closes the moving
// id and joins the shards — which must run out of work without that context's help.
BOOST_AUTO_TEST_CASE(stop_on_the_accepting_thread_returns) {
    asio::io_context accept_ctx;
    event_channel channel(accept_ctx);
    listener l(channel);
    l.bind(device_endpoint());
    l.listen();
    std::promise<void> stopped;
    std::optional<shard_pool> pool;
    // The policy runs inline in the listener's read, before the request's migration.
    pool.emplace(1, [&](std::span<const std::size_t>, const connection_request&) -> std::size_t {
        asio::post(accept_ctx, [&] {
            pool->stop();
            stopped.set_value();
        });
        return 0;
    });
    pool->async_serve(
        l, [](connection) -> asio::awaitable<void> { co_return; }, [](error_code) {});
    std::thread accepting([&] { accept_ctx.run_for(30s); });
    asio::io_context client_ctx;
    event_channel client_channel(client_ctx);
    cm_id client(client_channel);
    async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), [](error_code, cm_event) {});
    auto done = stopped.get_future();
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (done.wait_for(0s) != std::future_status::ready && std::chrono::steady_clock::now() < deadline)
        client_ctx.run_one_for(10ms);
    if (done.wait_for(0s) != std::future_status::ready) {
        BOOST_ERROR("shard_pool::stop() on the accepting thread never returned");
        std::quick_exit(1); // that thread is stuck in join(): nothing else can be checked
    }
    l.close();
    client.close();
    accept_ctx.stop();
    accepting.join();
}

// Finding 12: rdma_disconnect of an id still connecting can block (siw: up to its 10 s MPA
// time-out); async_disconnect must return at once all the same, whatever the call does.
BOOST_AUTO_TEST_CASE(disconnecting_a_connecting_id_never_blocks_the_caller) {
    channel_fixture f;
    asio::io_context unread; // never run: the request is never read, the client stays connecting
    event_channel server_channel(unread);
    listener l(server_channel);
    l.bind(device_endpoint());
    l.listen();
    cm_id id(*f.channel);
    rdma_cm_id* raw = id.native_handle();
    std::optional<error_code> connected, disconnected;
    async_connect(id, device_endpoint(l.local_endpoint().port()), with_qp(),
                  [&](error_code ec, cm_event) { connected = ec; });
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return faults::calls("rdma_connect", raw) == 1 || connected.has_value(); }, 10s));
    run_until(
        f.ctx, [&] { return connected.has_value(); }, 200ms);
    BOOST_REQUIRE_MESSAGE(!connected, "the connect ended: " << connected->message()); // still connecting
    faults::gate held("rdma_disconnect", raw);
    auto initiated = std::async(std::launch::async, [&] {
        auto start = std::chrono::steady_clock::now();
        id.async_disconnect([&](error_code ec) { disconnected = ec; });
        return std::chrono::steady_clock::now() - start;
    });
    bool returned = initiated.wait_for(10s) == std::future_status::ready; // held: it never returns
    BOOST_TEST(held.wait_entered(5s), "rdma_disconnect was never made");
    held.release();
    auto took = initiated.get();
    BOOST_TEST(returned, "async_disconnect blocked in rdma_disconnect ("
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms)");
    id.close(); // its operations end (a disconnect while connecting waits for no event)
    // Destroyed once the call has returned (siw: up to 10 s), never under it.
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 30s), "never destroyed");
    BOOST_TEST(run_until(
        f.ctx, [&] { return disconnected.has_value() && connected.has_value(); }, 30s));
}
