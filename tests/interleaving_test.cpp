// Interleavings forced on purpose (the threading review's findings, docs/internals.md): a
// wrapped librdmacm call is held at a gate (support/faults.cpp) while another thread does
// what races it, then let go. Each case failed on the design before (the commit that added
// it says how) and checks what the new design makes impossible.
#include "support/connection_pair.hpp"
#include "support/faults.hpp"
#include "support/fixture.hpp"
#include "support/noting_executor.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/execution/blocking.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/require.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <future>
#include <optional>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

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

// A connection on `f`'s channel, with a buffer registered for the client's receives.
struct client_with_buffer {
    listener l;
    connection_pair p;
    std::vector<std::byte> buffer = std::vector<std::byte>(64);
    std::optional<memory_region> mr;
    explicit client_with_buffer(channel_fixture& f) : l(make_listener(*f.channel)) {
        run(f.ctx, connect_pair(l, *f.channel, p));
        mr.emplace(p.client_qp->pd(), buffer);
    }
    template <typename Handler>
    void receive(Handler h) {
        p.client_qp->async_receive(*mr, buffer, std::move(h));
    }
};

// Runs `act` on a thread of its own while the client queue pair's next ibv_modify_qp (its
// flush) is held at the gate; once it is held, `meanwhile`, then 200 ms of the context.
// Whether the gate was reached, and what `early()` said at the end of those 200 ms.
struct flush_held {
    bool entered;
    bool early;
};
template <typename Act, typename Meanwhile, typename Early>
flush_held while_the_flush_is_held(channel_fixture& f, client_with_buffer& c, Act act, Meanwhile meanwhile,
                                   Early early) {
    faults::gate held("ibv_modify_qp", c.p.client_qp->native_handle());
    std::thread actor(act);
    const bool entered = held.wait_entered();
    if (entered) meanwhile();
    run_until(
        f.ctx, [] { return false; }, 200ms);
    const bool was_early = early();
    held.release();
    actor.join();
    return {entered, was_early};
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

// A queue pair whose id is closed once rdma_create_qp made it, before the id took it: the
// constructor fails (not_open), and the id, which keeps it, destroys the queue pair before
// the completion queue it uses — the other way round, the completion queue's destroy fails
// (EBUSY) and it stays (a review of 2026-12-07 feared so; this says it does not happen).
BOOST_AUTO_TEST_CASE(a_queue_pair_whose_id_closes_as_it_is_made_leaves_nothing) {
    const int failed = faults::calls("ibv_destroy_cq failed");
    error_code made;
    close_during("rdma_create_qp returned", [&](cm_id& id) {
        try {
            queue_pair qp(id);
        } catch (const boost::system::system_error& e) {
            made = e.code();
        }
    });
    BOOST_TEST((made == errc::not_open), made.message());
    BOOST_TEST(faults::calls("ibv_destroy_cq failed") == failed, "a completion queue was left behind");
}

// Findings 7 and 16: a blocking next_event of synchronous mode on thread A, close() on
// another: the call returns (operation_aborted), the id is destroyed, and destroys of
// other ids are not held up behind it.
BOOST_AUTO_TEST_CASE(close_wakes_a_blocking_next_event) {
    channel_fixture f;
    cm_id id(*f.channel);
    std::optional<error_code> moved;
    id.async_enter_synchronous_mode([&](error_code ec) { moved = ec; });
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

// A reader arms its wait after its pass, so that the pass's handlers come first (src/
// fd_reader.hpp): an event that comes once the pass's last read found nothing, before the
// wait is armed, still wakes the next pass. Held there — the channel's read that found
// nothing, at the --wrap gate — while another id's event arrives on the channel.
BOOST_AUTO_TEST_CASE(an_event_between_a_pass_s_last_read_and_its_wait_is_read) {
    channel_fixture f;
    cm_id a(*f.channel), b(*f.channel);
    rdma_event_channel* ch = f.channel->native_handle();
    // The reader's first pass made (it found nothing), and whatever it queued: idle.
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return faults::calls("rdma_get_cm_event", ch) >= 1; }, 10s));
    run_until(
        f.ctx, [] { return false; }, 100ms);
    faults::gate held("rdma_get_cm_event found nothing", ch);
    std::optional<error_code> ra, rb;
    a.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { ra = ec; });
    std::thread t([&] {
        run_until(
            f.ctx, [&] { return rb.has_value(); }, 20s);
    });
    const bool entered = held.wait_entered(); // a's event read (its handler run), then nothing
    if (entered) {
        b.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { rb = ec; });
        pollfd p{ch->fd, POLLIN, 0};
        BOOST_TEST(::poll(&p, 1, 10'000) == 1, "b's event never reached the channel");
    }
    held.release();
    t.join();
    BOOST_REQUIRE(entered);
    BOOST_TEST((ra && !*ra), "a's resolve");
    BOOST_TEST(rb.has_value(), "b's event, on the channel before the wait was armed, was never read");
    BOOST_TEST((rb && !*rb));
}

// Fresh review F4: a work request posted once the queue pair is in error (a cancellation
// told the device to flush: ibv_modify_qp, held at the gate) is never posted; it completes
// in its turn, after the receive posted before it, which the device still holds. Before, it
// was refused at once and completed first: a user taking that to mean the older receive was
// done would free its buffer while the device could still write into it.
BOOST_AUTO_TEST_CASE(a_post_to_a_queue_pair_in_error_completes_after_the_work_before_it) {
    channel_fixture f;
    client_with_buffer c(f);
    std::vector<std::pair<char, error_code>> order;
    asio::cancellation_signal cancel_a;
    c.receive(asio::bind_cancellation_slot(cancel_a.slot(),
                                           [&](error_code ec, std::size_t) { order.emplace_back('a', ec); }));
    const auto [entered, early] = while_the_flush_is_held(
        f, c, [&] { cancel_a.emit(asio::cancellation_type::terminal); },
        [&] { c.receive([&](error_code ec, std::size_t) { order.emplace_back('b', ec); }); },
        [&] { return !order.empty(); });
    BOOST_REQUIRE_MESSAGE(entered, "the cancellation never put the queue pair in the error state");
    BOOST_TEST(!early, "a handler ran while the device still held the first receive");
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return order.size() == 2; }, 10s));
    BOOST_TEST(order[0].first == 'a');
    BOOST_TEST((order[0].second == asio::error::operation_aborted), order[0].second.message());
    BOOST_TEST(order[1].first == 'b');
    BOOST_TEST((order[1].second == error_code(IBV_WC_WR_FLUSH_ERR, work_completion_category())),
               order[1].second.message());
}

// Fresh review F2: the reader of an id's channel on context A takes an event's handler for
// the id, whose executor is on context B, and hands it over to B after its locks — here
// held at the gate in the queue pair's flush, which comes first. The user closes the id
// and destroys B meanwhile. B's destruction waits for the hand-over in progress now (a
// call into B, as the reader's own posts to its strand are); before, B was destroyed under
// it, and the post that followed went into freed memory.
BOOST_AUTO_TEST_CASE(destroying_a_context_waits_for_a_hand_over_into_it) {
    channel_fixture f; // the server, on f.ctx (run here)
    auto l = make_listener(*f.channel);
    asio::io_context a; // reads the client's channel, on a thread of its own
    auto a_work = asio::make_work_guard(a);
    std::thread a_thread([&] { a.run(); });
    auto b = std::make_unique<asio::io_context>(); // the client id's handlers (run here)
    std::optional<event_channel> client_channel(std::in_place, a);
    connection_pair p;
    p.client.emplace(b->get_executor(), *client_channel);
    int ready = 0;
    auto count = [&](const std::exception_ptr& e) {
        BOOST_TEST(!e);
        ++ready;
    };
    asio::co_spawn(f.ctx, accept_side(l, p, {}), count);
    asio::co_spawn(
        *b,
        [&]() -> asio::awaitable<void> {
            co_await p.client->async_resolve_address(device_endpoint(l.local_endpoint().port()), 2s,
                                                     asio::use_awaitable);
            co_await p.client->async_resolve_route(2s, asio::use_awaitable);
            p.client_qp.emplace(*p.client, queue_pair_options{});
            co_await p.client->async_connect(conn_params{}, asio::use_awaitable);
        },
        count);
    // (30 s: a siw connect under TSan beside a CPU hog took over 10 s.)
    BOOST_REQUIRE(run_both(
        f.ctx, *b, [&] { return ready == 2; }, 30s));

    p.client->async_next_event([](error_code, cm_event) {}); // the peer's DISCONNECTED completes it
    faults::gate held("ibv_modify_qp", p.client_qp->native_handle());
    p.server->async_disconnect([](error_code) {});
    const bool entered = held.wait_entered(); // on a: the event's handler taken, the flush first
    std::atomic<bool> destroyed{false};
    std::thread destroyer;
    bool early = false;
    if (entered) {
        p.client_qp->close();
        p.client->close();
        destroyer = std::thread([&] {
            b.reset();
            destroyed = true;
        });
        std::this_thread::sleep_for(300ms);
        early = destroyed;
    }
    held.release();
    if (destroyer.joinable()) destroyer.join();
    BOOST_REQUIRE_MESSAGE(entered, "the peer's DISCONNECTED never reached the client's flush");
    BOOST_TEST(!early, "the id's context was destroyed while a hand-over into it was in progress");
    p.client_qp.reset();
    p.client.reset();
    client_channel.reset();
    a_work.reset();
    a_thread.join();
}

// The third review's D1: the hand-over above counts a call into B while it hands the event
// over; a handler with an executor of its own, A's, which the reader runs, would run inline
// meanwhile — and one that destroys B would wait, in B's shutdown, for the call its own
// thread was making: a deadlock. Such a handler goes by way of B now, as Asio's own
// completions do, and runs on A after the call ended. (No gate: the interleaving is the
// thread's own.)
BOOST_AUTO_TEST_CASE(a_handler_may_destroy_the_context_its_hand_over_came_into) {
    asio::io_context a; // reads the id's channel, on a thread of its own
    auto a_work = asio::make_work_guard(a);
    std::thread a_thread([&] { a.run(); });
    auto b = std::make_unique<asio::io_context>(); // the id's, on a thread of its own
    auto b_work = asio::make_work_guard(*b);
    std::thread b_thread([&] { b->run(); });
    std::optional<event_channel> channel(std::in_place, a);
    std::optional<cm_id> id(std::in_place, b->get_executor(), *channel);
    std::promise<error_code> resolved;
    id->async_resolve_address(device_endpoint(1), 2s, asio::bind_executor(a, [&](error_code ec) {
                                  id->close();
                                  b_work.reset();
                                  b->stop();
                                  b_thread.join();
                                  b.reset(); // waits for the calls into b in progress
                                  resolved.set_value(ec);
                              }));
    auto result = resolved.get_future();
    if (result.wait_for(20s) != std::future_status::ready) {
        BOOST_ERROR("destroying the id's context from its handler never returned");
        std::quick_exit(1); // the reader's thread is stuck in it: nothing else can be checked
    }
    const auto ec = result.get();
    BOOST_TEST(!ec, ec.message());
    id.reset();
    channel.reset();
    a_work.reset();
    a_thread.join();
}

namespace {
// An id of context `b` moves to `to`, its rdma_migrate_id held at the gate (and failed
// with EINVAL when `fail`) while another thread destroys `b`; released 300 ms later. Since
// the fourth review, the move's call into `b` is entered before the kernel call: the
// destroy waits for it, and the move decides, `b` shutting down, where it ends. False
// when the call never came to the gate.
template <typename Handler>
bool move_while_its_context_is_destroyed(std::unique_ptr<asio::io_context>& b, cm_id& id, event_channel& to,
                                         Handler handler, bool fail = false) {
    faults::gate held("rdma_migrate_id", id.native_handle());
    if (fail) faults::inject("rdma_migrate_id", EINVAL);
    std::thread mover([&] { id.async_migrate(to, std::move(handler)); });
    const bool entered = held.wait_entered(); // the call made on the mover's thread: b's reader idle
    std::thread destroyer;
    if (entered) destroyer = std::thread([&] { b.reset(); });
    std::this_thread::sleep_for(300ms);
    held.release();
    mover.join();
    if (destroyer.joinable()) destroyer.join();
    faults::clear();
    return entered;
}

// Sets `flag` when the last copy of it goes: a handler holding one was let go of.
struct on_last_copy {
    std::atomic<bool>* flag;
    ~on_last_copy() { *flag = true; }
};
} // namespace

// The third review's F2, its second case: the user destroys the context an id is leaving
// while the move's rdma_migrate_id is being made (held at the gate). Once the call was made,
// the move's step was posted to that context's executor — freed by then. The post is a call
// into the context now, entered before rdma_migrate_id under the id's lock, which the
// context's shutdown waits for; once that shutdown has begun, the move goes on from here to
// its target, where its handler runs. (The plain build may survive the post into freed
// memory; the ASan build fails on it.)
BOOST_AUTO_TEST_CASE(a_move_goes_on_when_the_context_it_leaves_is_destroyed_during_its_call) {
    asio::io_context target; // the move's target (run here)
    std::optional<event_channel> target_channel(std::in_place, target);
    auto b = std::make_unique<asio::io_context>(); // the id's, never run after its resolve
    std::optional<event_channel> channel(std::in_place, *b);
    std::optional<cm_id> id(std::in_place, *channel);
    resolve_address(*b, *id);
    std::optional<error_code> moved;
    BOOST_REQUIRE_MESSAGE(
        move_while_its_context_is_destroyed(b, *id, *target_channel, [&](error_code ec) { moved = ec; }),
        "the move never made its rdma_migrate_id");
    BOOST_REQUIRE(run_until(
        target, [&] { return moved.has_value(); }, 10s));
    BOOST_TEST(!*moved, moved->message());
    std::optional<error_code> routed; // the id works on its target
    id->async_resolve_route(2s, [&](error_code ec) { routed = ec; });
    BOOST_REQUIRE(run_until(
        target, [&] { return routed.has_value(); }, 10s));
    BOOST_TEST(!*routed, routed->message());
    id.reset();
    channel.reset();
}

namespace {
// A move whose end would run on the context destroyed during its call has nowhere to run:
// its handler, bound to that context (work tracked there: a coroutine's is so), is let go
// of, never run, while the shutdown still waits for the move's call. `fail`: the call
// fails (the id stays), its target on another context; else it is made, to a channel of
// that very context.
void a_move_with_nowhere_to_end(bool fail) {
    asio::io_context other;
    std::optional<event_channel> other_channel(std::in_place, other);
    auto b = std::make_unique<asio::io_context>(); // the id's, never run after its resolve
    std::optional<event_channel> channel(std::in_place, *b), second(std::in_place, *b);
    std::optional<cm_id> id(std::in_place, *channel);
    resolve_address(*b, *id);
    std::atomic<bool> ran{false}, let_go{false};
    auto handler = asio::bind_executor(
        b->get_executor(), [&ran, guard = std::make_shared<on_last_copy>(&let_go)](error_code) { ran = true; });
    BOOST_REQUIRE_MESSAGE(
        move_while_its_context_is_destroyed(b, *id, fail ? *other_channel : *second, std::move(handler), fail),
        "the move never made its rdma_migrate_id");
    BOOST_TEST(!ran);
    BOOST_TEST(let_go, "the migrate handler is still held");
    id.reset();
    channel.reset();
    second.reset();
    other.run_for(100ms); // (nothing of the id's runs there)
    BOOST_TEST(!ran);
}
} // namespace

// The fourth review's R1: the target channel on the very context destroyed (two channels of
// one io_context). Before: the end ran here once the context was freed, and bound the id to
// it (use_service of a freed io_context): the ASan build failed on rxe and siw; the plain
// build survived.
BOOST_AUTO_TEST_CASE(a_move_to_a_channel_of_a_context_destroyed_during_its_call_lets_go_of_its_handler) {
    a_move_with_nowhere_to_end(false);
}

// The fourth review's R2: the call fails, so the id stays on the context destroyed. Before:
// its end ran here, and dropped the handler after the context was freed (its work guard
// on it).
BOOST_AUTO_TEST_CASE(a_failed_move_from_a_context_destroyed_during_its_call_lets_go_of_its_handler) {
    a_move_with_nowhere_to_end(true);
}

// close() hands a work request's buffer back only once the device has let go of it: the
// queue pair goes to the error state first, and the handler completes from the device's
// flush. Held at the gate in that ibv_modify_qp, the receive's handler has not run (before
// the fix it ran at once, the queue pair still receiving into the buffer).
BOOST_AUTO_TEST_CASE(a_closed_queue_pair_s_receive_completes_after_the_device_let_go) {
    channel_fixture f;
    client_with_buffer c(f);
    auto& p = c.p;
    std::optional<error_code> received;
    c.receive([&](error_code ec, std::size_t) { received = ec; });
    const auto [entered, early] = while_the_flush_is_held(
        f, c, [&] { p.client_qp->close(); }, [] {}, [&] { return received.has_value(); });
    BOOST_REQUIRE_MESSAGE(entered, "close() never put the queue pair in the error state");
    BOOST_TEST(!early, "the receive's handler ran before the device was told to let go of its buffer");
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return received.has_value(); }, 10s));
    BOOST_TEST((*received == asio::error::operation_aborted), received->message());
}

// The whole-core review's W3: the device refusing the error state. A terminal cancellation
// of a posted receive puts the queue pair in the error state so that the device lets go of
// the buffer; when that ibv_modify_qp fails, the buffer is still the device's: the receive
// is not handed back (no grace, no operation_aborted), and completes when the peer's message
// lands in it. Before: operation_aborted after the 100 ms grace, the peer's message then
// written into the buffer handed back (rxe and siw).
BOOST_AUTO_TEST_CASE(a_receive_whose_flush_the_device_refuses_stays_the_device_s) {
    channel_fixture f;
    client_with_buffer c(f);
    std::optional<error_code> received;
    std::size_t bytes = 0;
    asio::cancellation_signal cancel;
    c.receive(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, std::size_t n) {
        received = ec;
        bytes = n;
    }));
    faults::inject("ibv_modify_qp", ENOMEM, 1);
    cancel.emit(asio::cancellation_type::terminal);
    run_until(
        f.ctx, [&] { return received.has_value(); }, 500ms);
    BOOST_TEST(faults::clear() == 0, "the cancellation made no ibv_modify_qp");
    BOOST_TEST(!received, "handed back while its buffer is the device's: " << received->message());
    std::array<char, 5> hello{'h', 'e', 'l', 'l', 'o'};
    memory_region hello_mr(c.p.server_qp->pd(), std::as_writable_bytes(std::span(hello)));
    std::optional<error_code> sent;
    c.p.server_qp->async_send(hello_mr, std::as_bytes(std::span(hello)),
                              [&](error_code ec, std::size_t) { sent = ec; });
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return received.has_value() && sent.has_value(); }, 10s));
    BOOST_TEST(!*sent, sent->message());
    BOOST_TEST(!*received, received->message()); // done before any flush: reported, not lost
    BOOST_TEST(bytes == 5u);
    BOOST_TEST(std::memcmp(c.buffer.data(), hello.data(), hello.size()) == 0);
}

namespace {
// The next `times` re-arms of `cq` refused by its device: ibv_req_notify_cq is an inline
// call through the device context's ops (no symbol to wrap), swapped here while the test
// runs, restored at the end. Made while no other thread uses the device (a single-threaded
// test between its runs of the context).
class refused_arms {
public:
    refused_arms(ibv_cq* cq, int times) : ops_(cq->context->ops), saved_(ops_.req_notify_cq) {
        target_ = cq;
        original_ = saved_;
        left_ = times;
        refused_ = 0;
        made_ = 0;
        ops_.req_notify_cq = &refuse;
    }
    ~refused_arms() { ops_.req_notify_cq = saved_; }
    refused_arms(const refused_arms&) = delete;
    refused_arms& operator=(const refused_arms&) = delete;
    int refused() const { return refused_; }
    int made() const { return made_; } // of `cq`, after the refusals

private:
    static int refuse(ibv_cq* cq, int solicited_only) {
        if (cq == target_ && left_ > 0) {
            --left_;
            ++refused_;
            return ENOMEM;
        }
        if (cq == target_) ++made_;
        return original_(cq, solicited_only);
    }
    ibv_context_ops& ops_;
    decltype(ibv_context_ops::req_notify_cq) saved_;
    static inline ibv_cq* target_ = nullptr;
    static inline decltype(ibv_context_ops::req_notify_cq) original_ = nullptr;
    static inline std::atomic<int> left_ = 0, refused_ = 0, made_ = 0;
};
} // namespace

// Review W4: the re-arm after a wake-up (ibv_req_notify_cq) refused by the device must not
// leave the queue pair deaf: the pass tries again after a pause, until the device takes it
// (here the third time: the third message is received after an arm the device made).
// Before: the second message's receive never completed (rxe and siw).
BOOST_AUTO_TEST_CASE(a_re_arm_the_device_refuses_is_tried_again) {
    channel_fixture f;
    client_with_buffer c(f);
    std::array<char, 5> hello{'h', 'e', 'l', 'l', 'o'};
    memory_region hello_mr(c.p.server_qp->pd(), std::as_writable_bytes(std::span(hello)));
    refused_arms refusing(c.p.client_qp->native_handle()->recv_cq, 2);
    for (int message = 1; message <= 3; ++message) {
        std::optional<error_code> received, sent;
        c.receive([&](error_code ec, std::size_t) { received = ec; });
        c.p.server_qp->async_send(hello_mr, std::as_bytes(std::span(hello)),
                                  [&](error_code ec, std::size_t) { sent = ec; });
        BOOST_TEST_REQUIRE(run_until(
                               f.ctx, [&] { return received.has_value() && sent.has_value(); }, 5s),
                           "message " << message << " never received (" << refusing.refused() << " re-arm refused)");
        BOOST_TEST(!*received, received->message());
    }
    BOOST_TEST(refusing.refused() == 2, "the queue pair's re-arm was refused " << refusing.refused() << " times");
    BOOST_TEST(refusing.made() >= 1, "no re-arm reached the device after the refusals");
}

// The fifth review's F5-8: a move let go of before its end ran (here the end queued on its
// target's context, destroyed unrun: the documentation forbids it, the queue pair must not
// go deaf for it) is abandoned, the id staying on its context, which lives on. Its queue
// pair held its completions while the id moved: abandoned, it hands them over there again.
// Before: the receive never completed (rxe and siw).
BOOST_AUTO_TEST_CASE(a_queue_pair_receives_after_its_id_s_move_is_abandoned) {
    channel_fixture f;
    client_with_buffer c(f);
    std::array<char, 5> hello{'h', 'e', 'l', 'l', 'o'};
    memory_region hello_mr(c.p.server_qp->pd(), std::as_writable_bytes(std::span(hello)));
    std::optional<error_code> received, sent;
    c.receive([&](error_code ec, std::size_t) { received = ec; });
    auto target = std::make_unique<asio::io_context>(); // never run: the move's end waits there
    std::optional<event_channel> target_channel(std::in_place, *target);
    rdma_cm_id* raw = c.p.client->native_handle();
    const int calls = faults::calls("rdma_migrate_id", raw);
    bool moved = false;
    c.p.client->async_migrate(*target_channel, [&](error_code) { moved = true; });
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return faults::calls("rdma_migrate_id", raw) == calls + 1; }, 5s));
    run_until(
        f.ctx, [] { return false; }, 200ms); // the step on the old context: the end posted to the target
    target_channel.reset();
    target.reset(); // the end goes unrun: the move is abandoned
    BOOST_TEST(!moved);
    c.p.server_qp->async_send(hello_mr, std::as_bytes(std::span(hello)),
                              [&](error_code ec, std::size_t) { sent = ec; });
    BOOST_TEST_REQUIRE(run_until(
                           f.ctx, [&] { return received.has_value() && sent.has_value(); }, 5s),
                       "the message was never received (sent: " << sent.has_value() << ")");
    BOOST_TEST(!*received, received->message());
}

// The context shuts down while a close() on another thread tells the device to flush (its
// ibv_modify_qp held at the gate): the receive's handler, destroyed by the shutdown, goes
// only once the device was told — by the shutdown's own call (before: at once, the queue
// pair still receiving into the buffer the handler may own).
BOOST_AUTO_TEST_CASE(a_shutdown_during_a_close_lets_go_of_a_receive_after_the_device_was_told) {
    struct on_destroy {
        std::function<void()> f;
        ~on_destroy() { f(); }
    };
    std::vector<std::byte> buffer(64);
    connection_pair p;
    std::optional<memory_region> mr;
    std::optional<asio::io_context> ctx(std::in_place);
    std::optional<event_channel> channel(std::in_place, *ctx);
    auto l = make_listener(*channel);
    run(*ctx, connect_pair(l, *channel, p));
    mr.emplace(p.client_qp->pd(), buffer);
    ibv_qp* qp = p.client_qp->native_handle();
    const int before = faults::calls("ibv_modify_qp", qp);
    std::atomic<int> told_when_let_go{-1}; // ibv_modify_qp calls made by then
    p.client_qp->async_receive(*mr, buffer, [guard = std::make_shared<on_destroy>([&] {
                                                 told_when_let_go = faults::calls("ibv_modify_qp", qp);
                                             })](error_code, std::size_t) {});
    std::jthread closer; // joined after the gate's end (a failed requirement) released it
    faults::gate held("ibv_modify_qp", qp);
    closer = std::jthread([&] { p.client_qp->close(); });
    BOOST_REQUIRE_MESSAGE(held.wait_entered(), "close() never put the queue pair in the error state");
    channel.reset();
    ctx.reset(); // the shutdown: the receive's handler goes
    BOOST_TEST(told_when_let_go - before == 2,
               "the handler went after " << told_when_let_go - before << " ibv_modify_qp calls (the held one: 1)");
    held.release();
}

// F2: a context's shutdown takes every member's executor, then tells each member in turn. A
// coroutine frame destroyed by one told first (here the handler of another id's
// async_next_event) may hold a queue pair not told yet, whose close() then finds no executor:
// its receive's handler must still go only once the device was told to let go of the buffer
// (before: at once, with no ibv_modify_qp, and the queue pair's own turn found nothing to
// flush). The holder is the context's first id, so the shutdown tells it before the queue
// pair; whether the window was reached is checked, not assumed.
BOOST_AUTO_TEST_CASE(a_queue_pair_closed_inside_the_shutdown_before_its_turn_is_flushed_first) {
    struct on_destroy {
        std::function<void()> f;
        ~on_destroy() { f(); }
    };
    std::vector<std::byte> buffer(64);
    std::optional<asio::io_context> ctx(std::in_place);
    std::optional<event_channel> channel(std::in_place, *ctx);
    std::optional<cm_id> holder(std::in_place, *channel); // the context's first id
    connection_pair p;
    std::optional<memory_region> mr;
    auto l = make_listener(*channel);
    run(*ctx, connect_pair(l, *channel, p));
    mr.emplace(p.client_qp->pd(), buffer);
    ibv_qp* qp = p.client_qp->native_handle();
    const int before = faults::calls("ibv_modify_qp", qp);
    std::atomic<int> told_when_let_go{-1};       // ibv_modify_qp calls made by the time the receive's handler went
    std::atomic<bool> receive_gone_first{false}; // the window missed: the queue pair was told first
    p.client_qp->async_receive(*mr, buffer, [guard = std::make_shared<on_destroy>([&] {
                                                 told_when_let_go = faults::calls("ibv_modify_qp", qp);
                                             })](error_code, std::size_t) {});
    struct frame { // notes whether the receive went already, then lets go of the queue pair
        std::optional<queue_pair> qp;
        std::function<void()> note;
        ~frame() { note(); }
    };
    holder->async_next_event([f = std::make_shared<frame>(std::move(p.client_qp), [&] {
                                  receive_gone_first = told_when_let_go >= 0;
                              })](error_code, cm_event) {});
    channel.reset();
    ctx.reset(); // the shutdown: the holder's handler goes, closing the queue pair
    BOOST_REQUIRE_MESSAGE(!receive_gone_first, "the queue pair was told before the holder: the window was not reached");
    BOOST_TEST(told_when_let_go - before >= 1,
               "the receive's handler went after " << told_when_let_go - before << " ibv_modify_qp calls");
}

// The same close, made while the queue pair's id moves to another context: the move ends
// while the close's ibv_modify_qp is held at its gate. The receive's handler still waits
// for the device (before: the move began the flush's grace on the new context, which handed
// the buffer back 100 ms later, the queue pair not yet in error), and then completes there,
// the old context no longer run (before 3824f43: its flush was polled for only there).
BOOST_AUTO_TEST_CASE(a_queue_pair_closed_while_its_id_moves_is_flushed_where_it_went) {
    channel_fixture f;
    asio::io_context other_ctx;
    event_channel other(other_ctx);
    client_with_buffer c(f);
    auto& p = c.p;
    std::optional<error_code> received;
    bool ran_on_other = false;
    c.receive([&](error_code ec, std::size_t) {
        received = ec;
        ran_on_other = other_ctx.get_executor().running_in_this_thread();
    });
    faults::gate held("ibv_modify_qp", p.client_qp->native_handle());
    std::optional<error_code> moved;
    p.client->async_migrate(other, [&](error_code ec) { moved = ec; });
    std::thread closer([&] { p.client_qp->close(); }); // (the move began first: on this thread)
    const bool entered = held.wait_entered();
    const bool ended = run_both(f.ctx, other_ctx, [&] { return moved.has_value(); });
    run_until(
        other_ctx, [] { return false; }, 300ms); // a grace begun by the move would end meanwhile
    const bool early = received.has_value();
    held.release();
    closer.join();
    BOOST_REQUIRE_MESSAGE(entered, "close() never put the queue pair in the error state");
    BOOST_REQUIRE_MESSAGE(ended, "the move never ended");
    BOOST_TEST(!*moved, moved->message());
    BOOST_TEST(!early, "the receive's handler ran before the device was told to let go of its buffer");
    BOOST_REQUIRE_MESSAGE(run_until(
                              other_ctx, [&] { return received.has_value(); }, 10s),
                          "the flush was never polled for on the new context");
    BOOST_TEST((*received == asio::error::operation_aborted), received->message());
    BOOST_TEST(ran_on_other);
}

// A queue pair closed while its id moves, a completion held for the move, nothing
// outstanding: no poller follows a closed queue pair to the new context, and the old one
// may never run again. The move's end hands what was held over on the new context (before,
// the close's pass and the move's wake-up both went to the old context's reader: destroyed
// unrun there, the completion was never handed over, and the new context, holding the
// queue pair's work for it, never ran out of work — an adversarial review, 2026-12-05).
BOOST_AUTO_TEST_CASE(a_completion_held_by_a_closed_queue_pair_s_move_is_handed_over_where_it_went) {
    std::optional<asio::io_context> old_ctx(std::in_place);
    asio::io_context new_ctx;
    std::optional<event_channel> old_channel(std::in_place, *old_ctx);
    std::optional<event_channel> new_channel(std::in_place, new_ctx);
    auto l = make_listener(*old_channel);
    connection_pair p;
    run(*old_ctx, connect_pair(l, *old_channel, p));
    std::vector<std::byte> cbuf(64), sbuf(64);
    // (Deregistered before the last id on the device goes: librdmacm's protection domain,
    // which they are on, is deallocated with it, and leaks while a region still uses it.)
    std::optional<memory_region> cmr(std::in_place, p.client_qp->pd(), cbuf);
    std::optional<memory_region> smr(std::in_place, p.server_qp->pd(), sbuf);
    std::optional<error_code> received;
    p.client_qp->async_receive(*cmr, cbuf, [&](error_code ec, std::size_t) { received = ec; });
    // Posted, and delivered by the kernel, with neither context run: its completion waits,
    // unread, for the move to begin.
    p.server_qp->async_send(*smr, std::span(sbuf).first(8), [](error_code, std::size_t) {});
    std::this_thread::sleep_for(300ms);
    std::optional<error_code> moved;
    p.client->async_migrate(*new_channel, [&](error_code ec) { moved = ec; });
    old_ctx->poll(); // the move's step, and the completion: held while the id moves
    BOOST_REQUIRE_MESSAGE(!received, "the completion was handed over before the move ended");
    ibv_qp* qp = p.client_qp->native_handle();
    const int told = faults::calls("ibv_modify_qp", qp);
    p.client_qp->close(); // nothing outstanding: what the move held is left
    BOOST_REQUIRE_MESSAGE(faults::calls("ibv_modify_qp", qp) == told,
                          "the receive was still outstanding at the close: the window was not reached");
    BOOST_REQUIRE(run_until(
        new_ctx, [&] { return moved.has_value(); }, 10s));
    BOOST_TEST(!*moved, moved->message());
    // The old context never runs again.
    p.server_qp.reset();
    p.server.reset();
    l.close();
    old_channel.reset();
    old_ctx.reset();
    BOOST_TEST(run_until(
                   new_ctx, [&] { return received.has_value(); }, 2s),
               "the completion held for the move was never handed over");
    if (received) BOOST_TEST(!*received, received->message());
    cmr.reset();
    smr.reset();
    p.client.reset();
    new_channel.reset();
    new_ctx.restart();
    new_ctx.run_for(10s);
    BOOST_TEST(new_ctx.stopped(), "the new context never ran out of work (the queue pair's work held there)");
}

// A handler whose executor asks for blocking.never is queued, never run inside the reader's
// read of its event, though that reader runs on the handler's own io_context: held in
// rdma_get_cm_event with its event queued, the reader lets a function posted meanwhile run
// before the handler (run inline, the handler came first).
BOOST_AUTO_TEST_CASE(a_blocking_never_handler_is_queued_not_run_by_the_reader) {
    std::vector<std::string> order; // on the context's thread only; outlives what the fixture runs
    channel_fixture f;
    cm_id id(*f.channel);
    rdma_event_channel* ch = f.channel->native_handle();
    // The channel's first read made (it found nothing): the gate holds the read of the event.
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return faults::calls("rdma_get_cm_event", ch) >= 1; }, 10s));
    run_until(
        f.ctx, [] { return false; }, 100ms); // and whatever it queued: the reader idle
    faults::gate held("rdma_get_cm_event", ch);
    const auto never = asio::require(f.ctx.get_executor(), asio::execution::blocking.never);
    id.async_resolve_address(device_endpoint(1), 2s,
                             asio::bind_executor(never, [&](error_code) { order.push_back("handler"); }));
    std::thread t([&] {
        run_until(
            f.ctx, [&] { return order.size() == 2; }, 10s);
    });
    const bool entered = held.wait_entered(); // the reader woken by the event: it is queued
    asio::post(f.ctx, [&] { order.push_back("posted"); });
    held.release();
    t.join();
    BOOST_REQUIRE_MESSAGE(entered, "the reader never read the event");
    BOOST_TEST((order == std::vector<std::string>{"posted", "handler"}), "the handler ran inline in the reader");
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

// A synchronous call on an id (create_qp here; reject, bind and listen alike) waits out
// the id's migrate call in progress: librdmacm writes to whichever channel the id has
// (semantics F13/F15). The wait is outside the id's lock, so its reader goes on meanwhile.
BOOST_AUTO_TEST_CASE(a_synchronous_call_waits_out_a_migrate_call) {
    channel_fixture f;
    asio::io_context other_ctx;
    event_channel other(other_ctx);
    cm_id id(*f.channel);
    run(f.ctx, [&]() -> asio::awaitable<void> {
        co_await id.async_resolve_address(device_endpoint(1), 2s, asio::use_awaitable);
        co_await id.async_resolve_route(2s, asio::use_awaitable);
    }());
    rdma_cm_id* raw = id.native_handle();
    faults::gate held("rdma_migrate_id", raw);
    std::optional<error_code> moved;
    std::thread m([&] { id.async_migrate(other, [&](error_code ec) { moved = ec; }); });
    BOOST_REQUIRE(held.wait_entered());
    error_code made;
    std::thread c([&] {
        auto attr = rc_qp_attr();
        id.create_qp(attr, nullptr, made);
    });
    BOOST_TEST(!faults::wait_calls("rdma_create_qp", raw, 1, 300ms), "a queue pair made during the migrate call");
    held.release();
    m.join();
    c.join();
    BOOST_TEST(!made, made.message());
    BOOST_TEST(faults::calls("rdma_create_qp", raw) == 1);
    BOOST_TEST(run_both(f.ctx, other_ctx, [&] { return moved.has_value(); }));
    if (moved) BOOST_TEST(!*moved, moved->message());
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

// Review F4: a move whose id is the last owner of its old channel. The step it posts to the
// old executor must hold that context before the channel goes: the channel's reader holds
// the context's last work, and letting go of the channel first let the context run out of
// work and return from run() before the step came — which then sat on a stopped context,
// the id moving for good, its handler never run. Forced: the id's executor notes the step's
// post and holds it until the old context's run() has returned (at most 1 s).
BOOST_AUTO_TEST_CASE(a_move_from_a_channel_it_was_the_last_to_own_keeps_its_old_context_running) {
    asio::io_context old_ctx;
    context_threads t(1); // the target's context
    std::mutex m;
    std::condition_variable changed;
    bool armed = false, old_returned = false;
    noting_executor<asio::io_context::executor_type> ex(old_ctx.get_executor(), [&] {
        std::unique_lock lock(m);
        if (!std::exchange(armed, false)) return;
        changed.wait_for(lock, 1s, [&] { return old_returned; });
    });
    std::optional<event_channel> target(std::in_place, t[0]);
    std::optional<event_channel> old_channel(std::in_place, old_ctx);
    cm_id id(asio::any_io_executor(ex), *old_channel);
    resolve_address(old_ctx, id);
    old_channel.reset(); // the id is its last owner
    old_ctx.restart();
    std::thread runner([&] {
        old_ctx.run_for(30s); // returns once its work runs out
        std::lock_guard lock(m);
        old_returned = true;
        changed.notify_all();
    });
    std::this_thread::sleep_for(100ms); // the old reader idle: the move's call is made here
    {
        std::lock_guard lock(m);
        armed = true;
    }
    std::promise<error_code> moved;
    id.async_migrate(*target, [&](error_code ec) { moved.set_value(ec); });
    auto done = moved.get_future();
    BOOST_TEST((done.wait_for(10s) == std::future_status::ready), "the move's handler never ran");
    runner.join();
    if (done.wait_for(0s) == std::future_status::ready) BOOST_TEST(!done.get());
    std::promise<error_code> resolved;
    id.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { resolved.set_value(ec); });
    BOOST_TEST((resolved.get_future().wait_for(10s) == std::future_status::ready));
    id.close();
    target.reset();
    t.stop();
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
        l.async_get_request(asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, connection_request r) {
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
    // The two kept clients' connects end with the test (their handlers write to `results`).
    kept.clear();
    for (auto& c : clients) c->close();
    BOOST_TEST(run_until(
        f.ctx, [&] { return std::all_of(results.begin(), results.end(), [](auto& r) { return r.has_value(); }); },
        30s));
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
        l, [](pooled_connection) -> asio::awaitable<void> { co_return; }, [](error_code) {});
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

namespace {
// A connection request read on `accept_ctx`'s listener, not placed yet: its client waits,
// connecting, on `client_ctx`.
struct a_pending_request {
    asio::io_context accept_ctx, client_ctx;
    event_channel accept_channel{accept_ctx}, client_channel{client_ctx};
    listener l{accept_channel};
    cm_id client{client_channel};
    std::optional<connection_request> request;

    a_pending_request() {
        l.bind(device_endpoint());
        l.listen();
        async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), [](error_code, cm_event) {});
        l.async_get_request([this](error_code ec, connection_request r) {
            if (!ec) request.emplace(std::move(r));
        });
        BOOST_REQUIRE(run_both(accept_ctx, client_ctx, [this] { return request.has_value(); }));
    }
};
} // namespace

// Fresh review F1: a placement's move ends on its shard by way of the request's context,
// which a stop() must not wait for (it may be that context's own thread: finding 2a). A
// stop() between the migrate call and the next step let the shard run out of work: the end
// was posted to a stopped context, the handler (its work tracked on shard 0) never ran, and
// stop() never returned. Now the stop completes the placement (pool_stopped) itself.
BOOST_AUTO_TEST_CASE(a_stop_while_a_placement_is_on_its_way_completes_it) {
    a_pending_request r;
    shard_pool pool(2, [](std::span<const std::size_t>, const connection_request&) -> std::size_t { return 1; });
    const auto* placed_id = r.request->id.native_handle();
    std::atomic<int> placed{0};
    std::optional<error_code> result;
    pool.async_place(std::move(*r.request), [&](error_code ec, pooled_connection) {
        result = ec;
        ++placed;
    });
    // The window: the call made here (the listener's reader idle), the move's next step
    // queued on accept_ctx, which nobody runs until the stop has returned.
    BOOST_REQUIRE_EQUAL(faults::calls("rdma_migrate_id", placed_id), 1);
    std::promise<void> stopped;
    std::thread stopper([&] {
        pool.stop();
        stopped.set_value();
    });
    if (stopped.get_future().wait_for(20s) != std::future_status::ready) {
        BOOST_ERROR("shard_pool::stop() never returned");
        std::quick_exit(1); // the stopper is stuck in join(): nothing else can be checked
    }
    stopper.join();
    BOOST_TEST(placed == 1);
    BOOST_TEST((result && *result == errc::pool_stopped), (result ? result->message() : "no result"));
    // The step now runs: its end goes to the stopped shard, never run (destroyed with the
    // pool); the handler is not called again.
    run_both(
        r.accept_ctx, r.client_ctx, [] { return false; }, 200ms);
    BOOST_TEST(placed == 1);
    r.l.close();
    r.client.close();
    run_both(
        r.accept_ctx, r.client_ctx, [] { return false; }, 200ms);
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
    // Where the composed connect stopped, should it not get there: each of its calls made so far.
    auto progress = [&] {
        std::ostringstream out;
        for (const char* call : {"rdma_resolve_addr", "rdma_resolve_route", "rdma_create_qp", "rdma_connect"})
            out << ' ' << call << " x" << faults::calls(call, raw);
        return out.str();
    };
    BOOST_REQUIRE_MESSAGE(
        run_until(
            f.ctx, [&] { return faults::calls("rdma_connect", raw) == 1 || connected.has_value(); }, 10s),
        "async_connect did not reach rdma_connect in 10 s; calls made:" << progress());
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
    // The request goes (rejected): that ends the connect, and with it the call, at once
    // (siw would otherwise hold the call for its 10-s MPA time-out).
    l.close();
    auto took = initiated.get();
    BOOST_TEST(returned, "async_disconnect blocked in rdma_disconnect ("
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms)");
    id.close(); // its operations end (a disconnect while connecting waits for no event)
    // Destroyed once the call has returned (siw: up to 10 s), never under it.
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 30s), "never destroyed");
    BOOST_TEST(run_until(
        f.ctx, [&] { return disconnected.has_value() && connected.has_value(); }, 30s));
}

// Review D3: a connect to an on-link address where no host answers. On iWARP, rdma_connect
// is a blocking kernel TCP connect (siw_cm.c: connect() without O_NONBLOCK) for the SYN
// retries; made inline, it held the io_context's thread that long (a ticker stalled for
// 130 s, the timer meant to cancel it could not run). Now the call is made on a thread of
// its own: the context goes on, a cancellation ends the connect at once, and the id is
// destroyed once the call returns. The test shortens the SYN retries (tcp_syn_retries 2,
// restored after) so that the call returns within seconds (about 7). On rxe the call never blocked:
// the request is sent, and the cancellation ends the wait for its answer.
BOOST_AUTO_TEST_CASE(a_connect_nobody_answers_never_holds_the_context_s_thread) {
    const char* retries_file = "/proc/sys/net/ipv4/tcp_syn_retries";
    std::string saved;
    {
        std::ifstream in(retries_file);
        std::getline(in, saved);
    }
    BOOST_REQUIRE_MESSAGE(!saved.empty(), "cannot read " << retries_file);
    struct restore {
        const char* file;
        std::string value;
        ~restore() { std::ofstream(file) << value << '\n'; }
    } restored{retries_file, saved};
    {
        std::ofstream out(retries_file);
        out << "2\n";
        BOOST_REQUIRE_MESSAGE(out.good(), "cannot write " << retries_file << " (run as root, as in the test bed's VM)");
    }
    channel_fixture f;
    const std::string self = test_device().ipv4;
    const endpoint nobody{asio::ip::make_address(self.substr(0, self.rfind('.')) + ".250"), 4791};
    // Holds the device in librdmacm until the connecting id is gone: that id is destroyed
    // before its queue pair (siw blocks the other order), and were it the device's last,
    // librdmacm's protection domain, still used by the queue pair, would leak (16 bytes).
    listener device_holder = make_listener(*f.channel);
    cm_id id(*f.channel);
    rdma_cm_id* raw = id.native_handle();
    asio::cancellation_signal cancel;
    std::optional<error_code> connected;
    asio::co_spawn(
        f.ctx,
        [&]() -> asio::awaitable<void> {
            co_await id.async_resolve_address(nobody, 2s, asio::use_awaitable);
            co_await id.async_resolve_route(2s, asio::use_awaitable);
            auto attr = rc_qp_attr();
            id.create_qp(attr);
            auto [ec, ev] = co_await id.async_connect(
                conn_params{}, asio::bind_cancellation_slot(cancel.slot(), asio::as_tuple(asio::use_awaitable)));
            connected = ec;
        },
        asio::detached);
    // A ticker on the same context: the longest gap between its ticks is how long the
    // context's thread was held.
    asio::steady_timer ticker(f.ctx);
    auto last = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration longest{};
    bool ticking = true;
    std::function<void()> tick = [&] {
        ticker.expires_after(50ms);
        ticker.async_wait([&](error_code) {
            const auto now = std::chrono::steady_clock::now();
            longest = std::max(longest, now - last);
            last = now;
            if (ticking) tick();
        });
    };
    tick();
    BOOST_REQUIRE_MESSAGE(
        run_until(
            f.ctx, [&] { return faults::calls("rdma_connect", raw) > 0 || connected.has_value(); }, 10s),
        "the connect was never made");
    run_until(
        f.ctx, [] { return false; }, 1s);
    cancel.emit(asio::cancellation_type::terminal);
    BOOST_TEST(run_until(
                   f.ctx, [&] { return connected.has_value(); }, 2s),
               "the cancelled connect did not end");
    BOOST_TEST((connected.value_or(error_code{}) == asio::error::operation_aborted),
               connected.value_or(error_code{}).message());
    ticking = false;
    BOOST_TEST(longest < 2s, "the context's thread was held for "
                                 << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count() << " ms");
    id.close(); // destroyed once the call returns (siw: its SYN retries, about 7 s)
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 30s), "never destroyed");
    run_until(
        f.ctx, [] { return false; }, 100ms);
}

// Finding 8: an operation waits on an id that then moves to another context: the work it
// keeps goes along, so the old context's run() returns once its own I/O is gone (a worker
// context retired after its connections moved away), and the handler runs on the new one.
BOOST_AUTO_TEST_CASE(a_moved_id_takes_its_work_along) {
    asio::io_context old_ctx, new_ctx;
    std::optional<event_channel> old_channel(std::in_place, old_ctx);
    event_channel new_channel(new_ctx);
    cm_id id(*old_channel);
    std::optional<error_code> waited;
    bool on_new = false;
    id.async_next_event([&](error_code ec, cm_event) {
        waited = ec;
        on_new = new_ctx.get_executor().running_in_this_thread();
    });
    std::optional<error_code> moved;
    id.async_migrate(new_channel, [&](error_code ec) { moved = ec; });
    BOOST_REQUIRE(run_both(old_ctx, new_ctx, [&] { return moved.has_value(); }));
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    old_channel.reset(); // the old context's last I/O object
    BOOST_TEST(runs_out_of_work(old_ctx, 5s), "the old context's run() waits for an operation of an id that left it");
    id.cancel();
    BOOST_TEST(run_until(
        new_ctx, [&] { return waited.has_value(); }, 10s));
    BOOST_TEST(on_new, "the handler ran elsewhere than on the id's new context");
}

// Review W2: an async_close made while its id moves keeps work where the id is when the
// close completes (the id's busy state, which moves with it), not on the context it was
// started on: that context's run() returns once its I/O objects are gone, while the
// destroy is still to come (held), and the handler runs on the context the id went to.
// Before: the old context's run() waited for the destroy.
BOOST_AUTO_TEST_CASE(an_async_close_made_while_its_id_moves_takes_its_work_along) {
    asio::io_context old_ctx, new_ctx;
    std::optional<event_channel> old_channel(std::in_place, old_ctx);
    event_channel new_channel(new_ctx);
    cm_id id(*old_channel);
    resolve_address(old_ctx, id);
    rdma_cm_id* raw = id.native_handle();
    // The old context runs on a thread of its own, and the move is started on another (its
    // call, held, is made there).
    auto old_run = std::async(std::launch::async, [&] { old_ctx.run(); });
    struct stop_at_end {
        asio::io_context& ctx;
        ~stop_at_end() { ctx.stop(); } // (before the wait for old_run, after the gates' release)
    } stopped{old_ctx};
    std::optional<error_code> moved, closed;
    bool on_new = false;
    std::jthread mover; // (joined after the gates' release, should a requirement fail)
    faults::gate destroying("rdma_destroy_id", raw);
    std::optional<faults::gate> migrating(std::in_place, "rdma_migrate_id", raw);
    mover = std::jthread([&] { id.async_migrate(new_channel, [&](error_code ec) { moved = ec; }); });
    BOOST_REQUIRE_MESSAGE(migrating->wait_entered(), "the move never made its rdma_migrate_id");
    id.async_close([&](error_code ec) {
        closed = ec;
        on_new = new_ctx.get_executor().running_in_this_thread();
    });
    migrating.reset();
    mover.join();
    BOOST_REQUIRE_MESSAGE(destroying.wait_entered(), "the closed id was never destroyed");
    old_channel.reset(); // the old context's last I/O object
    BOOST_TEST(run_until(
                   new_ctx, [&] { return old_run.wait_for(0s) == std::future_status::ready; }, 5s),
               "the old context's run() waits for the close of an id that left it");
    BOOST_TEST(!closed, "the close completed before the destroy");
    destroying.release();
    BOOST_TEST(run_until(
        new_ctx, [&] { return closed.has_value() && moved.has_value(); }, 10s));
    BOOST_TEST(!closed.value_or(errc::not_open), closed.value_or(errc::not_open).message());
    BOOST_TEST(on_new, "the close's handler ran elsewhere than on the id's new context");
}

// Finding 10: an io_context destroyed with a coroutine suspended on its listener's accept:
// the frame holds the listener, whose waiting handler holds the frame. The context's
// shutdown lets go of the handler, so the frame and the listener go, and the port is free.
BOOST_AUTO_TEST_CASE(destroying_a_context_frees_a_suspended_accept) {
    unsigned short port = 0;
    std::weak_ptr<listener> gone;
    {
        asio::io_context ctx;
        event_channel channel(ctx);
        auto l = std::make_shared<listener>(channel);
        l->bind(device_endpoint());
        l->listen();
        port = l->local_endpoint().port();
        gone = l;
        bool accepting = false;
        asio::co_spawn(
            ctx,
            [l = std::move(l), &accepting]() -> asio::awaitable<void> {
                accepting = true;
                co_await l->async_get_request(asio::use_awaitable);
            },
            asio::detached);
        run_until(
            ctx, [] { return false; }, 100ms);
        BOOST_REQUIRE(accepting); // and so suspended in async_get_request
    }
    BOOST_TEST(gone.expired(), "the suspended coroutine's frame (and its listener) outlived the context");
    // Its id is destroyed off this thread: the port is free soon after.
    asio::io_context again_ctx;
    event_channel again_channel(again_ctx);
    error_code bound = asio::error::address_in_use;
    for (auto deadline = std::chrono::steady_clock::now() + 5s; bound && std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(20ms)) {
        listener again(again_channel);
        again.bind(device_endpoint(port), bound);
    }
    BOOST_TEST(!bound, "port " << port << " still bound: " << bound.message());
}

// Review F1: a listener whose executor is another context's (L) than its channel's reader
// (this thread's): L is destroyed with a coroutine suspended in the listener's accept, so the
// shutdown lets go of the frame and the listener closes; its destroy is held at its gate
// while a client's request reaches the still-listening id. The reader must reject it (the
// request's id destroyed, never on the reader's thread) and route nothing to the listener.
// Before: the request's id was wrapped with the executor the shutdown had let go of — a
// SIGSEGV in the reader (context_bound::state_of under id_impl::make), rxe and siw.
BOOST_AUTO_TEST_CASE(a_request_reaching_a_listener_whose_context_is_gone_is_rejected) {
    channel_fixture f;
    std::optional<asio::io_context> gone_ctx(std::in_place);
    auto l = std::make_shared<listener>(gone_ctx->get_executor(), *f.channel);
    l->bind(device_endpoint());
    l->listen();
    const unsigned short port = l->local_endpoint().port();
    rdma_cm_id* raw = l->native_handle();
    bool accepting = false;
    asio::co_spawn(
        *gone_ctx,
        [l = std::move(l), &accepting]() -> asio::awaitable<void> {
            accepting = true;
            co_await l->async_get_request(asio::use_awaitable);
        },
        asio::detached);
    gone_ctx->poll();
    BOOST_REQUIRE(accepting);
    std::optional<faults::gate> held(std::in_place, "rdma_destroy_id", raw);
    gone_ctx.reset(); // the frame goes, the listener closes: its destroy is held
    BOOST_REQUIRE_MESSAGE(held->wait_entered(), "the listener was never destroyed");
    const void* channel = f.channel->native_handle();
    const int requests = faults::calls("rdma_get_cm_event read a request", channel);
    cm_id client(*f.channel);
    std::optional<queue_pair> client_qp; // (iWARP connects only with one)
    std::optional<error_code> connected;
    asio::co_spawn(
        f.ctx,
        [&]() -> asio::awaitable<void> {
            co_await client.async_resolve_address(device_endpoint(port), 2s, asio::use_awaitable);
            co_await client.async_resolve_route(2s, asio::use_awaitable);
            client_qp.emplace(client);
            auto [ec, ev] = co_await client.async_connect(conn_params{}, asio::as_tuple(asio::use_awaitable));
            connected = ec;
        },
        asio::detached);
    // The request reaches the reader while the listener's id still listens (its destroy held).
    BOOST_REQUIRE_MESSAGE(run_until(
                              f.ctx,
                              [&] {
                                  return faults::calls("rdma_get_cm_event read a request", channel) > requests ||
                                         connected.has_value();
                              },
                              10s),
                          "no request was read in 10 s");
    BOOST_REQUIRE_MESSAGE(!connected,
                          "the client's connect ended before its request was read: " << connected->message());
    // Counted from here: the ids of this test are made (a count over every id forgets the
    // calls made on a freed id whose memory a new one took — an earlier test's reject).
    const int rejects = faults::calls("rdma_reject");
    run_until(
        f.ctx, [] { return false; }, 200ms); // whatever the reader does with it
    held.reset();
    BOOST_TEST(faults::wait_calls("rdma_destroy_id returned", raw, 1), "the listener's destroy never returned");
    BOOST_TEST(run_until(
        f.ctx, [&] { return connected.has_value(); }, 20s));
    BOOST_TEST((connected.value_or(error_code{}) == errc::rejected),
               "the client's connect ended with " << connected.value_or(error_code{}).message());
    // Our reject is queued on the destroyer thread behind the listener's destroy, which on
    // siw may refuse the client first: the reject may come after the client's answer.
    BOOST_TEST(run_until(
                   f.ctx, [&] { return faults::calls("rdma_reject") > rejects; }, 10s),
               "the request was never rejected");
    client_qp.reset();
    client.close();
}

namespace {
// A connection's client end, held by a coroutine suspended in a receive (`receive(end)`)
// when its io_context is destroyed: the frame, and with it the connection, must go, and
// the client's id be destroyed.
struct client_end {
    cm_id id;
    queue_pair qp;
    std::vector<std::byte> buffer = std::vector<std::byte>(64);
    memory_region mr;
    receive_pool pool;
    client_end(cm_id i, queue_pair q) : id(std::move(i)), qp(std::move(q)), mr(qp.pd(), buffer), pool(qp, 4, 64) {}
};
template <typename Receive>
void destroying_a_context_frees_a_coroutine_suspended_in(Receive receive) {
    std::weak_ptr<client_end> gone;
    rdma_cm_id* raw = nullptr;
    {
        asio::io_context ctx;
        event_channel channel(ctx);
        auto l = make_listener(channel);
        connection_pair p;
        run(ctx, connect_pair(l, channel, p));
        auto c = std::make_shared<client_end>(std::move(*p.client), std::move(*p.client_qp));
        raw = c->id.native_handle();
        gone = c;
        bool receiving = false;
        asio::co_spawn(
            ctx,
            [c = std::move(c), &receiving, receive]() -> asio::awaitable<void> {
                receiving = true;
                co_await receive(*c);
            },
            asio::detached);
        run_until(
            ctx, [] { return false; }, 100ms);
        BOOST_REQUIRE(receiving); // and so suspended in its receive
    }
    BOOST_TEST(gone.expired(), "the suspended coroutine's frame (and its connection) outlived the context");
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 10s), "the client's id was never destroyed");
}
} // namespace

// The same with a coroutine suspended on a queue pair's receive: the frame holds the
// connection (id and queue pair), whose waiting handler holds the frame. The shutdown lets
// go of the handler (the queue pair put in the error state first, so that the device lets
// go of the buffer), so the frame and the connection go, and the id is destroyed.
BOOST_AUTO_TEST_CASE(destroying_a_context_frees_a_suspended_receive) {
    destroying_a_context_frees_a_coroutine_suspended_in(
        [](client_end& c) { return c.qp.async_receive(c.mr, c.buffer, asio::use_awaitable); });
}

// Review D1: the same with a coroutine suspended in a receive_pool's receive. The pool holds
// the handler itself (the queue pair holds only the pool's receives): the queue pair, told
// of the shutdown, tells the pool, whose handler goes too. Before: the frame, the pool and
// the whole connection stayed (the port bound, the fds open, no disconnect for the peer).
BOOST_AUTO_TEST_CASE(destroying_a_context_frees_a_suspended_pool_receive) {
    destroying_a_context_frees_a_coroutine_suspended_in(
        [](client_end& c) { return c.pool.async_receive(asio::use_awaitable); });
}

// The same with a coroutine suspended on a move still to make its migrate call (it waits
// for a call in flight, held at its gate) when the id's context goes: the move is
// abandoned, its handler goes with the frame, and the target channel loses the owner the
// move gave it. Before: the id kept the migrate handler, and with it the frame, for good.
BOOST_AUTO_TEST_CASE(destroying_a_context_frees_a_suspended_migrate) {
    asio::io_context other_ctx;
    std::optional<event_channel> other(std::in_place, other_ctx);
    std::weak_ptr<int> frame; // owned by the coroutine's frame
    rdma_cm_id* raw = nullptr;
    std::jthread caller;              // holds the id (a copy) through its held call; joined after
    std::optional<faults::gate> held; // the gate's end (a failed requirement) releases it
    {
        asio::io_context ctx;
        event_channel channel(ctx);
        auto id = std::make_shared<cm_id>(channel);
        resolve_address(ctx, *id);
        raw = id->native_handle();
        held.emplace("rdma_resolve_route", raw);
        caller = std::jthread([id] { id->async_resolve_route(2s, [](error_code) {}); });
        BOOST_REQUIRE(held->wait_entered());
        auto owned = std::make_shared<int>();
        frame = owned;
        bool moving = false;
        asio::co_spawn(
            ctx,
            [id, owned = std::move(owned), &other, &moving]() -> asio::awaitable<void> {
                moving = true;
                co_await id->async_migrate(*other, asio::use_awaitable);
            },
            asio::detached);
        id.reset();
        run_until(
            ctx, [] { return false; }, 100ms);
        BOOST_REQUIRE(moving); // and so suspended in async_migrate, which waits for the call
    }
    BOOST_TEST(frame.expired(), "the suspended coroutine's frame outlived the context");
    held->release();
    caller.join(); // its copy of the id goes: closed
    BOOST_TEST(faults::wait_calls("rdma_destroy_id", raw, 1, 10s), "the id was never destroyed");
    other.reset(); // its last owner: the reader stops, and other_ctx runs out of work
    other_ctx.run_for(10s);
    BOOST_TEST(other_ctx.stopped(), "the abandoned move's target channel kept reading");
}

namespace {

// `n` connection requests placed on shard 0 of a 2-shard pool, unanswered (their clients
// wait), each with a queue pair of librdmacm's own — none of ours, so that a rebalance
// moves them together (id_impl::migrate_together). The listener's and the clients' contexts
// are run here, by hand.
struct placed_on_shard_0 {
    shard_pool pool{2, [](std::span<const std::size_t>, const connection_request&) -> std::size_t { return 0; }};
    asio::io_context accept_ctx, client_ctx;
    event_channel accept_channel{accept_ctx}, client_channel{client_ctx};
    listener l{accept_channel};
    std::vector<std::unique_ptr<cm_id>> clients;
    std::vector<pooled_connection> conns;
    std::atomic<int> connected{0};

    explicit placed_on_shard_0(std::size_t n) {
        l.bind(device_endpoint());
        l.listen();
        for (std::size_t i = 0; i < n; ++i) {
            auto& client = *clients.emplace_back(std::make_unique<cm_id>(client_channel));
            async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), [&](error_code ec, cm_event) {
                if (ec == asio::error::operation_aborted) return; // closed unanswered
                BOOST_TEST(!ec, ec.message());
                ++connected;
            });
            std::optional<connection_request> request;
            l.async_get_request([&](error_code ec, connection_request r) {
                if (!ec) request.emplace(std::move(r));
            });
            BOOST_REQUIRE(run_both(accept_ctx, client_ctx, [&] { return request.has_value(); }));
            std::promise<pooled_connection> placed;
            pool.async_place(std::move(*request), [&](error_code ec, pooled_connection c) {
                if (ec)
                    placed.set_exception(std::make_exception_ptr(boost::system::system_error(ec)));
                else
                    placed.set_value(std::move(c));
            });
            auto placing = placed.get_future(); // the move goes by way of the listener's context
            BOOST_REQUIRE(run_until(
                accept_ctx, [&] { return placing.wait_for(0s) == std::future_status::ready; }, 10s));
            conns.push_back(placing.get());
            BOOST_REQUIRE_EQUAL(conns.back().shard(), 0u);
        }
    }
    // rdma_migrate_id calls made so far on each connection's id.
    std::vector<int> migrate_calls() {
        std::vector<int> n;
        for (auto& c : conns) n.push_back(faults::calls("rdma_migrate_id", c.id().native_handle()));
        return n;
    }
    static void give_qp(pooled_connection& c) {
        auto attr = rc_qp_attr();
        c.id().create_qp(attr);
    }
    // Moves connections [0, count) to shard 1 in one rebalance, from this thread: the report.
    std::future<rebalance_report> rebalance_to_1(std::size_t count) {
        std::vector<std::uint64_t> keys;
        for (std::size_t i = 0; i < count; ++i) keys.push_back(conns[i].key());
        auto done = std::make_shared<std::promise<rebalance_report>>();
        pool.async_rebalance(
            [keys](std::span<const connection_load>, std::size_t) {
                std::vector<planned_move> moves;
                for (auto k : keys) moves.push_back({k, 0, 1});
                return moves;
            },
            [done](error_code ec, rebalance_report r) {
                RDMACM_TEST_MT(!ec, ec.message());
                done->set_value(std::move(r));
            });
        return done->get_future();
    }
    // Accepts connections [0, count) where they are: true once every client of them
    // connected and each accept completed on shard `shard`'s thread.
    bool accept_on(std::size_t count, std::size_t shard) {
        std::atomic<std::size_t> accepted{0}, on_shard{0};
        const int before = connected;
        for (std::size_t i = 0; i < count; ++i)
            conns[i].id().async_accept({}, [&](error_code ec, cm_event) {
                RDMACM_TEST_MT(!ec, ec.message());
                if (pool.running_shard() == shard) ++on_shard;
                ++accepted;
            });
        bool all = run_both(client_ctx, accept_ctx,
                            [&] { return accepted == count && connected == before + static_cast<int>(count); });
        return all && on_shard == count;
    }
};

} // namespace

// Issue 39: a move of a connection still being placed (a key from snapshot(), a rebalance
// planned meanwhile) waits for the placement and is made then. The placement's
// rdma_migrate_id held at its gate, two moves ordered meanwhile: the first waits, the
// second is refused (one may wait); released, the placement ends on shard 0 and the
// waiting move takes the connection to shard 1. Before: the first was refused too.
BOOST_AUTO_TEST_CASE(a_move_of_a_connection_being_placed_is_made_once_the_placement_ends) {
    std::promise<pooled_connection> placed; // (before the pool: its handlers may run as it goes)
    std::promise<error_code> first, second;
    shard_pool pool{2, [](std::span<const std::size_t>, const connection_request&) -> std::size_t { return 0; }};
    a_pending_request r;
    auto& request = r.request;

    std::optional<std::jthread> placer; // (joined after the gate's end, whatever fails)
    std::optional<faults::gate> held(std::in_place, "rdma_migrate_id", request->id.native_handle());
    placer.emplace([&] { // (the call is made here, the listener's reader idle: held)
        pool.async_place(std::move(*request), [&](error_code ec, pooled_connection c) {
            if (ec)
                placed.set_exception(std::make_exception_ptr(boost::system::system_error(ec)));
            else
                placed.set_value(std::move(c));
        });
    });
    BOOST_REQUIRE(held->wait_entered());
    const auto listed = pool.snapshot();
    BOOST_REQUIRE_EQUAL(listed.size(), 1u);
    pool.async_move(listed[0].key, 1, [&](error_code ec) { first.set_value(ec); });
    pool.async_move(listed[0].key, 1, [&](error_code ec) { second.set_value(ec); });
    auto refused = second.get_future();
    BOOST_REQUIRE(refused.wait_for(10s) == std::future_status::ready);
    BOOST_TEST((refused.get() == errc::operation_in_progress));
    held.reset();
    placer.reset();

    auto placing = placed.get_future(); // (the placement ends by way of the listener's context)
    BOOST_REQUIRE(run_until(
        r.accept_ctx, [&] { return placing.wait_for(0s) == std::future_status::ready; }, 10s));
    auto c = placing.get();
    auto moved = first.get_future();
    BOOST_REQUIRE(moved.wait_for(10s) == std::future_status::ready);
    const auto ec = moved.get();
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(c.shard() == 1u);
    BOOST_TEST(faults::calls("rdma_migrate_id", c.id().native_handle()) == 2); // placed, then moved
    c.id().close(); // (first: its reject ends the client's connect; siw holds a connecting id 10 s)
    r.client.close();
}

// Review F3: stop() racing a rebalance whose move fails. The move's failure is counted on
// the shard it was going to (its handler's fallback), which stop() had let run out of work
// once the move gave its channel back: the count was posted to a stopped shard, the
// rebalance's handler (holding work on shard 0) neither ran nor went, and stop() never
// returned. A move now holds work on both its shards from its start to its handler.
// Forced: the migrate call held at its gate (then failed), stop() let go of the shards
// meanwhile, and shard 0 kept busy by a handler until shard 1 has stopped (at most 2 s).
BOOST_AUTO_TEST_CASE(a_pool_stop_waits_for_a_rebalance_whose_move_failed) {
    placed_on_shard_0 f(1);
    rdma_cm_id* raw = f.conns[0].id().native_handle();
    std::optional<faults::gate> held(std::in_place, "rdma_migrate_id", raw);
    faults::inject("rdma_migrate_id", EINVAL);
    std::future<rebalance_report> report;
    std::thread rebalancer([&] { report = f.rebalance_to_1(1); }); // (held in the call)
    BOOST_REQUIRE(held->wait_entered());
    asio::post(f.pool.get_executor(0), [&] {
        for (auto deadline = std::chrono::steady_clock::now() + 2s;
             !f.pool.context(1).stopped() && std::chrono::steady_clock::now() < deadline;)
            std::this_thread::sleep_for(5ms);
    });
    std::promise<void> stopped;
    std::thread stopper([&] {
        f.pool.stop();
        stopped.set_value();
    });
    std::this_thread::sleep_for(300ms); // stop() lets go of the shards
    held.reset();
    rebalancer.join();
    if (stopped.get_future().wait_for(30s) != std::future_status::ready) {
        std::fprintf(stderr, "a_pool_stop_waits_for_a_rebalance_whose_move_failed: stop() never returned\n");
        std::_Exit(1); // (its thread cannot be joined)
    }
    stopper.join();
    BOOST_TEST(faults::clear() == 0);
    BOOST_REQUIRE(report.wait_for(0s) == std::future_status::ready);
    auto r = report.get();
    BOOST_TEST(r.failed.size() == 1u);
    BOOST_TEST(r.moved.empty());
}

// Finding 15: a connection's strand had a step queued on its old shard when the move's
// last hop ran on the new one. The move ends only after that step, and the step sees the
// shard it runs on (before: the move ended first, the step ran on shard 0 with shard() 1).
BOOST_AUTO_TEST_CASE(a_move_ends_after_the_steps_queued_on_its_old_shard) {
    placed_on_shard_0 f(1); // (an unanswered request: the client waits)
    auto& pool = f.pool;
    pooled_connection& c = f.conns[0];

    faults::gate held("rdma_migrate_id", c.id().native_handle());
    std::atomic<bool> move_returned{false}, move_done{false};
    std::optional<error_code> moved;
    std::thread mover([&] {
        pool.async_move(c, 1, [&](error_code ec) {
            moved = ec;
            move_done = true;
        });
        move_returned = true;
    });
    BOOST_REQUIRE(held.wait_entered()); // made here, on `mover` (shard 0's reader is idle)
    std::size_t step_shard = 99, step_ran_on = 99;
    std::atomic<bool> step_done{false};
    auto wait_for = [](const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
        for (auto deadline = std::chrono::steady_clock::now() + limit;
             !flag && std::chrono::steady_clock::now() < deadline;)
            std::this_thread::sleep_for(1ms);
    };
    asio::post(pool.get_executor(0), [&] {
        held.release();
        wait_for(move_returned, 5s); // the move's next hop is queued here now
        // Then shard 0 is busy until the move has ended (at most 1 s), and the step waits
        // behind, on the strand's invoker queued here.
        asio::post(pool.get_executor(0), [&] { wait_for(move_done, 1000ms); });
        asio::post(c.get_executor(), [&] {
            step_shard = c.shard();
            step_ran_on = pool.running_shard().value_or(99);
            step_done = true;
        });
    });
    wait_for(move_done, 20s);
    wait_for(step_done, 5s);
    mover.join();
    BOOST_REQUIRE(move_done && step_done);
    BOOST_REQUIRE_MESSAGE(!*moved, moved->message());
    BOOST_TEST(step_ran_on == 0u);
    BOOST_TEST(step_shard == step_ran_on, "a step ran on shard " << step_ran_on << " while shard() said " << step_shard
                                                                 << " (the move had ended)");
    BOOST_TEST(c.shard() == 1u);
    c.id().close(); // (first: its reject ends the client's connect; siw holds a connecting id 10 s)
    f.clients[0]->close();
}

// The path migrate_test can only print: an event read on the old channel while its id moves
// is held, then delivered on the new executor, once. Forced: a call in flight on the id
// (its disconnect, held at the gate) holds the move back while the old reader reads.
BOOST_AUTO_TEST_CASE(an_event_read_while_moving_is_delivered_once_on_the_new_executor) {
    context_threads t(2); // 0: the server, 1: B; A is run here, by hand
    asio::io_context ctx_a;
    {
        event_channel server_channel(t[0]), a(ctx_a), b(t[1]);
        auto l = make_listener(server_channel);
        std::optional<cm_id> server;
        cm_id client(a);
        connect_and_queue_peer_disconnect(ctx_a, a, client, l, t[0], server);
        const auto read_on_a = a.events_read(), read_on_b = b.events_read();
        faults::gate held("rdma_disconnect", client.native_handle());
        std::promise<std::pair<std::thread::id, error_code>> disconnected;
        std::thread caller([&] {
            client.async_disconnect([&](error_code ec) { disconnected.set_value({std::this_thread::get_id(), ec}); });
        });
        BOOST_REQUIRE(held.wait_entered());
        std::atomic<bool> migrated = false;
        client.async_migrate(b, [&](error_code ec) {
            RDMACM_TEST_MT(!ec, ec.message());
            migrated = true;
        });
        // The move waits for the call; A's reader reads the peer's DISCONNECTED meanwhile.
        BOOST_REQUIRE(run_until(
            ctx_a, [&] { return a.events_read() == read_on_a + 1; }, 10s));
        held.release();
        caller.join();
        BOOST_REQUIRE(run_until(
            ctx_a, [&] { return migrated.load(); }, 10s));
        auto done = disconnected.get_future();
        BOOST_REQUIRE(done.wait_for(10s) == std::future_status::ready);
        auto [thread, ec] = done.get();
        BOOST_TEST(!ec, ec.message()); // the held DISCONNECTED completed it, on B
        BOOST_TEST((thread == t.thread(1)));
        BOOST_TEST(a.events_read() == read_on_a + 1);
        BOOST_TEST(b.events_read() == read_on_b);
        // And nothing more: a second delivery would be waiting for next_event.
        asio::cancellation_signal cancel;
        std::promise<error_code> next;
        client.async_next_event(
            asio::bind_cancellation_slot(cancel.slot(), [&](error_code e, cm_event) { next.set_value(e); }));
        std::this_thread::sleep_for(300ms);
        asio::post(t[1], [&] { cancel.emit(asio::cancellation_type::terminal); });
        auto waited = next.get_future();
        BOOST_REQUIRE(waited.wait_for(10s) == std::future_status::ready);
        BOOST_TEST((waited.get() == asio::error::operation_aborted));
    }
    t.stop();
}

// A move's read of its new channel (for events the kernel moved along unannounced) may be
// made by another move to that channel: one read covers every move whose call came before
// it, so a rebalance reads about once, not once per id. It must not cover a move whose call
// came after it. Forced: C1's call is made, its read held back (its old context busy); C2's
// call is held at its gate, its peer's DISCONNECTED waiting in A's kernel queue (A not
// running); C1's read and end run; then C2's call moves the event to B, where it reaches
// C2, read by B, once.
BOOST_AUTO_TEST_CASE(a_read_made_before_a_move_s_call_does_not_cover_it) {
    context_threads t(3); // 0: the server, 1: B, 2: C (C1's channel); A is run here, by hand
    asio::io_context ctx_a;
    {
        event_channel server_channel(t[0]), a(ctx_a), b(t[1]), c(t[2]);
        auto l = make_listener(server_channel);
        std::optional<cm_id> server1, server2;
        cm_id c1(c), c2(a);
        auto accepted = asio::co_spawn(t[0], accept_into(l, server1), asio::use_future);
        std::promise<error_code> connected;
        async_connect(c1, device_endpoint(l.local_endpoint().port()), with_qp(),
                      [&](error_code ec, cm_event) { connected.set_value(ec); });
        auto c1_connected = connected.get_future();
        BOOST_REQUIRE(c1_connected.wait_for(30s) == std::future_status::ready);
        BOOST_REQUIRE(!c1_connected.get());
        BOOST_REQUIRE(accepted.wait_for(30s) == std::future_status::ready);
        connect_and_queue_peer_disconnect(ctx_a, a, c2, l, t[0], server2);
        const auto read_on_a = a.events_read(), read_on_b = b.events_read();

        std::promise<void> c_free;
        asio::post(t[2], [busy = c_free.get_future()] { busy.wait_for(20s); }); // C1's look waits
        std::promise<error_code> c1_moved, c2_moved;
        c1.async_migrate(b, [&](error_code ec) { c1_moved.set_value(ec); });
        BOOST_REQUIRE(faults::calls("rdma_migrate_id", c1.native_handle()) == 1); // its call: made here
        faults::gate held("rdma_migrate_id", c2.native_handle());
        std::thread s([&] { c2.async_migrate(b, [&](error_code ec) { c2_moved.set_value(ec); }); });
        BOOST_REQUIRE(held.wait_entered());
        c_free.set_value(); // C1's read of B, its end there
        auto m1 = c1_moved.get_future();
        BOOST_REQUIRE(m1.wait_for(10s) == std::future_status::ready);
        BOOST_TEST(!m1.get());
        held.release(); // C2's event moves to B
        s.join();
        auto m2 = c2_moved.get_future();
        BOOST_REQUIRE(run_until( // its read, and its end's first step: on A, its old executor
            ctx_a, [&] { return m2.wait_for(0s) == std::future_status::ready; }, 10s));
        BOOST_TEST(!m2.get());

        std::promise<std::pair<std::thread::id, rdma_cm_event_type>> next;
        c2.async_next_event([&](error_code ec, cm_event ev) {
            RDMACM_TEST_MT(!ec, ec.message());
            next.set_value({std::this_thread::get_id(), ev.type()});
        });
        auto n = next.get_future();
        BOOST_REQUIRE_MESSAGE(n.wait_for(10s) == std::future_status::ready, "the moved event never came");
        auto [thread, type] = n.get();
        BOOST_TEST(type == RDMA_CM_EVENT_DISCONNECTED);
        BOOST_TEST((thread == t.thread(1)));
        BOOST_TEST(a.events_read() == read_on_a); // moved in the kernel, not read on A
        BOOST_TEST(b.events_read() == read_on_b + 1);
    }
    ctx_a.run_for(10s);
    BOOST_TEST(ctx_a.stopped());
    t.stop();
}

// Two moves into one channel (review F5): the second's end must not overtake the event the
// kernel moved along with it, whatever the first's look found. Forced: C1 and C2, both on A
// (run here, by hand), move to channel B with C as their new executor, both calls made
// before either's first step on A; C2's peer's DISCONNECTED waits in A's kernel queue for
// C2's next_event, started before the move; B's reader is held busy until C2's move ends,
// or 2 s. Held events come first: the event's handler runs before the move's. (Before the
// fix, C1's look took both moves' mark, its kick waited behind the busy reader, and C2's
// move ended first.)
namespace {
// `wrapped`: C is given through an executor type the library cannot see through (a user's
// own: noting_executor), so it cannot tell that C's thread runs C and counts the event's
// hand-over as a call into C, posted.
void second_of_two_moves_after_its_event(bool wrapped) {
    context_threads t(3); // 0: the server, 1: B's reader, 2: C, the moves' new executor
    asio::io_context ctx_a;
    {
        event_channel server_channel(t[0]), a(ctx_a), b(t[1]);
        auto l = make_listener(server_channel);
        std::optional<cm_id> server;
        cm_id c1(a), c2(a);
        connect_and_queue_peer_disconnect(ctx_a, a, c2, l, t[0], server);
        std::mutex m;
        std::vector<std::string> order;
        std::promise<void> both;
        auto note = [&](const char* what) {
            std::lock_guard lock(m);
            order.emplace_back(what);
            if (order.size() == 2) both.set_value();
        };
        c2.async_next_event([&](error_code ec, cm_event ev) {
            RDMACM_TEST_MT(!ec, ec.message());
            RDMACM_TEST_MT(ev.type() == RDMA_CM_EVENT_DISCONNECTED, to_string(ev.type()));
            note("event");
        });
        std::promise<void> b_free;
        asio::post(t[1], [busy = b_free.get_future()] { busy.wait_for(2s); });
        std::promise<error_code> c1_moved, c2_moved;
        const asio::any_io_executor c = wrapped ? asio::any_io_executor(noting_executor(t[2].get_executor(), [] {}))
                                                : asio::any_io_executor(t[2].get_executor());
        c1.async_migrate(b, c, [&](error_code ec) { c1_moved.set_value(ec); });
        c2.async_migrate(b, c, [&](error_code ec) {
            note("move");
            b_free.set_value();
            c2_moved.set_value(ec);
        });
        BOOST_REQUIRE(faults::calls("rdma_migrate_id", c2.native_handle()) == 1); // both calls: made here
        auto m1 = c1_moved.get_future(), m2 = c2_moved.get_future();
        BOOST_REQUIRE(run_until(
            ctx_a, [&] { return m2.wait_for(0s) == std::future_status::ready; }, 10s));
        BOOST_TEST(!m2.get());
        BOOST_REQUIRE(m1.wait_for(10s) == std::future_status::ready);
        BOOST_TEST(!m1.get());
        auto noted = both.get_future();
        BOOST_REQUIRE(ready_within(noted, 10s));
        std::lock_guard lock(m);
        BOOST_TEST(order == (std::vector<std::string>{"event", "move"}), boost::test_tools::per_element());
    }
    ctx_a.run_for(10s);
    BOOST_TEST(ctx_a.stopped());
    t.stop();
}
} // namespace

BOOST_AUTO_TEST_CASE(the_second_of_two_moves_into_a_channel_ends_after_the_event_it_took_along) {
    second_of_two_moves_after_its_event(false);
}

// The same, C given through a user's executor type (the fourth review's R3): the event's
// hand-over was posted, the migrate handler then run inline — before it (before the fix).
BOOST_AUTO_TEST_CASE(the_second_of_two_moves_ends_after_its_event_on_a_user_s_executor_type) {
    second_of_two_moves_after_its_event(true);
}

// A user's executor may call back into the library from execute(): here it closes the id
// inside the first post made on `side`'s context thread once a move of an established
// connection (with its queue pair) started, and waits out the destroy. The move completes,
// the id is destroyed once, nothing is held. False when the hook never fired: the post was
// made from another thread (a pass of the old context let go of its reader first, seen
// once in 27 runs under TSan on siw), so the interleaving was not the one wanted.
namespace {
enum class side { old_context, new_context };
bool close_inside_a_post_of_a_move(side hooked) {
    // What the hook and the handlers use outlives the threads that may run them.
    std::atomic<cm_id*> moving{nullptr};
    std::atomic<bool> closed_in_hand_over{false}, destroys_waited_out{false};
    bool hit = false;
    std::promise<error_code> moved;
    context_threads t(3); // 0: the server, 1: the client's old context, 2: its new one
    noting_executor hooked_ex(t[hooked == side::old_context ? 1 : 2].get_executor(), [&, new_thread = t.thread(2)] {
        cm_id* id = moving.load();
        if (!id || std::this_thread::get_id() != new_thread || closed_in_hand_over.exchange(true)) return;
        id->close();
        destroys_waited_out = wait_out_destroys(10s);
    });
    {
        event_channel server_channel(t[0]);
        event_channel a = hooked == side::old_context ? event_channel(hooked_ex) : event_channel(t[1]);
        event_channel b = hooked == side::new_context ? event_channel(hooked_ex) : event_channel(t[2]);
        auto l = make_listener(server_channel);
        connection_pair p;
        auto connected = asio::co_spawn(t[0], connect_pair(l, a, p), asio::use_future);
        // (As run()'s bound: a siw connect under TSan beside a CPU hog once took over 10 s.)
        BOOST_REQUIRE(connected.wait_for(30s) == std::future_status::ready);
        connected.get();
        // The client's queue pair's first pass (posted to its reader when it was made) over:
        // one still running on thread 1 when the move ends there would let go of the old
        // reader itself, its post then made from thread 1, not the new one (the hook never
        // fired once under TSan on siw). Its context runs one thread, in order.
        std::promise<void> passed;
        asio::post(t[1], [&] { passed.set_value(); });
        BOOST_REQUIRE(passed.get_future().wait_for(10s) == std::future_status::ready);
        rdma_cm_id* raw = p.client->native_handle();
        moving = &*p.client; // from here, the first post to the hooked executor made on the new thread
        p.client->async_migrate(b, [&](error_code ec) { moved.set_value(ec); });
        auto done = moved.get_future();
        BOOST_REQUIRE_MESSAGE(done.wait_for(20s) == std::future_status::ready, "the move never completed");
        // Claimed here if the hook has not fired: it never will (the id goes with this scope).
        hit = closed_in_hand_over.exchange(true);
        const error_code ec = done.get();
        BOOST_TEST(!ec, "closed before the move was made: " << ec.message());
        if (hit) {
            BOOST_TEST(destroys_waited_out.load(), "the id's destroy did not run while its move ended");
            BOOST_TEST(faults::calls("rdma_destroy_id", raw) == 1);
        }
        p.server->close();
    }
    t.stop();
    return hit;
}

// The interleaving made, at most three tries, each miss said.
void close_inside_a_post_of_a_move_until_hooked(side hooked) {
    for (int attempt = 1; attempt <= 3; ++attempt) {
        if (close_inside_a_post_of_a_move(hooked)) return;
        BOOST_TEST_MESSAGE("attempt " << attempt
                                      << ": the move's end posted nothing to the hooked executor "
                                         "from the new context's thread; again");
    }
    BOOST_ERROR("the move's end never posted to the hooked executor from the new context's thread");
}
} // namespace

// Review F6: a queue pair made while its id moves, its executor read before the move
// ended, is attached after: attach() points it at the id's new executor, whose execute()
// (user code) closes the id. Made under the id's lock, that close locked it again on the
// same thread: a deadlock. Forced: the migrate call held at its gate while the queue pair's
// creation waits for it; the move's step held back on the old context until the creation
// is held at ibv_create_cq (its executor read: the old one); the move ends; then the
// creation goes on, and the new executor's first post closes the id.
BOOST_AUTO_TEST_CASE(attaching_a_queue_pair_never_holds_the_id_s_lock_into_an_executor) {
    context_threads t(2); // 0: the id's first context, 1: its new one, through the hook
    std::atomic<cm_id*> closing{nullptr};
    std::atomic<bool> closed_in_execute{false};
    std::atomic<std::thread::id> maker_thread{};
    // Only a post made by the queue pair's maker (its attach) closes the id: the new
    // channel's reader posts through this executor too.
    noting_executor hooked_ex(t[1].get_executor(), [&] {
        if (std::this_thread::get_id() != maker_thread.load()) return;
        if (cm_id* id = closing.exchange(nullptr)) {
            id->close();
            closed_in_execute = true;
        }
    });
    {
        event_channel a(t[0]), b(hooked_ex);
        cm_id id(a);
        std::promise<error_code> resolved;
        id.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { resolved.set_value(ec); });
        auto r = resolved.get_future();
        BOOST_REQUIRE(r.wait_for(10s) == std::future_status::ready);
        BOOST_REQUIRE(!r.get());
        rdma_cm_id* raw = id.native_handle();
        std::optional<faults::gate> migrate_held(std::in_place, "rdma_migrate_id", raw);
        std::promise<error_code> moved;
        std::thread mover([&] { id.async_migrate(b, [&](error_code ec) { moved.set_value(ec); }); });
        BOOST_REQUIRE(migrate_held->wait_entered());
        std::optional<faults::gate> cq_held(std::in_place, "ibv_create_cq", raw->verbs);
        std::promise<void> made;
        std::thread maker([&] {
            maker_thread = std::this_thread::get_id();
            try {
                queue_pair qp(id); // waits out the migrate call, then is held at its CQ
            } catch (const std::exception&) {
                // closed meanwhile: fine
            }
            made.set_value();
        });
        asio::post(t[0], [&] { cq_held->wait_entered(); }); // the move's step waits behind it
        std::this_thread::sleep_for(100ms);                 // (the maker waiting for the call)
        migrate_held.reset();
        mover.join();
        auto m = moved.get_future();
        BOOST_REQUIRE(m.wait_for(10s) == std::future_status::ready);
        BOOST_REQUIRE(!m.get());
        closing = &id;
        cq_held.reset();
        if (made.get_future().wait_for(20s) != std::future_status::ready) {
            std::fprintf(stderr, "attaching_a_queue_pair_never_holds_the_id_s_lock_into_an_executor: deadlocked\n");
            std::_Exit(1); // (its thread cannot be joined)
        }
        maker.join();
        BOOST_TEST(closed_in_execute.load(), "the attach posted nothing through the id's new executor");
    }
    t.stop();
}

// Found by churn_test under ASan (246ba6c): a close() whose destroy ran while the end of a
// move handed the id's queue pair over to the new executor; the move's last step then saw
// the id's data path gone and ended the move of a null one. Forced: the hand-over stops the
// queue pair's old completion reader by a post to the old executor, which closes the id at
// that moment (before the fix: a crash). Under TSan it also showed that post made under the
// old context's state mutex (a lock-order inversion with the id's and the queue pair's
// mutexes, 458c6cd).
BOOST_AUTO_TEST_CASE(a_close_while_a_move_hands_over_its_queue_pair) {
    close_inside_a_post_of_a_move_until_hooked(side::old_context);
}

// The end of the move starts the queue pair's completion reader on the new context: its
// first read, posted to the new executor, closes the id. Made under the queue pair's lock,
// that post deadlocked the thread on it (the close takes it too).
BOOST_AUTO_TEST_CASE(a_close_inside_the_new_reader_s_first_post) {
    close_inside_a_post_of_a_move_until_hooked(side::new_context);
}

// A rebalance moves its connections together (one pass of migrate calls, one step on the
// old shard and one hop for all): one of them with a librdmacm call in flight (its queue
// pair being made on another thread, held at the gate) waits for it and moves alone after,
// while the others move at once; all end on the new shard, and work there.
BOOST_AUTO_TEST_CASE(a_rebalance_moves_the_others_while_one_waits_for_its_call) {
    placed_on_shard_0 f(3);
    placed_on_shard_0::give_qp(f.conns[0]);
    placed_on_shard_0::give_qp(f.conns[1]);
    rdma_cm_id* waiting = f.conns[2].id().native_handle();
    faults::gate held("rdma_create_qp", waiting);
    std::thread maker([&] { placed_on_shard_0::give_qp(f.conns[2]); });
    BOOST_REQUIRE(held.wait_entered());
    const auto placed = f.migrate_calls(); // (each was moved once already: placed on shard 0)
    auto report = f.rebalance_to_1(3);
    BOOST_TEST(faults::wait_calls("rdma_migrate_id", f.conns[0].id().native_handle(), placed[0] + 1, 10s));
    BOOST_TEST(faults::wait_calls("rdma_migrate_id", f.conns[1].id().native_handle(), placed[1] + 1, 10s));
    BOOST_TEST(!faults::wait_calls("rdma_migrate_id", waiting, placed[2] + 1, 300ms), "moved with its call in flight");
    BOOST_TEST((report.wait_for(0s) == std::future_status::timeout), "the rebalance ended before its last move");
    held.release();
    maker.join();
    BOOST_REQUIRE(report.wait_for(10s) == std::future_status::ready);
    auto r = report.get();
    BOOST_TEST(r.moved.size() == 3u);
    BOOST_TEST(r.failed.empty());
    BOOST_TEST(r.after == (std::vector<std::size_t>{0, 3}), boost::test_tools::per_element());
    for (auto& c : f.conns) BOOST_TEST(c.shard() == 1u);
    BOOST_TEST(f.accept_on(3, 1), "a moved connection did not accept on its new shard");
}

// The old shard's reader is busy routing (its read held at the gate, the routing lock with
// it) when a rebalance comes: the moves cannot be made together there and then; each goes
// on from the reader's strand once it is free, and every one ends on the new shard.
BOOST_AUTO_TEST_CASE(a_rebalance_waits_for_the_old_reader_it_found_busy) {
    placed_on_shard_0 f(4);
    for (auto& c : f.conns) placed_on_shard_0::give_qp(c);
    // The fourth is accepted: its ESTABLISHED comes to shard 0's channel, whose reader is held
    // reading it.
    faults::gate held("rdma_get_cm_event", f.conns[3].id().native_handle()->channel);
    std::atomic<bool> accepted{false};
    f.conns[3].id().async_accept({}, [&](error_code ec, cm_event) {
        RDMACM_TEST_MT(!ec, ec.message());
        accepted = true;
    });
    const int before = f.connected;
    BOOST_REQUIRE(run_both(f.client_ctx, f.accept_ctx, [&] { return f.connected == before + 1; }));
    BOOST_REQUIRE(held.wait_entered());
    const auto placed = f.migrate_calls();
    auto report = f.rebalance_to_1(3);
    BOOST_TEST(!faults::wait_calls("rdma_migrate_id", f.conns[0].id().native_handle(), placed[0] + 1, 300ms),
               "moved while the old reader was routing");
    held.release();
    BOOST_REQUIRE(report.wait_for(10s) == std::future_status::ready);
    auto r = report.get();
    BOOST_TEST(r.moved.size() == 3u);
    BOOST_TEST(r.failed.empty());
    BOOST_TEST(r.after == (std::vector<std::size_t>{1, 3}), boost::test_tools::per_element());
    BOOST_REQUIRE(run_until(
        f.accept_ctx, [&] { return accepted.load(); }, 10s));
    BOOST_TEST(f.conns[3].shard() == 0u);
    BOOST_TEST(f.accept_on(3, 1), "a moved connection did not accept on its new shard");
}

// An event comes while a rebalance's moves are made together: the second one's migrate
// call is held at its gate (the old reader kept from routing meanwhile), while the peer of
// the third (not moved yet) disconnects. Its DISCONNECTED waits in the old channel's kernel
// queue and moves along with it unannounced (semantics F2): nothing else is queued on the
// new channel, so only the moves' one look at it finds the event. Delivered once, on the new
// shard (without the look: never).
BOOST_AUTO_TEST_CASE(an_event_that_moves_along_in_a_rebalance_arrives_once_on_the_new_shard) {
    std::array<std::atomic<int>, 3> disconnected{}, on_new_shard{}, other{};
    placed_on_shard_0 f(3);
    for (auto& c : f.conns) placed_on_shard_0::give_qp(c);
    BOOST_REQUIRE(f.accept_on(3, 0));
    for (std::size_t i = 0; i < 3; ++i)
        f.conns[i].id().async_next_event([&, i](error_code ec, cm_event ev) {
            if (ec) return; // (when the test ends)
            if (ev.type() != RDMA_CM_EVENT_DISCONNECTED) ++other[i];
            ++disconnected[i];
            if (f.pool.running_shard() == 1u) ++on_new_shard[i];
        });
    rdma_event_channel* old_channel = f.conns[2].id().native_handle()->channel;
    const auto placed = f.migrate_calls();
    faults::gate held("rdma_migrate_id", f.conns[1].id().native_handle());
    std::optional<std::future<rebalance_report>> report;
    std::thread mover([&] { report.emplace(f.rebalance_to_1(3)); }); // (its calls are made there)
    BOOST_REQUIRE(held.wait_entered());
    BOOST_REQUIRE_EQUAL(faults::calls("rdma_migrate_id", f.conns[0].id().native_handle()), placed[0] + 1);
    BOOST_REQUIRE_EQUAL(faults::calls("rdma_migrate_id", f.conns[2].id().native_handle()), placed[2]);
    f.clients[2]->async_disconnect([](error_code) {});
    BOOST_REQUIRE(run_until(
        f.client_ctx,
        [&] {
            pollfd p{old_channel->fd, POLLIN, 0};
            return ::poll(&p, 1, 0) == 1;
        },
        10s));
    held.release();
    mover.join();
    BOOST_REQUIRE(report->wait_for(10s) == std::future_status::ready);
    auto r = report->get();
    BOOST_TEST(r.moved.size() == 3u);
    BOOST_TEST(r.failed.empty());
    BOOST_TEST(run_until(
        f.client_ctx, [&] { return disconnected[2] == 1; }, 10s));
    run_until(
        f.client_ctx, [] { return false; }, 300ms); // a second delivery would come meanwhile
    BOOST_TEST(disconnected[2] == 1, disconnected[2] << " events");
    BOOST_TEST(on_new_shard[2] == 1, "not delivered on shard 1");
    BOOST_TEST(other[2] == 0);
    BOOST_TEST(disconnected[0] + disconnected[1] == 0);
}

// A call that may block — an iWARP connect: a kernel TCP connect — is made on a library
// thread, never the context's; made one after another, such calls reuse a thread instead of
// making one each (before: a detached thread per call, six threads for six connects on siw).
// IB and RoCE connects return at once and are made on the caller's thread (here the one
// running the context). Six connects, each accepted.
BOOST_FIXTURE_TEST_CASE(connects_that_may_block_reuse_library_threads, channel_fixture) {
    auto l = make_listener(*channel);
    std::vector<cm_id> clients; // alive to the end: each native id a subject of its own
    clients.reserve(6);
    std::vector<std::optional<cm_id>> servers(6);
    run(
        ctx,
        [&]() -> asio::awaitable<void> {
            for (auto& server : servers) {
                auto& client = clients.emplace_back(*channel);
                asio::co_spawn(ctx, accept_into(l, server), asio::detached);
                co_await async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(),
                                       asio::use_awaitable);
                while (!server) co_await asio::post(ctx, asio::use_awaitable);
            }
        }(),
        120s); // (six siw connects, under a sanitizer beside a busy machine)
    std::set<pid_t> connecting;
    for (auto& c : clients) connecting.merge(faults::threads_calling("rdma_connect", c.native_handle()));
    const bool iwarp = clients.front().native_handle()->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
    BOOST_TEST_MESSAGE(connecting.size() << " thread(s) made the six connects");
    if (iwarp) {
        BOOST_TEST(!connecting.contains(::gettid()), "a blocking connect on the context's thread");
        // One, usually; a second when the next connect begins before the first call's thread
        // is back waiting (it was preempted after its call returned).
        BOOST_TEST(connecting.size() <= 3u, connecting.size() << " threads for six connects made one after another");
    } else {
        BOOST_TEST((connecting == std::set<pid_t>{::gettid()}), "made on the context's thread");
    }
}
