// The Asio contract, the same for every asynchronous operation, on the kernel CM: for each
// operation, every completion-token style (callback, deferred, use_future, as_tuple with
// use_awaitable), bind_executor(strand), bind_allocator and bind_cancellation_slot, and an
// initiation that names its executor. A handler is called exactly once, never inside the
// initiating call, on its associated executor; the operation's memory comes from the
// handler's allocator and is all given back; each cancellation type does what the
// operation's documentation says. (The same with as_default_on, token-less: default_token_test.
// listener::async_next_event is cm_id's, one template: typed_id.)
#include "support/connection_pair.hpp"
#include "support/counting_allocator.hpp"
#include "support/fixture.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

using namespace rdmacm;
using namespace rdmacm::test;
using asio::awaitable;
using asio::use_awaitable;

namespace {

// What a handler saw, shared by its copies: exactly-once is checked on these counts. A
// handler may run on another thread (a shard's): `ec` is written before `calls` counts it.
struct handler_record {
    std::atomic<int> calls{0};
    std::atomic<bool> inline_call{false};
    std::atomic<bool> on_strand{true};
    error_code ec;
};

// Set around an initiating call, on the thread that makes it.
struct initiating_call {
    std::atomic<bool> active{false};
    const std::thread::id thread = std::this_thread::get_id();
    bool here() const { return active && std::this_thread::get_id() == thread; }
};

// A handler (as Beast's exactly-once helper): records each call and the first argument, and
// whether it ran inside the initiating call.
struct recording_handler {
    std::shared_ptr<handler_record> record;
    const initiating_call* initiating;
    template <typename... Args>
    void operator()(error_code ec, Args&&...) const {
        if (initiating->here()) record->inline_call = true;
        record->ec = ec;
        ++record->calls;
    }
};

// A token that starts nothing: it only looks at the operation's initiation, which must name
// the I/O object's executor, as Asio's do (token adapters such as later Boosts' cancel_after
// ask it for one).
struct inspect_initiation {
    asio::any_io_executor* seen;
};

} // namespace

template <typename... Signatures>
struct boost::asio::async_result<inspect_initiation, Signatures...> {
    template <typename Initiation, typename... Args>
    static void initiate(Initiation&& initiation, inspect_initiation token, Args&&...) {
        typename std::decay_t<Initiation>::executor_type ex = initiation.get_executor();
        *token.seen = ex;
    }
};

namespace {

// How an operation ends when asked to stop, per cancellation type (its documentation).
struct cancellation_contract {
    bool terminal, partial, total; // true: ends with operation_aborted; false: ignored
    // A terminal cancellation may come after the work was done (a send the device finished
    // before the queue pair's flush): then it completes as done, so either outcome is right.
    bool terminal_may_find_it_done = false;
};

// How many operations check_contract starts (one per token style, cancellation type, and
// the initiation's look, which starts none): what a test prepares objects for.
constexpr int contract_starts = 11;

// Runs the contract over `start` for every token style. `start` takes a completion token and
// returns what the initiating function returns; `complete()` makes the operation complete
// (nothing for operations the kernel answers by itself); `expected` the error when it is not
// cancelled. `ctx` is run while waiting: the objects' context, where the handlers of the
// styles that name no executor run, unless the operation's executor is another's (a
// shard's: `initiation_executor()` says which, just before the operation starts).
template <typename Start, typename Complete>
void check_contract(asio::io_context& ctx, const char* name, Start start, Complete complete, error_code expected,
                    cancellation_contract cancel_contract,
                    std::function<asio::any_io_executor()> initiation_executor = {}) {
    BOOST_TEST_CONTEXT(name) {
        initiating_call initiating;
        auto run_one = [&](auto token, const char* style) -> std::shared_ptr<handler_record> {
            auto record = std::make_shared<handler_record>();
            BOOST_TEST_CONTEXT(style) {
                initiating.active = true;
                start(token(recording_handler{record, &initiating}));
                initiating.active = false;
                complete();
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll(); // a second call would come now
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
            }
            return record;
        };

        // A plain callback, and one through deferred.
        auto plain = run_one([](auto h) { return h; }, "callback");
        BOOST_TEST((plain->ec == expected), plain->ec.message());
        {
            auto record = std::make_shared<handler_record>();
            auto op = start(asio::deferred);
            initiating.active = true;
            std::move(op)(recording_handler{record, &initiating});
            initiating.active = false;
            complete();
            BOOST_TEST_CONTEXT("deferred") {
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll();
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
                BOOST_TEST((record->ec == expected), record->ec.message());
            }
        }

        // bind_executor: runs on the strand.
        auto strand = asio::make_strand(ctx);
        auto on_strand = run_one(
            [&](auto h) {
                return asio::bind_executor(strand, [h, strand](error_code ec, auto&&... args) mutable {
                    h.record->on_strand = strand.running_in_this_thread();
                    h(ec, args...);
                });
            },
            "bind_executor(strand)");
        BOOST_TEST(on_strand->on_strand);

        // bind_allocator: the operation's state comes from the handler's allocator, all of it
        // given back by the time the handler has run.
        allocation_count count;
        run_one([&](auto h) { return asio::bind_allocator(counting_allocator<char>(&count), h); }, "bind_allocator");
        BOOST_TEST(count.allocations > 0u);
        BOOST_TEST(count.allocations == count.deallocations);

        // use_future: the future gets the outcome (an error would be thrown by get()).
        // (as_tuple(use_future) does not compile on Boost 1.81: its use_future has no initiate.)
        {
            initiating.active = true;
            auto f = start(asio::use_future);
            initiating.active = false;
            complete();
            BOOST_TEST_CONTEXT("use_future") {
                BOOST_TEST(run_until(
                    ctx, [&] { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }, 10s));
                error_code ec;
                try {
                    f.get();
                } catch (const boost::system::system_error& e) {
                    ec = e.code();
                }
                BOOST_TEST((ec == expected), ec.message());
            }
        }

        // as_tuple(use_awaitable), in a coroutine.
        BOOST_TEST_CONTEXT("as_tuple(use_awaitable)") {
            error_code got;
            run(
                ctx,
                [&]() -> awaitable<void> {
                    auto op = start(asio::as_tuple(use_awaitable));
                    asio::post(ctx, complete); // runs once the co_await below has initiated the operation
                    got = std::get<0>(co_await std::move(op));
                }(),
                10s);
            BOOST_TEST((got == expected), got.message());
        }

        // use_awaitable, in a coroutine: an error is thrown.
        BOOST_TEST_CONTEXT("use_awaitable") {
            error_code got;
            run(
                ctx,
                [&]() -> awaitable<void> {
                    auto op = start(use_awaitable);
                    asio::post(ctx, complete);
                    try {
                        co_await std::move(op);
                    } catch (const boost::system::system_error& e) {
                        got = e.code();
                    }
                }(),
                10s);
            BOOST_TEST((got == expected), got.message());
        }

        // Each cancellation type, emitted once the operation has started; terminal last (it
        // may leave the object good only for closing: a queue pair).
        for (auto [type, aborts] : {std::pair{asio::cancellation_type::partial, cancel_contract.partial},
                                    std::pair{asio::cancellation_type::total, cancel_contract.total},
                                    std::pair{asio::cancellation_type::terminal, cancel_contract.terminal}}) {
            BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type)) {
                asio::cancellation_signal signal;
                auto record = std::make_shared<handler_record>();
                initiating.active = true;
                start(asio::bind_cancellation_slot(signal.slot(), recording_handler{record, &initiating}));
                initiating.active = false;
                signal.emit(type);
                if (!aborts) complete();
                BOOST_TEST(run_until(
                    ctx, [&] { return record->calls > 0; }, 10s));
                ctx.poll();
                ctx.restart();
                BOOST_TEST(record->calls == 1);
                BOOST_TEST(!record->inline_call);
                error_code want = aborts ? error_code(asio::error::operation_aborted) : expected;
                if (type == asio::cancellation_type::terminal && cancel_contract.terminal_may_find_it_done &&
                    record->ec == expected)
                    want = expected;
                BOOST_TEST((record->ec == want), record->ec.message());
            }
        }

        // The initiation names the executor. Last: it starts nothing, while `start` may
        // count the operations it started.
        asio::any_io_executor want =
            initiation_executor ? initiation_executor() : asio::any_io_executor(ctx.get_executor());
        asio::any_io_executor seen;
        start(inspect_initiation{&seen});
        BOOST_TEST((seen == want), "the initiation's get_executor()");
    }
}

} // namespace

// A handler the user type-erased (any_completion_handler, whose type says it has an executor
// whether or not the one inside has) given as the token: it runs on the object's executor.
BOOST_FIXTURE_TEST_CASE(type_erased_handler_as_token, channel_fixture) {
    cm_id id(*channel);
    int calls = 0;
    error_code got;
    asio::any_completion_handler<void(error_code, cm_event)> handler([&](error_code ec, cm_event) {
        ++calls;
        got = ec;
        BOOST_TEST(ctx.get_executor().running_in_this_thread());
    });
    id.async_next_event(std::move(handler));
    id.cancel();
    BOOST_TEST(run_until(
        ctx, [&] { return calls > 0; }, 10s));
    ctx.poll();
    BOOST_TEST(calls == 1);
    BOOST_TEST((got == asio::error::operation_aborted), got.message());
}

// Waits: every cancellation type ends them, nothing lost.
BOOST_FIXTURE_TEST_CASE(waits, channel_fixture) {
    auto l = make_listener(*channel);
    std::deque<cm_id> ids; // a fresh one per operation
    // An event no operation consumes: the answer to a call made on the raw id.
    check_contract(
        ctx, "cm_id::async_next_event",
        [&](auto token) { return ids.emplace_back(*channel).async_next_event(std::move(token)); },
        [&] {
            endpoint to = device_endpoint();
            BOOST_REQUIRE(rdma_resolve_addr(ids.back().native_handle(), nullptr, to.data(), 2000) == 0);
        },
        {}, {true, true, true});
    // A connection request (dropped by the handler: rejected).
    check_contract(
        ctx, "listener::async_get_request", [&](auto token) { return l.async_get_request(std::move(token)); },
        [&] { async_connect(ids.emplace_back(*channel), l.local_endpoint(), with_qp(), [](error_code, cm_event) {}); },
        {}, {true, true, true});
}

// CM operations: terminal cancellation abandons the kernel's work; the others are ignored.
BOOST_FIXTURE_TEST_CASE(cm_operations, channel_fixture) {
    std::deque<cm_id> ids;
    check_contract(
        ctx, "cm_id::async_resolve_address",
        [&](auto token) {
            return ids.emplace_back(*channel).async_resolve_address(device_endpoint(), 2s, std::move(token));
        },
        [] {}, {}, {true, false, false});
    check_contract(
        ctx, "cm_id::async_resolve_address (from a local address)",
        [&](auto token) {
            return ids.emplace_back(*channel).async_resolve_address(device_endpoint(0), device_endpoint(), 2s,
                                                                    std::move(token));
        },
        [] {}, {}, {true, false, false});
}

// Migrations that complete at once: an id already synchronous (the first call moves it),
// a listening listener (refused: listeners move before listen). No cancellation.
BOOST_FIXTURE_TEST_CASE(migrations_that_complete_at_once, channel_fixture) {
    cm_id id(*channel);
    check_contract(
        ctx, "cm_id::async_enter_synchronous_mode",
        [&](auto token) { return id.async_enter_synchronous_mode(std::move(token)); }, [] {}, {},
        {false, false, false});
    auto l = make_listener(*channel);
    event_channel other(ctx);
    check_contract(
        ctx, "listener::async_migrate", [&](auto token) { return l.async_migrate(other, std::move(token)); }, [] {},
        errc::listener_cannot_migrate, {false, false, false});
}

// `n` ids on `ch` with their address resolved to `to`; with their route and an RC queue
// pair too if `route`.
awaitable<void> resolve_ids(event_channel& ch, endpoint to, std::deque<cm_id>& out, int n, bool route) {
    for (int i = 0; i < n; ++i) {
        auto& id = out.emplace_back(ch);
        co_await id.async_resolve_address(to, 2s, use_awaitable);
        if (!route) continue;
        co_await id.async_resolve_route(2s, use_awaitable);
        auto attr = rc_qp_attr();
        id.create_qp(attr);
    }
}

// Takes the listener's requests until it is closed, giving each a queue pair and accepting
// it (whatever comes of that), into `out`.
awaitable<void> accept_all(listener& l, std::deque<cm_id>& out) {
    for (;;) {
        auto [ec, req] = co_await l.async_get_request(asio::as_tuple(use_awaitable));
        if (ec) co_return;
        auto& id = out.emplace_back(std::move(req.id));
        auto attr = rc_qp_attr();
        id.create_qp(attr);
        id.async_accept(conn_params{}, [](error_code, cm_event) {});
    }
}

BOOST_FIXTURE_TEST_CASE(route_resolution, channel_fixture) {
    auto l = make_listener(*channel);
    std::deque<cm_id> ids;
    run(ctx, resolve_ids(*channel, device_endpoint(l.local_endpoint().port()), ids, contract_starts, false));
    std::size_t next = 0;
    check_contract(
        ctx, "cm_id::async_resolve_route",
        [&](auto token) { return ids.at(next++).async_resolve_route(2s, std::move(token)); }, [] {}, {},
        {true, false, false});
}

// Connect (the server accepts every request) and accept (clients connect to it).
BOOST_FIXTURE_TEST_CASE(connect_and_accept, channel_fixture) {
    std::deque<cm_id> servers;
    {
        auto l = make_listener(*channel);
        asio::co_spawn(ctx, accept_all(l, servers), asio::detached);
        std::deque<cm_id> clients;
        run(ctx, resolve_ids(*channel, device_endpoint(l.local_endpoint().port()), clients, contract_starts, true));
        std::size_t next = 0;
        check_contract(
            ctx, "cm_id::async_connect",
            [&](auto token) { return clients.at(next++).async_connect(conn_params{}, std::move(token)); }, [] {}, {},
            {true, false, false});
    }
    servers.clear();

    auto l = make_listener(*channel);
    std::deque<cm_id> clients, requests;
    run(ctx, resolve_ids(*channel, device_endpoint(l.local_endpoint().port()), clients, contract_starts, true));
    for (auto& c : clients) c.async_connect(conn_params{}, [](error_code, cm_event) {});
    run(ctx, [&]() -> awaitable<void> {
        while (requests.size() < clients.size()) {
            auto req = co_await l.async_get_request(use_awaitable);
            auto attr = rc_qp_attr();
            req.id.create_qp(attr);
            requests.push_back(std::move(req.id));
        }
    }());
    std::size_t next = 0;
    check_contract(
        ctx, "cm_id::async_accept",
        [&](auto token) { return requests.at(next++).async_accept(conn_params{}, std::move(token)); }, [] {}, {},
        {true, false, false});
}

// The composed connects (resolve, route, queue pair, connect): the one with a raw queue
// pair, and the one that yields a queue_pair and a receive_pool. Terminal cancellation,
// passed to the step in progress. Each on fresh ids, its servers closed after it (siw
// refuses queue pairs beyond a few dozen per process).
BOOST_FIXTURE_TEST_CASE(composed_connects, channel_fixture) {
    auto on_fresh_ids = [&](const char* name, auto connect) {
        std::deque<cm_id> servers, clients;
        auto l = make_listener(*channel);
        asio::co_spawn(ctx, accept_all(l, servers), asio::detached);
        check_contract(
            ctx, name, [&](auto token) { return connect(clients.emplace_back(*channel), l.local_endpoint(), token); },
            [] {}, {}, {true, false, false});
    };
    on_fresh_ids("async_connect", [](cm_id& id, const endpoint& to, auto token) {
        return async_connect(id, to, with_qp(), std::move(token));
    });
    on_fresh_ids("async_connect yielding a queue_pair and a receive_pool",
                 [](cm_id& id, const endpoint& to, auto token) {
                     return async_connect(id, to,
                                          data_path_options{.qp = {.max_send_wr = 1, .max_recv_wr = 1},
                                                            .receives = {.depth = 1, .message_size = 16}},
                                          std::move(token));
                 });
}

// Disconnect: completes on this side's DISCONNECTED (on IB once the peer disconnects too).
BOOST_FIXTURE_TEST_CASE(disconnects, channel_fixture) {
    auto l = make_listener(*channel);
    std::deque<connection_pair> pairs(contract_starts);
    for (auto& p : pairs) run(ctx, connect_pair(l, *channel, p));
    std::size_t next = 0;
    check_contract(
        ctx, "cm_id::async_disconnect",
        [&](auto token) { return pairs.at(next++).server->async_disconnect(std::move(token)); },
        [&] { pairs.at(next - 1).client->async_disconnect([](error_code) {}); }, {}, {true, false, false});
}

// A queue pair's receive (terminal: the queue pair goes to error) and a migration (none).
BOOST_FIXTURE_TEST_CASE(data_path_and_migration, channel_fixture) {
    auto l = make_listener(*channel);
    connection_pair p;
    run(ctx, connect_pair(l, *channel, p));
    event_channel other(ctx);
    bool here = true;
    check_contract(
        ctx, "cm_id::async_migrate",
        [&](auto token) {
            here = !here;
            return p.server->async_migrate(here ? *channel : other, std::move(token));
        },
        [] {}, {}, {false, false, false});
    // Naming the executor the id goes to (a strand): the initiation's executor is that one.
    const asio::any_io_executor strand = asio::make_strand(ctx);
    check_contract(
        ctx, "cm_id::async_migrate (with an executor)",
        [&](auto token) {
            here = !here;
            return p.server->async_migrate(here ? *channel : other, strand, std::move(token));
        },
        [] {}, {}, {false, false, false}, [&] { return strand; });
    run(ctx, [&]() -> awaitable<void> { // back to the context's executor, its queue pair with it
        co_await p.server->async_migrate(*channel, use_awaitable);
    }());

    std::vector<std::byte> cbuf(16), sbuf(16);
    memory_region cmr(p.client_qp->pd(), cbuf), smr(p.server_qp->pd(), sbuf);
    check_contract(
        ctx, "queue_pair::async_receive",
        [&](auto token) { return p.server_qp->async_receive(smr, sbuf, std::move(token)); },
        [&] { p.client_qp->async_send(cmr, cbuf, [](error_code, std::size_t) {}); }, {}, {true, false, false});

    // Moved: the initiations of the id's and its queue pair's operations name where they are
    // now (their executor is read when asked, not kept from before).
    run(ctx, [&]() -> awaitable<void> { co_await p.server->async_migrate(other, strand, use_awaitable); }());
    asio::any_io_executor seen;
    p.server_qp->async_receive(smr, sbuf, inspect_initiation{&seen});
    BOOST_TEST((seen == strand), "queue_pair::async_receive: the initiation's executor after a move");
    seen = {};
    p.server->async_next_event(inspect_initiation{&seen});
    BOOST_TEST((seen == strand), "cm_id::async_next_event: the initiation's executor after a move");
}

// A queue pair's send, RDMA write and RDMA read: terminal cancellation puts the queue pair in
// error (see data_path_and_migration), and finds the work request flushed or done. Each on a
// connection of its own: the terminal case leaves the queue pair good only for closing.
BOOST_FIXTURE_TEST_CASE(sends_writes_and_reads, channel_fixture) {
    constexpr int remote_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    auto l = make_listener(*channel);
    std::vector<std::byte> cbuf(16), sbuf(16);
    auto on_a_connection_of_its_own = [&](const char* name, auto start_on) {
        connection_pair p;
        run(ctx, connect_pair(l, *channel, p));
        memory_region cmr(p.client_qp->pd(), cbuf, remote_access), smr(p.server_qp->pd(), sbuf, remote_access);
        // A receive for each send (iWARP has no RNR retry: a send must find one posted).
        for (int i = 0; i < contract_starts; ++i) p.server_qp->async_receive(smr, sbuf, [](error_code, std::size_t) {});
        check_contract(
            ctx, name, [&](auto token) { return start_on(*p.client_qp, cmr, to_remote(smr, sbuf), std::move(token)); },
            [] {}, {}, {true, false, false, true});
        p.client_qp->close();
        p.server_qp->close();
        ctx.poll();
        ctx.restart();
    };
    // Send and write gather from two parts (a buffer sequence).
    auto two_parts = [&](memory_region& mr) {
        return std::array<const_registered_buffer, 2>{buffer(mr, std::span(cbuf).first(8)),
                                                      buffer(mr, std::span(cbuf).subspan(8))};
    };
    on_a_connection_of_its_own("queue_pair::async_send", [&](queue_pair& qp, memory_region& mr, remote_buffer, auto t) {
        return qp.async_send(two_parts(mr), std::move(t));
    });
    on_a_connection_of_its_own("queue_pair::async_rdma_write",
                               [&](queue_pair& qp, memory_region& mr, remote_buffer to, auto t) {
                                   return qp.async_rdma_write(two_parts(mr), to, std::move(t));
                               });
    on_a_connection_of_its_own("queue_pair::async_rdma_read",
                               [&](queue_pair& qp, memory_region& mr, remote_buffer from, auto t) {
                                   return qp.async_rdma_read(mr, cbuf, from, std::move(t));
                               });
}

// A receive pool's receive: every cancellation type ends the wait, the connection unharmed
// and nothing lost (the later calls get the messages sent for them).
BOOST_FIXTURE_TEST_CASE(receive_pool_receive, channel_fixture) {
    auto l = make_listener(*channel);
    connection_pair p;
    run(ctx, connect_pair(l, *channel, p));
    receive_pool pool(*p.server_qp, 4, 16); // receives posted before the client sends
    std::vector<std::byte> cbuf(16);
    memory_region cmr(p.client_qp->pd(), cbuf);
    check_contract(
        ctx, "receive_pool::async_receive", [&](auto token) { return pool.async_receive(std::move(token)); },
        [&] { p.client_qp->async_send(cmr, cbuf, [](error_code, std::size_t) {}); }, {}, {true, true, true});
}

// A shard pool's operations: their handlers run on a shard's thread unless they name an
// executor (a strand of the test's context here), and the contract holds across threads.
// Each placement takes a request of its own (its client waits, never accepted); each move
// takes one connection to the other shard; each rebalance moves it back; each serve ends
// when its listener closes. No cancellation type ends one (their documentation).
BOOST_FIXTURE_TEST_CASE(shard_pool_operations, channel_fixture) {
    shard_pool pool(2);
    auto l = make_listener(*channel);
    std::deque<cm_id> clients;
    std::deque<connection_request> requests;
    run(ctx, [&]() -> awaitable<void> {
        for (int i = 0; i <= contract_starts; ++i) {
            async_connect(clients.emplace_back(*channel), l.local_endpoint(), with_qp(), [](error_code, cm_event) {});
            requests.push_back(co_await l.async_get_request(use_awaitable));
        }
    }());
    check_contract(
        ctx, "shard_pool::async_place",
        [&](auto token) {
            auto r = std::move(requests.front());
            requests.pop_front();
            return pool.async_place(std::move(r), std::move(token));
        },
        [] {}, {}, {false, false, false}, [&] { return pool.get_executor(0); });

    auto placing = pool.async_place(std::move(requests.front()), asio::use_future);
    BOOST_REQUIRE(run_until( // (the move starts on the listener's context)
        ctx, [&] { return placing.wait_for(0s) == std::future_status::ready; }, 10s));
    const pooled_connection c = placing.get();
    auto other_shard = [&] { return c.shard() == 0 ? std::size_t{1} : std::size_t{0}; };
    check_contract(
        ctx, "shard_pool::async_move", [&](auto token) { return pool.async_move(c, other_shard(), std::move(token)); },
        [] {}, {}, {false, false, false}, [&] { return pool.get_executor(other_shard()); });
    check_contract(
        ctx, "shard_pool::async_move (by key)",
        [&](auto token) { return pool.async_move(c.key(), other_shard(), std::move(token)); }, [] {}, {},
        {false, false, false}, [&] { return pool.get_executor(other_shard()); });
    const rebalance_plan back_and_forth = [&](std::span<const connection_load>, std::size_t) {
        return std::vector<planned_move>{{c.key(), c.shard(), other_shard()}};
    };
    check_contract(
        ctx, "shard_pool::async_rebalance",
        [&](auto token) { return pool.async_rebalance(back_and_forth, std::move(token)); }, [] {}, {},
        {false, false, false}, [&] { return pool.get_executor(0); });

    std::deque<listener> listeners;
    check_contract(
        ctx, "shard_pool::async_serve",
        [&](auto token) {
            return pool.async_serve(
                listeners.emplace_back(make_listener(*channel)),
                [](pooled_connection) -> awaitable<void> { co_return; }, std::move(token));
        },
        [&] { listeners.back().close(); }, asio::error::operation_aborted, {false, false, false});
}
