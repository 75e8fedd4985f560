// Cancellation, time-outs and teardown with work in flight, on the kernel CM: an
// abandoned connect leaves a closable id, waits for events lose nothing, and everything
// torn down mid-flight is destroyed (the context runs out of work, no fd is left).
#include "support/fixture.hpp"
#include "support/open_fds.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstdlib>
#include <future>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;

namespace {

// A client id with its route resolved and a queue pair, ready to connect to `port`.
awaitable<void> prepare_client(cm_id& id, unsigned short port) {
    co_await id.async_resolve_address(device_endpoint(port), 2000ms, use_awaitable);
    co_await id.async_resolve_route(2000ms, use_awaitable);
    auto attr = rc_qp_attr();
    id.create_qp(attr);
}

// Whether LeakSanitizer finds memory leaked so far (the ASan build; elsewhere no answer).
bool leak_found_so_far() {
#if defined(__SANITIZE_ADDRESS__)
    return __lsan_do_recoverable_leak_check() != 0;
#else
    return false;
#endif
}

} // namespace

BOOST_FIXTURE_TEST_CASE(a_timer_cancels_a_connect_nobody_answers, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel); // never accepts: the request just waits
        cm_id client(*channel);
        co_await prepare_client(client, l.local_endpoint().port());

        asio::steady_timer timer(ctx, 200ms);
        auto winner = co_await (client.async_connect(conn_params{}, use_awaitable) || timer.async_wait(use_awaitable));
        BOOST_TEST(winner.index() == 1u); // the time-out won; the connect was abandoned

        // The CM connect still runs in the kernel: another one is refused, clearly.
        auto [ec, ev] = co_await client.async_connect(conn_params{}, asio::as_tuple(use_awaitable));
        BOOST_TEST(ec == make_error_code(errc::operation_in_progress));

        // The request did reach the listener; closing both ends cleans everything up. (The
        // request first: its reject ends the client's connect, which siw would otherwise
        // hold the client's destroy for, its 10-s MPA time-out.)
        auto req = co_await l.async_get_request(use_awaitable);
        BOOST_TEST(req.event.type() == RDMA_CM_EVENT_CONNECT_REQUEST);
        req.id.close();
        client.close();
        BOOST_TEST(!client.is_open());
    }());
}

BOOST_FIXTURE_TEST_CASE(per_operation_slot_cancels_only_that_operation, channel_fixture) {
    auto l = make_listener(*channel);
    asio::cancellation_signal accept_signal, event_signal;
    error_code accept_ec, event_ec;
    int done = 0;
    l.async_get_request(asio::bind_cancellation_slot(accept_signal.slot(), [&](error_code ec, connection_request) {
        accept_ec = ec;
        ++done;
    }));
    l.async_next_event(asio::bind_cancellation_slot(event_signal.slot(), [&](error_code ec, cm_event) {
        event_ec = ec;
        ++done;
    }));
    // Partial cancellation: waiting for a request or an event can be undone cleanly.
    accept_signal.emit(asio::cancellation_type::partial);
    BOOST_TEST(run_until(
        ctx, [&] { return done == 1; }, 5s));
    BOOST_TEST(accept_ec == asio::error::operation_aborted);
    // The other wait is untouched; close() ends it.
    l.close();
    BOOST_TEST(run_until(
        ctx, [&] { return done == 2; }, 5s));
    BOOST_TEST(event_ec == asio::error::operation_aborted);

    // A request that arrives after a cancelled accept is not lost.
    auto l2 = make_listener(*channel);
    bool cancelled = false;
    l2.async_get_request(asio::bind_cancellation_slot(accept_signal.slot(), [&](error_code ec, connection_request) {
        cancelled = ec == asio::error::operation_aborted;
    }));
    accept_signal.emit(asio::cancellation_type::total);
    BOOST_TEST(run_until(
        ctx, [&] { return cancelled; }, 5s));
    run(ctx, [&]() -> awaitable<void> {
        cm_id client(*channel);
        co_await prepare_client(client, l2.local_endpoint().port());
        asio::co_spawn(ctx, client.async_connect(conn_params{}, use_awaitable), asio::detached);
        auto req = co_await l2.async_get_request(use_awaitable);
        BOOST_TEST(req.event.type() == RDMA_CM_EVENT_CONNECT_REQUEST);
    }());
}

BOOST_FIXTURE_TEST_CASE(close_aborts_outstanding_operations, channel_fixture) {
    auto l = make_listener(*channel);
    cm_id id(*channel);
    std::vector<error_code> results;
    id.async_next_event([&](error_code ec, cm_event) { results.push_back(ec); });
    id.async_resolve_address(device_endpoint(l.local_endpoint().port()), 2000ms,
                             [&](error_code ec) { results.push_back(ec); });
    id.close();
    BOOST_TEST(run_until(
        ctx, [&] { return results.size() == 2; }, 5s));
    for (auto& ec : results) BOOST_TEST(ec == asio::error::operation_aborted);
    // And later calls say the id is closed.
    error_code later;
    id.async_resolve_route(2000ms, [&](error_code ec) { later = ec; });
    BOOST_TEST(run_until(
        ctx, [&] { return bool(later); }, 5s));
    BOOST_TEST(later == make_error_code(errc::not_open));
}

// A context's run() waits while an operation waits on any id whose handlers run there, and
// returns once the last one has completed: its outstanding work is counted once for all the
// ids and queue pairs on it (src/common/context_bound.hpp), not held by each.
BOOST_AUTO_TEST_CASE(run_waits_for_the_last_waiting_id) {
    asio::io_context channel_ctx, ctx; // `ctx` holds no I/O object: only the ids' work
    event_channel channel(channel_ctx);
    cm_id a(ctx.get_executor(), channel), b(ctx.get_executor(), channel);
    int done = 0;
    a.async_next_event([&](error_code, cm_event) { ++done; });
    b.async_next_event([&](error_code, cm_event) { ++done; });
    a.cancel();
    BOOST_TEST(ctx.run_one_for(5s) == 1U);
    BOOST_TEST(done == 1);
    BOOST_TEST(!ctx.stopped(), "run() would have returned while b's operation waits");
    b.cancel();
    BOOST_TEST(ctx.run_one_for(5s) == 1U);
    BOOST_TEST(done == 2);
    BOOST_TEST(ctx.stopped(), "run() would wait with no operation left");
}

namespace {

// An executor of an io_context that cannot track work (prefer(outstanding_work.tracked)
// leaves it as it is), as a user's may be.
class untracked_executor {
public:
    explicit untracked_executor(asio::io_context& ctx) noexcept : ctx_(&ctx) {}
    asio::io_context& query(asio::execution::context_t) const noexcept { return *ctx_; }
    static constexpr asio::execution::blocking_t query(asio::execution::blocking_t) noexcept {
        return asio::execution::blocking.never;
    }
    untracked_executor require(asio::execution::blocking_t::never_t) const noexcept { return *this; }
    template <typename F>
    void execute(F f) const {
        asio::post(ctx_->get_executor(), std::move(f));
    }
    bool operator==(const untracked_executor&) const noexcept = default;

private:
    asio::io_context* ctx_;
};

} // namespace

// The context's work is kept by a member that can keep it: an id on an executor that
// cannot track work, waiting first, does not leave the other ids' operations without it.
BOOST_AUTO_TEST_CASE(an_executor_that_cannot_track_work_leaves_the_others_theirs) {
    asio::io_context channel_ctx, ctx;
    event_channel channel(channel_ctx);
    cm_id a(asio::any_io_executor(untracked_executor(ctx)), channel), b(ctx.get_executor(), channel);
    int done = 0;
    a.async_next_event([&](error_code, cm_event) { ++done; });
    b.async_next_event([&](error_code, cm_event) { ++done; });
    ctx.run_for(50ms);
    BOOST_TEST(!ctx.stopped(), "run() returned while b's operation waits");
    a.cancel();
    b.cancel();
    ctx.restart();
    BOOST_TEST(run_until(
        ctx, [&] { return done == 2; }, 5s));
}

BOOST_AUTO_TEST_CASE(teardown_with_events_in_flight_leaks_nothing) {
    {
        // librdmacm opens the device once per process and keeps it: do that first. Running
        // the context until it runs out of work also waits out every destroy submitted
        // before (the destroyer works in order).
        asio::io_context ctx;
        {
            event_channel channel(ctx);
            make_listener(channel);
        }
        ctx.run_for(30s);
        BOOST_REQUIRE(ctx.stopped());
    }
    const auto fds_before = open_fds();
    {
        asio::io_context ctx;
        {
            event_channel channel(ctx);
            auto l = make_listener(channel);
            std::vector<cm_id> clients;
            // Requests and connects in every stage of flight when everything goes away.
            run(ctx, [&]() -> awaitable<void> {
                for (int i = 0; i < 8; ++i) {
                    clients.emplace_back(channel);
                    co_await prepare_client(clients.back(), l.local_endpoint().port());
                    asio::co_spawn(ctx, clients.back().async_connect(conn_params{}, use_awaitable), asio::detached);
                }
                auto req = co_await l.async_get_request(use_awaitable);
                auto attr = rc_qp_attr();
                req.id.create_qp(attr);
                asio::co_spawn(ctx, req.id.async_accept(conn_params{}, use_awaitable), asio::detached);
            }());
        } // ids, listener (with requests queued) and channel are gone: all destroyed on the reader
        // With nothing left alive, the reader stops and the context runs out of work (siw
        // may hold a connecting id for its 10 s MPA time-out: off this thread).
        ctx.run_for(30s);
        BOOST_TEST(ctx.stopped());
    }
    const auto leaked = fds_opened_since(fds_before);
    BOOST_TEST(leaked.empty(), "still open: " << leaked);
}

BOOST_AUTO_TEST_CASE(the_context_may_go_before_the_library_lets_go_of_its_ids) {
    // Ids are destroyed on the library's own thread, which may still hold some (and their
    // strands) when the user has already destroyed the io_context: it must not touch the
    // context's Asio parts then (ASan: heap-use-after-free in a strand's destructor).
    {
        asio::io_context ctx;
        event_channel channel(ctx);
        auto l = make_listener(channel);
        std::vector<cm_id> ids;
        run(ctx, [&]() -> awaitable<void> {
            for (int i = 0; i < 32; ++i) {
                ids.emplace_back(asio::make_strand(ctx), channel);
                co_await prepare_client(ids.back(), l.local_endpoint().port());
            }
        }());
        for (auto& id : ids) id.async_connect(conn_params{}, asio::detached);
    } // ids, listener, channel and then the context go at once: no run in between
    BOOST_TEST(wait_out_destroys());
}

BOOST_FIXTURE_TEST_CASE(peer_disconnect_reaches_next_event_in_order, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        cm_id client(*channel);
        co_await prepare_client(client, l.local_endpoint().port());
        asio::co_spawn(ctx, client.async_connect(conn_params{}, use_awaitable), asio::detached);
        auto req = co_await l.async_get_request(use_awaitable);
        auto attr = rc_qp_attr();
        req.id.create_qp(attr);
        co_await req.id.async_accept(conn_params{}, use_awaitable);
        // The server disconnects; the client never asked, so DISCONNECTED is its next event.
        asio::co_spawn(ctx, req.id.async_disconnect(use_awaitable), asio::detached);
        auto ev = co_await client.async_next_event(use_awaitable);
        BOOST_TEST(std::string(to_string(ev.type())) == to_string(RDMA_CM_EVENT_DISCONNECTED));
        co_await client.async_disconnect(use_awaitable); // answers it: completes at once
    }());
}

// A connect in flight closed when its id is the device's last in librdmacm (the listener and
// the request closed before it, none of them waited for): the id goes before its queue pair
// (siw holds the QP's destruction while connecting), and librdmacm frees its protection
// domain of the device with the device's last id, which failed while that queue pair used
// it: the provider's domain leaked (LeakSanitizer, rxe and siw). A reference on the device
// is held across the destroy now. The ASan build asks LeakSanitizer at once.
BOOST_FIXTURE_TEST_CASE(a_connect_closed_as_its_device_s_last_id_leaves_nothing, channel_fixture) {
    run(ctx, [&]() -> awaitable<void> {
        auto l = make_listener(*channel);
        cm_id client(*channel);
        co_await prepare_client(client, l.local_endpoint().port());
        client.async_connect(conn_params{}, asio::detached);
        auto req = co_await l.async_get_request(use_awaitable);
        // In this order on the destroyer thread, the client last, still connecting.
        l.close();
        req.id.close();
        client.close();
        co_await client.async_close(use_awaitable);
    }());
    BOOST_TEST(!leak_found_so_far());
}

namespace {
// A cancellation slot's handler whose destructor calls back into the object it was put in
// a slot for — user code: a previous operation's handler may do anything when it goes.
template <typename Object>
struct calls_back_when_gone {
    Object* object;
    calls_back_when_gone(Object* o) : object(o) {}
    calls_back_when_gone(calls_back_when_gone&& other) noexcept : object(std::exchange(other.object, nullptr)) {}
    void operator()(asio::cancellation_type) {}
    ~calls_back_when_gone() {
        if (object) object->close();
    }
};

// Runs `start` on a thread of its own; a deadlock ends the binary (its thread cannot be joined).
template <typename F>
void within_ten_seconds(const char* name, F start) {
    std::packaged_task<void()> task(std::move(start));
    auto done = task.get_future();
    std::thread t(std::move(task));
    if (done.wait_for(10s) != std::future_status::ready) {
        std::fprintf(stderr, "%s: deadlocked\n", name);
        std::_Exit(1);
    }
    t.join();
    done.get();
}
} // namespace

// The fifth review's F5-7: the core puts an operation's canceller into its handler's slot
// under the id's (the queue pair's) lock, and installing into a slot destroys what it held
// — a handler of the user's, whose destructor may call back into the same object (here
// close(), which takes that lock: a deadlock if it ran there). It does not run there:
// Boost's any_completion_handler (1.81) makes a cancellation_state on the handler's slot as
// the initiation type-erases the handler, before any lock of ours, and the core installs
// into that state's own slot. Held here so that a change (of Boost, or of how handlers are
// erased) that moves the destruction under a lock is caught: both kinds of object, rxe and
// siw. The operation starts after the close, and is refused.
BOOST_FIXTURE_TEST_CASE(a_slot_s_previous_handler_may_call_back_when_an_operation_replaces_it, channel_fixture) {
    cm_id id(*channel);
    run(ctx,
        [&]() -> awaitable<void> { co_await id.async_resolve_address(device_endpoint(1), 2000ms, use_awaitable); }());
    queue_pair qp(id);
    std::array<std::byte, 64> buf{};
    // Gone before the id: the id may be the device's last (memory_region's documentation).
    std::optional<memory_region> mr(std::in_place, qp.pd(), buf);

    asio::cancellation_signal qp_signal, id_signal;
    qp_signal.slot().emplace<calls_back_when_gone<queue_pair>>(&qp);
    std::optional<error_code> received;
    within_ten_seconds("a queue pair's receive", [&] {
        qp.async_receive(*mr, buf, asio::bind_cancellation_slot(qp_signal.slot(), [&](error_code ec, std::size_t) {
            received = ec;
        }));
    });
    BOOST_TEST(run_until(
        ctx, [&] { return received.has_value(); }, 10s));
    BOOST_TEST(!qp.is_open(), "the handler going closed it");
    mr.reset();

    id_signal.slot().emplace<calls_back_when_gone<cm_id>>(&id);
    std::optional<error_code> event;
    within_ten_seconds("an id's next event", [&] {
        id.async_next_event(
            asio::bind_cancellation_slot(id_signal.slot(), [&](error_code ec, cm_event) { event = ec; }));
    });
    BOOST_TEST(run_until(
        ctx, [&] { return event.has_value(); }, 10s));
    BOOST_TEST(*event == make_error_code(errc::not_open), event->message()); // closed as it started
}
