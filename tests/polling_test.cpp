// Polling mode (queue_pair_options::poll_for) on the kernel CM and a real (soft) device:
// what the mode promises, observed through the completion channel's reads
// (ibv_get_cq_event, counted by the --wrap layer, support/faults.cpp): a busy-polling queue
// pair takes no wake-up per completion where an event-driven one takes one; an adaptive one
// sleeps once idle and is woken by the next completion; a polling context still runs its
// timers and CM events, and runs out of work once its queue pairs are closed (the fixture).
#include "support/connection_pair.hpp"
#include "support/faults.hpp"
#include "support/fixture.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

using namespace rdmacm;
using namespace rdmacm::test;

namespace {

int wake_ups() { return faults::calls("ibv_get_cq_event"); }

// Round trips of a sequence number over a connected pair, driven by completion callbacks
// (as a latency-minded application writes them): the client sends n, the server echoes it.
struct ping_pong {
    connection_pair& p;
    std::vector<std::byte> client_buf = std::vector<std::byte>(8), server_buf = std::vector<std::byte>(8);
    memory_region client_mr{p.client_qp->pd(), client_buf}, server_mr{p.server_qp->pd(), server_buf};
    std::uint32_t sent = 0, echoed = 0, wanted = 0;
    bool in_order = true;
    error_code error;

    explicit ping_pong(connection_pair& pair) : p(pair) {
        serve();
        listen_for_echo();
    }
    // `n` more round trips, one at a time.
    void run(std::uint32_t n) {
        wanted += n;
        send_next();
    }
    bool done() const { return echoed == wanted || error; }

private:
    static std::span<std::byte> in(std::vector<std::byte>& b) { return std::span(b).first(4); }
    static std::span<std::byte> out(std::vector<std::byte>& b) { return std::span(b).last(4); }
    void fail(error_code ec) {
        if (!error && ec != asio::error::operation_aborted) error = ec;
    }
    void send_next() {
        ++sent;
        std::memcpy(out(client_buf).data(), &sent, 4);
        p.client_qp->async_send(client_mr, out(client_buf), [this](error_code ec, std::size_t) { fail(ec); });
    }
    void serve() {
        p.server_qp->async_receive(server_mr, in(server_buf), [this](error_code ec, std::size_t) {
            if (ec) return fail(ec);
            std::memcpy(out(server_buf).data(), in(server_buf).data(), 4);
            serve();
            p.server_qp->async_send(server_mr, out(server_buf), [this](error_code e, std::size_t) { fail(e); });
        });
    }
    void listen_for_echo() {
        p.client_qp->async_receive(client_mr, in(client_buf), [this](error_code ec, std::size_t) {
            if (ec) return fail(ec);
            std::uint32_t n = 0;
            std::memcpy(&n, in(client_buf).data(), 4);
            in_order = in_order && n == echoed + 1;
            ++echoed;
            listen_for_echo();
            if (sent < wanted) send_next();
        });
    }
};

queue_pair_options polling_for(std::chrono::nanoseconds poll_for) {
    queue_pair_options o;
    o.max_send_wr = o.max_recv_wr = 4;
    o.poll_for = poll_for;
    return o;
}

constexpr std::uint32_t round_trips = 200;

// An executor that runs what it is given at once, in the caller, and lets what that throws
// go on (as a user's own executor may; an io_context's keeps it for run(), a
// system_executor's terminates): a handler bound to it that throws, throws out of the
// reader's pass that completes it.
struct inline_executor {
    template <typename F>
    void execute(F&& f) const {
        std::forward<F>(f)();
    }
    friend bool operator==(const inline_executor&, const inline_executor&) noexcept { return true; }
    friend bool operator!=(const inline_executor&, const inline_executor&) noexcept { return false; }
};

// A connected pair whose queue pairs poll as `poll_for` says, with its ping_pong, after a
// first round trip (which wakes each reader, and so starts its polling). Closes both queue
// pairs when it goes: their receives complete (aborted) while the ping_pong lives.
struct polled_pair {
    asio::io_context& ctx;
    listener l;
    connection_pair p;
    std::optional<ping_pong> pp;

    polled_pair(channel_fixture& f, std::chrono::nanoseconds poll_for) : ctx(f.ctx), l(make_listener(*f.channel)) {
        run(ctx, connect_pair(l, *f.channel, p, polling_for(poll_for)));
        pp.emplace(p);
        pp->run(1);
        BOOST_REQUIRE(run_until(ctx, [&] { return pp->done(); }));
    }
    ~polled_pair() {
        p.client_qp->close();
        p.server_qp->close();
        ctx.poll();
        ctx.restart();
    }
    polled_pair(const polled_pair&) = delete;
    polled_pair& operator=(const polled_pair&) = delete;
};

// Wake-ups (reads of the completion channel) during `round_trips` round trips, after
// polled_pair's first one.
int wake_ups_in_round_trips(channel_fixture& f, std::chrono::nanoseconds poll_for) {
    polled_pair c(f, poll_for);
    auto& pp = *c.pp;
    const int before = wake_ups();
    pp.run(round_trips);
    BOOST_REQUIRE(run_until(
        f.ctx, [&] { return pp.done(); }, 120s));
    const int woken = wake_ups() - before;
    BOOST_TEST(!pp.error, pp.error.message());
    BOOST_TEST(pp.in_order);
    BOOST_TEST(pp.echoed == round_trips + 1);
    return woken;
}

} // namespace

// The control: the count is real (rxe: 400, one per side and round trip — a send's and a
// receive's completion taken in one wake-up).
BOOST_FIXTURE_TEST_CASE(an_event_driven_queue_pair_takes_a_wake_up_per_completion, channel_fixture) {
    int woken = wake_ups_in_round_trips(*this, {});
    BOOST_TEST(woken >= static_cast<int>(round_trips), woken << " wake-ups for " << round_trips << " round trips");
}

// At most one wake-up per reader, left from before it polled: on siw a reader is now and
// then woken once more than its batches of completions (event-driven, 402 and 403 where
// rxe had 400; polling, 1 in a run where rxe had 0).
BOOST_FIXTURE_TEST_CASE(busy_polling_takes_no_wake_up_per_completion, channel_fixture) {
    int woken = wake_ups_in_round_trips(*this, busy_polling);
    BOOST_TEST(woken <= 2, woken << " wake-ups for " << round_trips << " round trips");
}

// Idle beyond poll_for, the reader re-arms the queue and sleeps: the next completion comes
// through the channel (a wake-up); a reader that kept polling would need none.
BOOST_FIXTURE_TEST_CASE(adaptive_polling_sleeps_once_idle, channel_fixture) {
    polled_pair c(*this, std::chrono::milliseconds(20));
    auto& pp = *c.pp;
    pp.run(2);
    BOOST_REQUIRE(run_until(ctx, [&] { return pp.done(); }));
    asio::steady_timer idle(ctx, 300ms); // 15 times poll_for
    bool idled = false;
    idle.async_wait([&](error_code) { idled = true; });
    BOOST_REQUIRE(run_until(ctx, [&] { return idled; }));
    const int before = wake_ups();
    pp.run(1);
    BOOST_REQUIRE(run_until(ctx, [&] { return pp.done(); }));
    BOOST_TEST(!pp.error, pp.error.message());
    BOOST_TEST(pp.in_order);
    BOOST_TEST(wake_ups() > before, "the round trip after the idle time came without a wake-up: still polling");
}

// One thread, busy-polling queue pairs with receives always posted: its timers and the
// CM's events still run between polling slices.
BOOST_FIXTURE_TEST_CASE(a_busy_polling_context_runs_its_timers_and_cm_events, channel_fixture) {
    polled_pair c(*this, busy_polling); // both readers polling from here on
    auto& p = c.p;

    asio::steady_timer timer(ctx, 20ms);
    bool fired = false;
    timer.async_wait([&](error_code ec) { fired = !ec; });
    BOOST_TEST(run_until(
                   ctx, [&] { return fired; }, 10s),
               "a timer did not fire beside busy polling");

    // The client disconnects; the server sees it (a CM event) and answers (on IB the
    // client's disconnect completes then).
    std::optional<rdma_cm_event_type> server_saw;
    bool disconnected = false, answered = false;
    p.server->async_next_event([&](error_code ec, cm_event ev) {
        server_saw = ec ? RDMA_CM_EVENT_REJECTED : ev.type();
        p.server->async_disconnect([&](error_code) { answered = true; });
    });
    p.client->async_disconnect([&](error_code) { disconnected = true; });
    BOOST_TEST(run_until(
                   ctx, [&] { return disconnected && answered; }, 20s),
               "the CM's events did not come beside busy polling");
    BOOST_TEST((server_saw == RDMA_CM_EVENT_DISCONNECTED));
    // channel_fixture: the context then runs out of work — polling stopped with nothing
    // outstanding.
}

// A handler that throws goes out of run(), as in Asio, and the polling goes on: later
// round trips complete, without a wake-up (a polling chain that stopped would leave the
// queue unarmed: nothing would complete again). The io_context captures what a handler it
// runs inline throws and rethrows it from run() once the polling slice has returned;
// spin()'s own catch is for executors that run handlers inline without that (not tested).
BOOST_FIXTURE_TEST_CASE(a_throwing_handler_does_not_stop_the_polling, channel_fixture) {
    polled_pair c(*this, busy_polling);
    auto& p = c.p;
    auto& pp = *c.pp;

    std::vector<std::byte> target(8), source(8);
    memory_region remote(p.server_qp->pd(), target, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    memory_region local(p.client_qp->pd(), source);
    bool thrown = false;
    p.client_qp->async_rdma_write(local, source, to_remote(remote, target),
                                  [](error_code, std::size_t) { throw std::runtime_error("thrown by a handler"); });
    try {
        run_until(
            ctx, [] { return false; }, 5s);
    } catch (const std::runtime_error&) {
        thrown = true;
    }
    ctx.restart();
    BOOST_REQUIRE(thrown);

    const int before = wake_ups();
    pp.run(20);
    BOOST_TEST(run_until(ctx, [&] { return pp.done(); }), "no round trip completed after the throw");
    BOOST_TEST(!pp.error, pp.error.message());
    BOOST_TEST(pp.echoed == 21u);
    BOOST_TEST(wake_ups() - before <= 2);
}

// A handler that throws out of the pass that woke for its completion (bound to an executor
// that runs it inline and lets the exception go): the exception leaves run(), and the queue
// pair still completes what comes next. The pass hands completions over before it re-arms
// the queue (the reply a handler sends goes first), so a throw there must not leave the
// queue unarmed — event-driven, or polling that had gone to sleep (adaptive, idle).
static void throwing_through_an_inline_executor(channel_fixture& f, std::chrono::nanoseconds poll_for) {
    polled_pair c(f, poll_for);
    auto& p = c.p;
    auto& pp = *c.pp;
    asio::steady_timer idle(f.ctx, 200ms); // ten times the adaptive poll_for: asleep
    bool idled = false;
    idle.async_wait([&](error_code) { idled = true; });
    BOOST_REQUIRE(run_until(f.ctx, [&] { return idled; }));

    std::vector<std::byte> target(8), source(8);
    memory_region remote(p.server_qp->pd(), target, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    memory_region local(p.client_qp->pd(), source);
    bool thrown = false;
    p.client_qp->async_rdma_write(local, source, to_remote(remote, target),
                                  asio::bind_executor(inline_executor{}, [](error_code, std::size_t) {
                                      throw std::runtime_error("thrown by a handler");
                                  }));
    try {
        run_until(
            f.ctx, [] { return false; }, 5s);
    } catch (const std::runtime_error&) {
        thrown = true;
    }
    f.ctx.restart();
    BOOST_REQUIRE(thrown);

    pp.run(20);
    BOOST_TEST(run_until(
                   f.ctx, [&] { return pp.done(); }, 10s),
               "no round trip completed after the throw: the queue pair was left unarmed");
    BOOST_TEST(!pp.error, pp.error.message());
    BOOST_TEST(pp.echoed == 21u);
}

BOOST_FIXTURE_TEST_CASE(a_handler_throwing_through_its_executor_leaves_the_queue_armed, channel_fixture) {
    throwing_through_an_inline_executor(*this, {});
}

BOOST_FIXTURE_TEST_CASE(a_handler_throwing_through_its_executor_wakes_a_sleeping_poller, channel_fixture) {
    throwing_through_an_inline_executor(*this, std::chrono::milliseconds(20));
}
