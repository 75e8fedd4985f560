#pragma once
// What the RDMA tests share: an io_context with a channel on the test device, a bounded
// run of a coroutine, endpoints on the device, and a queue pair setup that needs no fd
// per connection.
#include "support/test_device.hpp"
#include "support/threads.hpp"

#include <rdmacm/rdmacm.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace rdmacm::test {

using namespace std::chrono_literals;
namespace asio = boost::asio;

// An endpoint on the test device's IPv4 address.
inline endpoint device_endpoint(unsigned short port = 0) { return {asio::ip::make_address(test_device().ipv4), port}; }

// Small RC queue pair attributes; librdmacm creates the CQs (and a completion channel).
inline ibv_qp_init_attr rc_qp_attr() { return rc_qp_init_attr(2); }

// What an exception says, for failure messages.
inline std::string what(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "a non-std exception";
    }
}

// Runs `ctx` until `done()`, at most `limit` (a user's event channel keeps its context
// running while it lives, so run() alone would not return).
template <typename Predicate>
bool run_until(asio::io_context& ctx, Predicate done, std::chrono::steady_clock::duration limit = 30s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    // In short slices: `done` may be made true by another thread, with nothing to run here.
    while (!done() && std::chrono::steady_clock::now() < deadline) ctx.run_one_for(std::chrono::milliseconds(10));
    ctx.restart();
    return done();
}

// Runs `ctx` until it runs out of work, at most `limit`: whether it did (a context retired
// after its ids went or moved away; ready to run again after).
inline bool runs_out_of_work(asio::io_context& ctx, std::chrono::steady_clock::duration limit = 30s) {
    ctx.restart();
    ctx.run_for(limit);
    const bool out = ctx.stopped();
    ctx.restart();
    return out;
}

// Runs both contexts (on this thread, `a` polled between `b`'s slices) until `done()`, at most `limit`.
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

// Runs `ctx` until `co` finishes, at most `limit`; fails the test if it did not, and
// rethrows what it threw.
template <typename Awaitable>
void run(asio::io_context& ctx, Awaitable co, std::chrono::steady_clock::duration limit = 30s) {
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(ctx, std::move(co), [&](std::exception_ptr e) {
        done = true;
        error = e;
    });
    BOOST_REQUIRE_MESSAGE(run_until(
                              ctx, [&] { return done; }, limit),
                          "the test coroutine did not finish in time");
    if (error) std::rethrow_exception(error);
}

// An io_context with an event channel: most tests need exactly this. Checks made on
// other threads (RDMACM_TEST_MT) are reported when the test ends. A test that leaves work
// behind fails (as Boost.MySQL's fixtures do): once the test's objects and the channel are
// gone, the context must run out of work — every operation completed, every id destroyed.
// Within 30 s: siw holds the teardown of a connection attempt up to its 10 s MPA time-out
// (semantics T2), and a 10 s bound failed once under a CPU hog (cancel_test).
struct channel_fixture {
    asio::io_context ctx;
    std::optional<event_channel> channel{std::in_place, ctx};
    ~channel_fixture() {
        channel.reset();
        ctx.restart(); // (some tests stop it)
        ctx.run_for(30s);
        BOOST_TEST(ctx.stopped(), "the test left work behind: its io_context still had some 30 s after it ended");
        report_thread_checks();
    }
};

// Connect options that create a small RC queue pair before connecting.
inline connect_options with_qp() {
    connect_options o;
    o.qp = rc_qp_attr();
    return o;
}

// Accepts one connection on `l` into `out` (with a queue pair), on the listener's executor.
inline asio::awaitable<void> accept_into(listener& l, std::optional<cm_id>& out) {
    auto req = co_await l.async_get_request(asio::use_awaitable);
    auto attr = rc_qp_attr();
    req.id.create_qp(attr);
    co_await req.id.async_accept(conn_params{}, asio::use_awaitable);
    out.emplace(std::move(req.id));
}

// Connects `client`, whose channel `ch` runs on `ctx` (run here, by hand), to `l` (served
// on `server_ctx` by another thread) into `server`; then the server disconnects, and this
// returns once its DISCONNECTED waits, unread, in the kernel queue of `ch`.
inline void connect_and_queue_peer_disconnect(asio::io_context& ctx, event_channel& ch, cm_id& client, listener& l,
                                              asio::io_context& server_ctx, std::optional<cm_id>& server) {
    auto accepted = asio::co_spawn(server_ctx, accept_into(l, server), asio::use_future);
    bool connected = false;
    async_connect(client, device_endpoint(l.local_endpoint().port()), with_qp(), [&](error_code ec, cm_event) {
        BOOST_TEST(!ec, ec.message());
        connected = true;
    });
    BOOST_REQUIRE(run_until(ctx, [&] { return connected; }));
    BOOST_REQUIRE(accepted.wait_for(30s) == std::future_status::ready);
    server->async_disconnect([](error_code) {});
    pollfd p{ch.native_handle()->fd, POLLIN, 0};
    BOOST_REQUIRE(::poll(&p, 1, 10'000) == 1);
}

// The volume of the volume tests (1,000 connections, 10,000 messages): under a sanitizer,
// which makes every step 5 to 20 times slower, a fifth — the same paths, in a fifth of the
// time (they took 100 s each under TSan). The suite as shipped runs them in full.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int sanitized_volume_divisor = 5;
#else
constexpr int sanitized_volume_divisor = 1;
#endif
constexpr int at_volume(int n) { return n / sanitized_volume_divisor; }

// siw (Debian 6.1) refuses QPs beyond a few dozen per process (rdma_create_qp: ENOSPC;
// raw librdmacm hits it at 27 client+server pairs): tests of many connections stay below.
inline bool is_siw() { return test_device().name.rfind("siw", 0) == 0; }
constexpr int siw_connection_limit = 20;

// One CQ for every QP: librdmacm would otherwise make a CQ pair and a completion channel
// (an fd) per QP. Usable from any thread; never polled (the QPs carry no traffic).
// Destroy it (destroy_cq) once every QP on it is gone.
struct shared_cq {
    ibv_cq* cq = nullptr;
    std::mutex mutex;
    ibv_qp_init_attr attr(ibv_context* verbs) {
        std::lock_guard lock(mutex);
        if (!cq) cq = ibv_create_cq(verbs, 4096, nullptr, nullptr, 0);
        RDMACM_TEST_MT(cq);
        auto a = rc_qp_attr();
        a.cap.max_send_wr = a.cap.max_recv_wr = 1;
        a.send_cq = a.recv_cq = cq;
        return a;
    }
    void destroy() {
        if (cq)
            BOOST_TEST(ibv_destroy_cq(std::exchange(cq, nullptr)) == 0,
                       "a queue pair on the shared CQ outlived its context's work (EBUSY: still attached)");
    }
};

// Whether tests that change the machine's devices may run (RDMACM_TEST_DESTRUCTIVE=1: only
// the test bed's throw-away VM sets it). If not, says so in the words ctest's
// SKIP_REGULAR_EXPRESSION takes for a skip.
inline bool destructive_tests_enabled() {
    const char* enabled = std::getenv("RDMACM_TEST_DESTRUCTIVE");
    if (enabled && std::string_view(enabled) == "1") return true;
    std::cout << "destructive test not enabled (RDMACM_TEST_DESTRUCTIVE=1, in the test bed's VM)\n";
    return false;
}

// A listener on the test device, bound to a free port.
inline listener make_listener(event_channel& ch) {
    listener l(ch);
    l.bind(device_endpoint());
    l.listen();
    return l;
}

// Whether every destroy the library was given so far has run, waiting up to `limit`: it
// destroys on one thread, in order, so a listener closed now is destroyed after them, and
// the context the listener was made on runs out of work only then.
inline bool wait_out_destroys(std::chrono::steady_clock::duration limit = 30s) {
    asio::io_context later;
    {
        event_channel channel(later);
        make_listener(channel);
    }
    later.run_for(limit);
    return later.stopped();
}

} // namespace rdmacm::test
