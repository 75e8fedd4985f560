// Every librdmacm / libibverbs call the library makes (those that are functions, not
// inline verbs), made to fail with each errno it can return, around the real library and
// the kernel CM: the operation completes with that errno, naming the call; nothing hangs;
// the objects stay usable or closable; nothing leaks (the ASan run's LeakSanitizer).
#include "support/faults.hpp"
#include "support/fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <set>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;
using namespace boost::asio::experimental::awaitable_operators;

namespace {

void check(const error_code& ec, const std::string& call, int err) {
    BOOST_TEST(ec.value() == err, ec.message());
    BOOST_TEST((ec.category() == boost::system::system_category()));
    BOOST_TEST(std::string(ec.location().function_name()) == call);
    // What a user sees names the call, not where the library was built.
    BOOST_TEST(std::string(ec.what()).find("/src/") == std::string::npos, ec.what());
    BOOST_TEST(std::string(ec.what()).find("'" + call + "'") != std::string::npos, ec.what());
}

template <typename F>
error_code thrown_by(F f) {
    try {
        f();
    } catch (const boost::system::system_error& e) {
        return e.code();
    }
    return {};
}

// Starts an operation with a callback and runs `ctx` until it completes (bounded).
template <typename Start>
error_code result_of(asio::io_context& ctx, Start start) {
    std::optional<error_code> r;
    start([&](error_code ec, auto&&...) { r = ec; });
    BOOST_REQUIRE_MESSAGE(run_until(
                              ctx, [&] { return r.has_value(); }, 20s),
                          "the operation never completed");
    return *r;
}

// A client id with its route resolved to `l`.
void resolve(asio::io_context& ctx, cm_id& id, const listener& l) {
    auto port = l.local_endpoint().port();
    BOOST_REQUIRE(!result_of(ctx, [&](auto h) { id.async_resolve_address(device_endpoint(port), 2s, h); }));
    BOOST_REQUIRE(!result_of(ctx, [&](auto h) { id.async_resolve_route(2s, h); }));
}

// One scenario per call: reach the call with the fault injected, check what comes back.
struct scenario : channel_fixture {
    void run(const std::string& call, int err) {
        auto l = make_listener(*channel);
        cm_id id(*channel);
        error_code ec;
        auto inject = [&] { faults::inject(call, err); };
        if (call == "rdma_create_event_channel") {
            inject();
            check(thrown_by([&] { event_channel ch(ctx); }), call, err);
        } else if (call == "rdma_create_id") {
            inject();
            check(thrown_by([&] { cm_id other(*channel); }), call, err);
        } else if (call == "rdma_bind_addr" || call == "rdma_listen") {
            listener other(*channel);
            if (call == "rdma_listen") other.bind(device_endpoint());
            inject();
            if (call == "rdma_bind_addr")
                other.bind(device_endpoint(), ec);
            else
                other.listen(16, ec);
            check(ec, call, err);
        } else if (call == "rdma_resolve_addr") {
            inject();
            check(result_of(ctx, [&](auto h) { id.async_resolve_address(device_endpoint(1), 2s, h); }), call, err);
        } else if (call == "rdma_resolve_route") {
            BOOST_REQUIRE(!result_of(ctx, [&](auto h) { id.async_resolve_address(device_endpoint(1), 2s, h); }));
            inject();
            check(result_of(ctx, [&](auto h) { id.async_resolve_route(2s, h); }), call, err);
        } else if (call == "rdma_create_qp") {
            resolve(ctx, id, l);
            auto attr = rc_qp_attr();
            inject();
            id.create_qp(attr, nullptr, ec);
            check(ec, call, err);
        } else if (call == "ibv_create_comp_channel" || call == "ibv_create_cq") {
            resolve(ctx, id, l);
            inject();
            check(thrown_by([&] { queue_pair qp(id); }), call, err);
            queue_pair qp(id); // and then it works
        } else if (call == "rdma_connect") {
            resolve(ctx, id, l);
            auto attr = rc_qp_attr();
            id.create_qp(attr);
            inject();
            check(result_of(ctx, [&](auto h) { id.async_connect({}, h); }), call, err);
        } else if (call == "rdma_accept") {
            // The server's accept fails; closing its id rejects the client, who is told.
            std::optional<error_code> connected;
            async_connect(id, device_endpoint(l.local_endpoint().port()), with_qp(),
                          [&](error_code e, cm_event) { connected = e; });
            std::optional<connection_request> req;
            BOOST_REQUIRE(!result_of(ctx, [&](auto h) {
                l.async_get_request([&, h](error_code e, connection_request r) mutable {
                    req.emplace(std::move(r));
                    h(e);
                });
            }));
            auto attr = rc_qp_attr();
            req->id.create_qp(attr);
            inject();
            check(result_of(ctx, [&](auto h) { req->id.async_accept({}, h); }), call, err);
            req->id.close();
            BOOST_REQUIRE(run_until(
                ctx, [&] { return connected.has_value(); }, 20s));
            BOOST_TEST(bool(*connected)); // rejected (or unreachable): not established, not hung
        } else if (call == "rdma_disconnect") {
            std::optional<cm_id> server;
            test::run(ctx, [&]() -> awaitable<void> {
                co_await (accept_into(l, server) &&
                          async_connect(id, device_endpoint(l.local_endpoint().port()), with_qp(), use_awaitable));
            }());
            inject();
            check(result_of(ctx, [&](auto h) { id.async_disconnect(h); }), call, err);
        } else if (call == "rdma_migrate_id") {
            event_channel other(ctx);
            inject();
            check(result_of(ctx, [&](auto h) { id.async_migrate(other, h); }), call, err);
            // Still usable where it was.
            BOOST_TEST(!result_of(ctx, [&](auto h) { id.async_resolve_address(device_endpoint(1), 2s, h); }));
        } else if (call == "rdma_get_cm_event") {
            // A read that fails loses no event: the channel is still readable, read again.
            run_until(
                ctx, [] { return false; }, 50ms); // the channel's first read is done
            faults::inject(call, err, 1);
            BOOST_TEST(!result_of(ctx, [&](auto h) { id.async_resolve_address(device_endpoint(1), 2s, h); }));
        } else {
            BOOST_FAIL("no scenario for " << call);
        }
        BOOST_TEST(faults::clear() == 0, "the fault was not reached");
        id.close();
        l.close();
        channel.reset();
        ctx.run_for(10s); // everything closed: the context runs out of work
        BOOST_TEST(ctx.stopped());
    }
};

} // namespace

BOOST_AUTO_TEST_CASE(every_call_fails_cleanly_with_each_errno) {
    int injected = 0;
    for (const auto& c : faults::wrapped()) {
        for (int err : c.errnos) {
            BOOST_TEST_CONTEXT(c.name << " failing with " << std::strerror(err)) {
                scenario s;
                s.run(c.name, err);
                ++injected;
            }
        }
    }
    BOOST_TEST_MESSAGE(injected << " faults injected");
    BOOST_TEST(injected >= 40);
}

// The channel's reads failing with ENOMEM again and again (memory short for a while): the
// reader reads again after a pause, not at once — before, the wait it armed fired at once on
// the still-readable fd, and the reader spun its thread — and the event is delivered once
// memory is back.
BOOST_AUTO_TEST_CASE(a_read_failing_with_enomem_again_and_again_is_retried_after_a_pause) {
    asio::io_context ctx;
    event_channel channel(ctx);
    cm_id id(channel);
    run_until(
        ctx, [] { return false; }, 50ms); // the channel's first read is done
    const void* ch = channel.native_handle();
    faults::inject("rdma_get_cm_event", ENOMEM, 1'000'000);
    std::optional<error_code> resolved;
    id.async_resolve_address(device_endpoint(1), 2s, [&](error_code ec) { resolved = ec; });
    const int before = faults::calls("rdma_get_cm_event", ch);
    run_until(
        ctx, [] { return false; }, 300ms);
    const int reads = faults::calls("rdma_get_cm_event", ch) - before;
    faults::clear();
    BOOST_TEST(reads >= 1, "the event was never read");
    // (A pause of 10 ms: about 30 reads.)
    BOOST_TEST(reads <= 60, reads << " reads in 300 ms: the reader spins");
    BOOST_REQUIRE(run_until(
        ctx, [&] { return resolved.has_value(); }, 10s));
    BOOST_TEST(!*resolved, resolved->message());
}
